"""The pytest plugin shipyard loads into a component's test run (this folder goes on its
PYTHONPATH), and the reader of test ids that it shares with `shipyard validate`."""
