"""Testing a built package: its component's tests in a venv, a conda prefix or a container, and
pytest's verdict (what ran, and only that) turned into results, with the plugin the runs load."""
