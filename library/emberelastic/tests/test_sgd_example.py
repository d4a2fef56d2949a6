"""The shipped example: data-parallel SGD converges under ember-run."""
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.feature("elastic.launcher")


def test_sgd_example_converges_under_ember_run():
    proc = subprocess.run([sys.executable, "-m", "emberelastic.run", "--standalone", "--nproc-per-node", "2",
                           "--monitor-interval", "0.1", "-m", "emberelastic.examples.train_sgd", "--steps", "150"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    match = re.search(r"world_size=2 .*initial loss=([\d.]+) final loss=([\d.]+)", proc.stdout)
    assert match, proc.stdout
    initial, final = map(float, match.groups())
    assert final < 1e-3 < initial


def test_sgd_example_runs_alone():
    proc = subprocess.run([sys.executable, "-m", "emberelastic.examples.train_sgd", "--steps", "100"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "world_size=1" in proc.stdout and "final loss" in proc.stdout
