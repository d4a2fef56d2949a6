"""pytest plugin loaded into a component's test run when release.yaml gives it `pytest_args`:
deselects the `--deselect` ids (relative to the tests folder, SHIPYARD_TESTS_ROOT, whatever
pytest takes as its rootdir) and writes every test the selection left out (those ids, and what
`-k`/`-m` deselected) to the JSON file named by SHIPYARD_LEFT_OUT.

Its collection hook runs before pytest's own -k/-m deselection (a builtin, called last), so
what -k/-m drop is counted; what the feature report plugin drops as another component's tests
carries `shipyard_other_component` and is not.
"""

import json
import os
from pathlib import Path

_left_out: list = []
_armed = False


def _relative_id(item):
    root = os.environ.get("SHIPYARD_TESTS_ROOT")
    try:
        rel = Path(item.path).resolve().relative_to(Path(root).resolve()).as_posix() if root else None
    except ValueError:
        rel = None
    if rel is None:
        return item.nodeid
    return "::".join([rel, *item.nodeid.split("::")[1:]])


def _names(wanted, test_id):
    """Whether the id `wanted` names `test_id`: the test, its class or module, or a folder of it."""
    return test_id == wanted or test_id.startswith((wanted + "::", wanted + "[", wanted + "/"))


def pytest_collection_modifyitems(session, config, items):
    global _armed
    request = os.environ.get("SHIPYARD_SELECTION")
    wanted = json.loads(Path(request).read_text(encoding="utf-8"))["deselect"] if request else []
    keep, dropped = [], []
    for item in items:
        test_id = _relative_id(item)
        if any(_names(d.rstrip("/"), test_id) for d in wanted):
            dropped.append(item)
        else:
            keep.append(item)
    _armed = True
    if dropped:
        items[:] = keep
        config.hook.pytest_deselected(items=dropped)


def pytest_deselected(items):
    if _armed:
        _left_out.extend(_relative_id(item) for item in items if not getattr(item, "shipyard_other_component", False))


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("SHIPYARD_LEFT_OUT")
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({"deselected": sorted(set(_left_out))}, fh, indent=1)
