"""ember.cuda: build facts on every build; GPU results where a device exists."""

import re

import numpy as np
import pytest

import ember

pytestmark = pytest.mark.feature("ember.cuda")

needs_gpu = pytest.mark.skipif(not ember.cuda.is_available(),
                               reason="no usable CUDA device (or a CPU build of ember)")


def test_state_is_consistent():
    archs = ember.cuda.arch_list()
    assert all(re.fullmatch(r"sm_\d+", a) for a in archs)
    if ember.cuda.compiled_with_cuda():
        assert archs, "a CUDA build lists its compiled archs"
    else:
        assert archs == []
        assert ember.cuda.is_available() is False
        assert ember.cuda.device_count() == 0
    if ember.cuda.is_available():
        assert ember.cuda.device_count() >= 1


def test_build_info_matches_compiled_archs():
    info = ember.build_info()
    if info.get("variant") == "unlabelled":
        assert info["cuda_archs"] == ember.cuda.arch_list()


@pytest.mark.skipif(ember.cuda.is_available(), reason="a CUDA device is present")
def test_device_cuda_raises_clear_error_without_device():
    with pytest.raises(RuntimeError, match="CUDA|cuda"):
        ember.add(np.ones(3), np.ones(3), device="cuda")
    with pytest.raises(RuntimeError, match="CUDA|cuda"):
        ember.matmul(np.ones((2, 2)), np.ones((2, 2)), device="cuda")
    # the default device always works
    np.testing.assert_array_equal(ember.add(np.ones(3), np.ones(3)), 2 * np.ones(3))


def test_unknown_device_rejected():
    with pytest.raises(ValueError):
        ember.add(np.ones(3), np.ones(3), device="tpu")


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_elementwise(rng, dtype):
    a = rng.standard_normal((300, 257)).astype(dtype)
    b = rng.standard_normal(257).astype(dtype) + 3
    for name, ref in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide)):
        np.testing.assert_allclose(getattr(ember, name)(a, b, device="cuda"), ref(a, b), rtol=1e-6)
    for name, ref in (("relu", lambda x: np.maximum(x, 0)), ("exp", np.exp), ("tanh", np.tanh)):
        np.testing.assert_allclose(getattr(ember, name)(a, device="cuda"), ref(a), rtol=1e-5)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("axis", [0, 1, (0, 1)])
def test_gpu_reductions(rng, axis):
    x = rng.standard_normal((513, 70))
    np.testing.assert_allclose(ember.sum(x, axis=axis, device="cuda"), x.sum(axis=axis), rtol=1e-10)
    np.testing.assert_allclose(ember.max(x, axis=axis, device="cuda"), x.max(axis=axis))


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_matmul(rng, dtype):
    a = rng.standard_normal((129, 77)).astype(dtype)
    b = rng.standard_normal((77, 65)).astype(dtype)
    ref = a.astype(np.float64) @ b
    np.testing.assert_allclose(ember.matmul(a, b, device="cuda"), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
@needs_gpu
def test_gpu_index_add_and_determinism(rng):
    x = rng.standard_normal((10, 4))
    idx = np.array([1, 1, 3])
    src = rng.standard_normal((3, 4))
    ref = x.copy()
    np.add.at(ref, idx, src)
    ember.set_deterministic(False)
    np.testing.assert_allclose(ember.index_add(x, 0, idx, src, device="cuda"), ref, rtol=1e-12)
    ember.set_deterministic(True)
    try:
        with pytest.raises(RuntimeError, match="index_add"):
            ember.index_add(x, 0, idx, src, device="cuda")
    finally:
        ember.set_deterministic(False)


@pytest.mark.gpu
@needs_gpu
def test_gpu_empty_arrays_launch_no_kernel():
    # A grid of zero blocks is an invalid launch: every op must return before launching.
    empty = np.empty((0, 5))
    for name, ref in (("add", np.add), ("mul", np.multiply)):
        assert getattr(ember, name)(empty, empty, device="cuda").shape == ref(empty, empty).shape
    assert ember.exp(np.empty(0), device="cuda").shape == (0,)
    np.testing.assert_array_equal(ember.sum(empty, axis=0, device="cuda"), np.zeros(5))  # sum of nothing
    assert ember.sum(empty, axis=1, device="cuda").shape == (0,)
    with pytest.raises(ValueError, match="no identity"):
        ember.max(empty, axis=0, device="cuda")
    np.testing.assert_array_equal(ember.matmul(np.empty((3, 0)), np.empty((0, 4)), device="cuda"), np.zeros((3, 4)))
    assert ember.matmul(np.empty((0, 3)), np.ones((3, 4)), device="cuda").shape == (0, 4)
    x = np.ones((4, 2))
    np.testing.assert_array_equal(
        ember.index_add(x, 0, np.empty(0, dtype=np.int64), np.empty((0, 2)), device="cuda"), x)
    # the device is still healthy: a sticky launch error would fail the next real op
    np.testing.assert_array_equal(ember.add(np.ones(3), np.ones(3), device="cuda"), 2 * np.ones(3))
