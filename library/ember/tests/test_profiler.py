"""ember.profiler: op names, shapes, durations and the caller's file:line."""

import json
import sys

import numpy as np
import pytest

import ember

pytestmark = pytest.mark.feature("ember.profiler-stack")


def _line_of_next_call():
    return sys._getframe(1).f_lineno + 1


def test_records_ops_with_shapes_and_user_stack(tmp_path):
    a = np.ones((8, 4), np.float32)
    b = np.ones((4, 3), np.float32)
    with ember.profiler.profile(with_stack=True) as prof:
        line = _line_of_next_call()
        ember.matmul(a, b)
        ember.fft.rfft(np.ones(64))
    events = prof.events()
    assert [e.name for e in events] == ["matmul", "fft.rfft"]
    mm = events[0]
    assert mm.input_shapes == ((8, 4), (4, 3))
    assert mm.input_dtypes == ("float32", "float32")
    assert mm.duration_ns > 0
    assert mm.stack[0] == f"{__file__}:{line}"
    assert events[1].stack[0] == f"{__file__}:{line + 1}"
    assert not any("site-packages/ember" in frame or "/ember/ops.py" in frame for frame in mm.stack)


def _user_helper(x):
    return ember.relu(x)


def test_stack_points_at_user_code_not_ember_internals():
    with ember.profiler.profile(with_stack=True) as prof:
        _user_helper(np.ones(3))
        ember.mean(np.ones((3, 3)), axis=0)  # built on sum internally: recorded once
    relu, mean = prof.events()
    assert relu.stack[0] == f"{__file__}:{_user_helper.__code__.co_firstlineno + 1}"
    assert relu.stack[1].startswith(f"{__file__}:")
    assert mean.name == "mean"
    assert len(prof.events()) == 2


def test_without_stack_and_outside_profile():
    ember.add(np.ones(2), np.ones(2))  # not recorded anywhere
    with ember.profiler.profile() as prof:
        ember.add(np.ones(2), 1.0)
    (ev,) = prof.events()
    assert ev.stack == ()
    assert ev.input_shapes == ((2,), ())


def test_key_averages_and_table():
    with ember.profiler.profile(with_stack=True) as prof:
        for _ in range(3):
            ember.exp(np.ones(10))
        ember.sum(np.ones(10))
    averages = {a.key: a for a in prof.key_averages()}
    assert averages["exp"].count == 3 and averages["sum"].count == 1
    assert averages["exp"].cpu_time_total >= averages["exp"].cpu_time > 0
    table = prof.key_averages().table(sort_by="count")
    assert "exp" in table and "sum" in table and "test_profiler.py" in table
    grouped = prof.key_averages(group_by_input_shape=True)
    assert {a.key for a in grouped} == {"exp", "sum"}


def test_export_chrome_trace(tmp_path):
    with ember.profiler.profile(with_stack=True) as prof:
        ember.conv2d(np.ones((1, 2, 5, 5)), np.ones((3, 2, 3, 3)))
        with ember.profiler.record_function("my_block"):
            ember.softmax(np.ones((2, 5)))
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    events = {e["name"]: e for e in trace["traceEvents"]}
    assert set(events) == {"conv2d", "softmax", "my_block"}
    conv = events["conv2d"]
    assert conv["ph"] == "X" and conv["dur"] >= 0 and conv["ts"] >= 0
    assert conv["args"]["shapes"] == [[1, 2, 5, 5], [3, 2, 3, 3]]
    assert conv["args"]["stack"][0].startswith(f"{__file__}:")
    block = events["my_block"]
    assert block["ts"] <= events["softmax"]["ts"]
    assert block["ts"] + block["dur"] >= events["softmax"]["ts"] + events["softmax"]["dur"]
