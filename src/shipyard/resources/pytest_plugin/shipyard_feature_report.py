"""pytest plugin loaded into a component's test run: records each test's outcome and the
feature ids of its `feature` markers into the JSON file named by SHIPYARD_FEATURE_REPORT."""

import json
import os

_results: dict = {}


def pytest_configure(config):
    config.addinivalue_line("markers", "feature(id): the feature id (feature_status.yaml) this test proves")
    config.addinivalue_line("markers", "gpu: needs a CUDA device; skipped with a reason without one")


def pytest_runtest_logreport(report):
    entry = _results.setdefault(report.nodeid, {"outcome": "passed", "reason": ""})
    if report.failed:
        entry["outcome"] = "failed" if report.when == "call" else "error"
        entry["reason"] = str(report.longrepr)[-2000:]
    elif report.skipped and entry["outcome"] == "passed":
        entry["outcome"] = "skipped"
        longrepr = report.longrepr
        entry["reason"] = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)


def pytest_collection_modifyitems(session, config, items):
    # Tests of features that belong to another component (listed in SHIPYARD_OTHER_FEATURES)
    # are that component's business: they are deselected here, not counted.
    others = set(filter(None, os.environ.get("SHIPYARD_OTHER_FEATURES", "").split(",")))
    keep, dropped = [], []
    for item in items:
        features = [m.args[0] for m in item.iter_markers("feature") if m.args]
        if features and set(features) <= others:
            dropped.append(item)
            continue
        keep.append(item)
        _results.setdefault(item.nodeid, {"outcome": "passed", "reason": ""})["features"] = features
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("SHIPYARD_FEATURE_REPORT")
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({"exitstatus": int(exitstatus), "tests": _results}, fh, indent=1, sort_keys=True)
