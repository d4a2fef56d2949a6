"""Publishing: the artifacts of dist/manifest.json to the targets of release.yaml's `publish`,
per channel (nightly, test, release), atomically, resumably and never twice with other bytes.

plan.py decides what goes where (gating, the PyPI flavour); run.py drives one publish or
promotion through the targets, each behind the small interface of target.py: devpi.py (a
PyPI-compatible server), static_tree.py (PyTorch's download layout), conda_channel.py (a static
conda channel), registry.py (images in a docker registry). credentials.py, retry.py and journal.py are
what every target shares.
"""
