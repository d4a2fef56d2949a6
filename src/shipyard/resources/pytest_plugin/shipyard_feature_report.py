"""pytest plugin loaded into a component's test run: records what ran, test by test, with each
test's feature ids, into the file named by SHIPYARD_FEATURE_REPORT.

The record is written as it happens, one JSON object a line, so that a run that dies (a
signal, an `os._exit`) still leaves what it collected, what finished and which test was
running: `collected` when collection ends, `start` and one `report` per setup/call/teardown
of each test, `collection-error`, `collection-skip`, `interrupted` (pytest.exit(), Ctrl-C, a
collection error that stops the run) and `finish`. A test's outcome is read from its own reports and nothing
else (shipyard.testing.verdict folds the record); a collected test with no report did not run.

A test's features are those that list it in feature_status.yaml (passed in as the JSON file
SHIPYARD_FEATURE_TESTS, ids relative to SHIPYARD_TESTS_ROOT) plus those its `feature`
markers name. A listed id that no collected test matches is recorded too (`unmatched`).

The component's own configuration must not decide what is proven: `-x`/`--maxfail` would stop
the run at the first failure of any test (a beta one, say) and leave stable tests unproven, and
xdist workers would each run the hooks below in a process of their own; both are turned off.
"""

import json
import os
from pathlib import Path

import pytest
from shipyard_test_ids import selects

_listed: dict = {}
_root = None
_rootpath = Path(".")  # pytest's rootdir, which its node ids are relative to
_ids: dict = {}  # pytest's node id -> the id relative to SHIPYARD_TESTS_ROOT
_deselected: set = set()
_errors: list = []  # ids of the collectors that failed or skipped themselves


def _write(event: dict) -> None:
    path = os.environ.get("SHIPYARD_FEATURE_REPORT")
    if path:
        # Opened and closed each time: what is written survives the interpreter's death.
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(event, sort_keys=True) + "\n")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    global _listed, _root, _rootpath
    config.addinivalue_line("markers", "feature(id): the feature id (feature_status.yaml) this test proves")
    config.addinivalue_line("markers", "gpu: needs a CUDA device; skipped with a reason without one")
    # Before xdist's and stepwise's own pytest_configure (tryfirst): every test runs, here.
    config.option.maxfail = 0
    for name, value in (("dist", "no"), ("tx", []), ("numprocesses", 0), ("stepwise", False),
                        ("stepwise_skip", False)):
        if hasattr(config.option, name):
            setattr(config.option, name, value)
    listed = os.environ.get("SHIPYARD_FEATURE_TESTS")
    _listed = json.loads(Path(listed).read_text(encoding="utf-8")) if listed else {}
    root = os.environ.get("SHIPYARD_TESTS_ROOT")
    _root = Path(root).resolve() if root else None
    _rootpath = Path(config.rootpath)


def _relative(nodeid: str) -> str:
    """`nodeid` with its file made relative to SHIPYARD_TESTS_ROOT (pytest's are relative to its
    rootdir, which a component's pytest.ini moves)."""
    if nodeid not in _ids:
        file, sep, rest = nodeid.partition("::")
        try:
            rel = (_rootpath / file).resolve().relative_to(_root).as_posix() if _root else file
        except ValueError:
            rel = file
        _ids[nodeid] = rel + sep + rest
    return _ids[nodeid]


def _listed_features(test_id: str) -> list:
    """Feature ids whose YAML test ids name this test (or the file, class or folder that holds it)."""
    return sorted({f for listed, features in _listed.items() if selects(listed, test_id) for f in features})


def pytest_collectreport(report):
    if report.failed:
        text = str(report.longrepr).strip().splitlines()
        test_id = _relative(report.nodeid)
        _errors.append(test_id)
        _write({"event": "collection-error", "id": test_id, "summary": text[-1] if text else "collection failed",
                "reason": str(report.longrepr)[-2000:], "features": _listed_features(test_id)})
    elif report.skipped:
        # A module that skips itself (pytest.skip(allow_module_level=True), importorskip): its
        # listed features are skipped there, with the reason, not "not run".
        test_id = _relative(report.nodeid)
        _errors.append(test_id)
        _write({"event": "collection-skip", "id": test_id, "reason": _skip_reason(report),
                "features": _listed_features(test_id)})


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason[len("Skipped: "):] if reason.startswith("Skipped: ") else reason


def _features(item) -> list:
    marked = {m.args[0] for m in item.iter_markers("feature") if m.args}
    return sorted(marked | set(_listed_features(_relative(item.nodeid))))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    # Tests of features that belong to another component (listed in SHIPYARD_OTHER_FEATURES)
    # are that component's business: they are deselected here, not counted.
    others = set(filter(None, os.environ.get("SHIPYARD_OTHER_FEATURES", "").split(",")))
    keep, dropped = [], []
    for item in items:
        features = _features(item)
        (dropped if features and set(features) <= others else keep).append(item)
    if dropped:
        for item in dropped:
            # shipyard_selection (pytest_args) records what the release left out; another
            # component's tests are not that, whichever of the two plugins pluggy calls first.
            item.shipyard_other_component = True
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def pytest_deselected(items):
    _deselected.update(_relative(item.nodeid) for item in items)


def pytest_collection_finish(session):
    # The final list, after every plugin and conftest had its say.
    collected = {_relative(item.nodeid): _features(item) for item in session.items}
    seen = [*collected, *_deselected, *_errors]
    others = set(filter(None, os.environ.get("SHIPYARD_OTHER_FEATURES", "").split(",")))
    unmatched = {listed: features for listed, features in sorted(_listed.items())
                 if not set(features) <= others and not any(selects(listed, test) for test in seen)}
    _write({"event": "collected", "tests": collected, "unmatched": unmatched})


def pytest_runtest_logstart(nodeid, location):
    _write({"event": "start", "id": _relative(nodeid)})


def pytest_runtest_logreport(report):
    event = {"event": "report", "id": _relative(report.nodeid), "when": report.when,
             "outcome": report.outcome, "seconds": round(report.duration, 3)}
    if report.failed:
        event["reason"] = str(report.longrepr)[-2000:]
    elif report.skipped:
        event["reason"] = _skip_reason(report)
    _write(event)


def pytest_keyboard_interrupt(excinfo):
    # pytest.exit() (Exit), Ctrl-C, and the Interrupted that a collection error raises.
    message = str(excinfo.value).strip() or excinfo.typename
    how = "pytest.exit()" if excinfo.typename == "Exit" else excinfo.typename
    _write({"event": "interrupted", "reason": f"{how}: {message}"})


def pytest_sessionfinish(session, exitstatus):
    _write({"event": "finish", "exitstatus": int(exitstatus),
            "stopped": str(session.shouldfail or session.shouldstop or "")})
