"""pytest plugin loaded into a component's test run: records each test's outcome and its
feature ids (and its seconds) into the JSON file named by SHIPYARD_FEATURE_REPORT.

A test's features are those that list it in feature_status.yaml (passed in as the JSON file
SHIPYARD_FEATURE_TESTS, ids relative to SHIPYARD_TESTS_ROOT) plus those its `feature`
markers name. A module that fails to import is recorded as an error of the features that
list it, and under `collection_errors`.
"""

import json
import os
import re
from pathlib import Path

_results: dict = {}
_collection_errors: list = []
_listed: dict = {}
_root = None


def pytest_configure(config):
    global _listed, _root
    config.addinivalue_line("markers", "feature(id): the feature id (feature_status.yaml) this test proves")
    config.addinivalue_line("markers", "gpu: needs a CUDA device; skipped with a reason without one")
    listed = os.environ.get("SHIPYARD_FEATURE_TESTS")
    _listed = json.loads(Path(listed).read_text(encoding="utf-8")) if listed else {}
    root = os.environ.get("SHIPYARD_TESTS_ROOT")
    _root = Path(root).resolve() if root else None


def _listed_features(path, nodeid: str) -> list:
    """Feature ids whose YAML test ids name this file, one of its directories, or this test."""
    if _root is None or not _listed:
        return []
    try:
        rel = Path(path).resolve().relative_to(_root).as_posix()
    except ValueError:
        return []
    parts = [re.sub(r"\[.*\]$", "", p) for p in nodeid.split("::")[1:]]
    candidates = {rel} | {"::".join([rel, *parts[:n]]) for n in range(1, len(parts) + 1)}
    found = set()
    for test_id, features in _listed.items():
        if test_id in candidates or rel.startswith(test_id.rstrip("/") + "/"):
            found.update(features)
    return sorted(found)


def pytest_collectreport(report):
    if report.failed:
        path = getattr(report, "fspath", None) or report.nodeid
        text = str(report.longrepr).strip().splitlines()
        _collection_errors.append(f"{report.nodeid}: {text[-1] if text else 'collection failed'}")
        _results[report.nodeid] = {"outcome": "error", "reason": str(report.longrepr)[-2000:],
                                   "features": _listed_features(path, report.nodeid)}


def pytest_runtest_logreport(report):
    entry = _results.setdefault(report.nodeid, {"outcome": "passed", "reason": ""})
    # Setup, call and teardown: a fixture that waits is the test's cost too.
    entry["seconds"] = round(entry.get("seconds", 0.0) + report.duration, 3)
    if report.failed:
        entry["outcome"] = "failed" if report.when == "call" else "error"
        entry["reason"] = str(report.longrepr)[-2000:]
    elif report.skipped and entry["outcome"] == "passed":
        entry["outcome"] = "skipped"
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        entry["reason"] = reason[len("Skipped: "):] if reason.startswith("Skipped: ") else reason


def pytest_collection_modifyitems(session, config, items):
    # Tests of features that belong to another component (listed in SHIPYARD_OTHER_FEATURES)
    # are that component's business: they are deselected here, not counted.
    others = set(filter(None, os.environ.get("SHIPYARD_OTHER_FEATURES", "").split(",")))
    keep, dropped = [], []
    for item in items:
        marked = {m.args[0] for m in item.iter_markers("feature") if m.args}
        features = sorted(marked | set(_listed_features(item.path, item.nodeid)))
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
            json.dump({"exitstatus": int(exitstatus), "tests": _results, "collection_errors": _collection_errors},
                      fh, indent=1, sort_keys=True)
