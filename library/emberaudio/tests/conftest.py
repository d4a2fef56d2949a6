"""Markers (feature, gpu) and the --feature selector."""


def pytest_addoption(parser):
    parser.addoption(
        "--feature",
        action="append",
        default=[],
        metavar="ID",
        help="run only tests marked @pytest.mark.feature(ID); may be repeated",
    )


def pytest_configure(config):
    config.addinivalue_line("markers", "feature(id): the feature_status.yaml feature this test proves")
    config.addinivalue_line("markers", "gpu: needs a CUDA device; skipped with a reason when none is present")


def pytest_collection_modifyitems(config, items):
    wanted = set(config.getoption("--feature"))
    if not wanted:
        return
    selected, deselected = [], []
    for item in items:
        ids = {m.args[0] for m in item.iter_markers("feature") if m.args}
        (selected if ids & wanted else deselected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected
