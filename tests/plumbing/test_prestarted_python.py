"""A Python started ahead of its command (command.PrestartedPython) runs a script as a plain
start would: its argv, working folder, environment and exit status, in the usual scheduling
class; it refuses a command it was not started for and ends unused when closed."""

from __future__ import annotations

import json
import os
import sys

import pytest

from shipyard.errors import ToolError
from shipyard.plumbing import command
from shipyard.plumbing.command import PrestartedPython

SCRIPT = """\
import json, os, sys
print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "late": os.environ.get("LATE"),
                  "early": os.environ.get("EARLY"), "imported": "decimal" in sys.modules,
                  "path0": sys.path[0], "main": __name__,
                  "policy": os.sched_getscheduler(0) if hasattr(os, "sched_getscheduler") else None}))
sys.exit(int(sys.argv[1]))
"""


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "scripts" / "show.py"
    path.parent.mkdir()
    path.write_text(SCRIPT)
    return str(path)


@pytest.mark.parametrize("safe_path", ["", "1"], ids=["script-folder-first", "PYTHONSAFEPATH"])
def test_it_runs_the_script_as_a_plain_start_would(tmp_path, script, safe_path):
    env = {"EARLY": "1"} | ({"PYTHONSAFEPATH": safe_path} if safe_path else {})
    started = PrestartedPython(sys.executable, imports=["decimal"], cwd=tmp_path, env=env)
    argv = [sys.executable, script, "0", "more"]
    assert started.fits(argv, tmp_path, env)
    done = started.run(argv, late_env={"LATE": "2"}, timeout=60)
    plain = command.run(argv, cwd=tmp_path, extra_env={**env, "LATE": "2"}, timeout=60)
    seen, expected = json.loads(done.stdout), json.loads(plain.stdout)
    assert seen.pop("imported") is True and expected.pop("imported") is False  # the import was done ahead
    assert seen == expected  # sys.path[0] included: the script's folder, or (safe path) not
    assert seen["argv"] == [script, "0", "more"]
    assert (seen["path0"] == os.path.dirname(script)) is (not safe_path)
    assert seen["main"] == "__main__" and seen["late"] == "2" and seen["early"] == "1"
    if hasattr(os, "SCHED_OTHER"):
        assert seen["policy"] == os.SCHED_OTHER  # waited in the idle class, runs in the usual one
    assert started.used


def test_a_failing_script_raises_with_its_output(tmp_path, script):
    started = PrestartedPython(sys.executable, imports=[], cwd=tmp_path, env={})
    with pytest.raises(ToolError, match="show failed \\(exit 3\\)") as caught:
        started.run([sys.executable, script, "3"], late_env={}, timeout=60, what="show")
    assert '"argv"' in caught.value.output


def test_it_refuses_a_command_it_was_not_started_for(tmp_path, script):
    started = PrestartedPython(sys.executable, imports=[], cwd=tmp_path, env={"EARLY": "1"})
    try:
        argv = [sys.executable, script, "0"]
        assert not started.fits(argv, tmp_path, {"EARLY": "other"})  # another environment
        assert not started.fits(argv, tmp_path / "scripts", {"EARLY": "1"})  # another folder
        assert not started.fits(["/usr/bin/python3-other", script], tmp_path, {"EARLY": "1"})
        assert started.fits(argv, tmp_path, {"EARLY": "1"})
    finally:
        started.close()
    assert not started.fits(argv, tmp_path, {"EARLY": "1"})  # closed: it ended unused
    assert not started.used


def test_a_script_out_of_time_is_ended_and_says_what_it_wrote(tmp_path):
    slow = tmp_path / "slow.py"
    slow.write_text("import sys, time\nprint('started the slow part', file=sys.stderr, flush=True)\ntime.sleep(60)\n")
    started = PrestartedPython(sys.executable, imports=[], cwd=tmp_path, env={})
    with pytest.raises(ToolError, match="slow: timed out after 2s") as caught:
        started.run([sys.executable, str(slow)], late_env={}, timeout=2, what="slow")
    assert "started the slow part" in caught.value.output
    assert not started.fits([sys.executable, str(slow)], tmp_path, {})  # ended, not reusable
