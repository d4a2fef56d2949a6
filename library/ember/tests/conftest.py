"""Markers and the --feature selector for ember's tests (run against the installed wheel)."""

import pytest


def pytest_addoption(parser):
    try:
        parser.addoption("--feature", action="append", default=[], metavar="ID",
                         help="only run tests marked @pytest.mark.feature(ID) (repeatable)")
    except ValueError:
        pass  # registered by another conftest of this tree


def pytest_configure(config):
    config.addinivalue_line("markers", "feature(id): the feature id (feature_status.yaml) a test proves")
    config.addinivalue_line("markers", "gpu: needs a CUDA device; skipped with a reason without one")


def pytest_collection_modifyitems(config, items):
    wanted = set(config.getoption("--feature") or [])
    if not wanted:
        return
    keep, drop = [], []
    for item in items:
        ids = {m.args[0] for m in item.iter_markers("feature") if m.args}
        (keep if ids & wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture
def rng():
    return __import__("numpy").random.default_rng(1234)
