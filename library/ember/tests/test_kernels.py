"""ember's CPU kernels against numpy."""

import numpy as np
import pytest

import ember

pytestmark = pytest.mark.feature("ember.kernels")

BINARY = [("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide)]
UNARY = [("relu", lambda x: np.maximum(x, 0)), ("exp", np.exp), ("tanh", np.tanh),
         ("sigmoid", lambda x: 1 / (1 + np.exp(-x)))]


@pytest.mark.parametrize("name,ref", BINARY)
@pytest.mark.parametrize("shapes", [((1000,), (1000,)), ((3, 4), ()), ((5, 1, 3), (4, 1)),
                                    ((2, 3, 4), (4,)), ((300, 257), (300, 1))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_binary_broadcasting_matches_numpy(rng, name, ref, shapes, dtype):
    a = rng.standard_normal(shapes[0]).astype(dtype)
    b = (rng.standard_normal(shapes[1]) + 3).astype(dtype)
    out = getattr(ember, name)(a, b)
    expected = ref(a, b)
    assert out.shape == expected.shape and out.dtype == expected.dtype
    np.testing.assert_allclose(out, expected, rtol=1e-6 if dtype == np.float32 else 1e-15)


def test_binary_large_multithreaded_and_scalar(rng):
    a = rng.standard_normal(1 << 20)
    np.testing.assert_array_equal(ember.add(a, 2.5), a + 2.5)
    np.testing.assert_array_equal(ember.mul(a, a), a * a)
    assert ember.add(np.float32(1), np.ones(3, np.float32)).dtype == np.float32


def test_non_float_inputs_compute_in_float64():
    out = ember.add(np.arange(4), np.arange(4))
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, [0, 2, 4, 6])


@pytest.mark.parametrize("name,ref", UNARY)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary_matches_numpy(rng, name, ref, dtype):
    x = (rng.standard_normal((77, 130)) * 4).astype(dtype)
    np.testing.assert_allclose(getattr(ember, name)(x), ref(x).astype(dtype),
                               rtol=2e-6 if dtype == np.float32 else 1e-14, atol=1e-30)


def test_log_and_sigmoid_extremes():
    x = np.array([1e-300, 1.0, 1e300])
    np.testing.assert_allclose(ember.log(x), np.log(x), rtol=1e-15)
    s = ember.sigmoid(np.array([-1000.0, 0.0, 1000.0]))
    np.testing.assert_array_equal(s, [0.0, 0.5, 1.0])
    assert np.isnan(ember.relu(np.array([np.nan]))[0])


@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1, (0, 2), (1, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_match_numpy(rng, axis, keepdims):
    x = rng.standard_normal((6, 17, 9))
    for name in ("sum", "mean", "max"):
        out = getattr(ember, name)(x, axis=axis, keepdims=keepdims)
        expected = getattr(np, name)(x, axis=axis, keepdims=keepdims)
        assert np.shape(out) == np.shape(expected), name
        np.testing.assert_allclose(out, expected, rtol=1e-12, err_msg=name)


def test_sum_large_float32_is_accurate(rng):
    x = rng.standard_normal(3_000_001).astype(np.float32)
    assert ember.sum(x).dtype == np.float32
    np.testing.assert_allclose(ember.sum(x), x.astype(np.float64).sum(), rtol=1e-6)
    np.testing.assert_allclose(ember.mean(x), x.astype(np.float64).mean(), rtol=1e-5, atol=1e-7)


def test_max_propagates_nan_and_rejects_empty():
    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]])
    assert np.isnan(ember.max(x))
    np.testing.assert_array_equal(ember.max(x, axis=1)[1], 6.0)
    with pytest.raises(ValueError):
        ember.max(np.zeros((0,)))


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 5, 3), (64, 64, 64), (97, 131, 211),
                                   (300, 257, 129), (2, 1000, 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_matches_numpy(rng, m, k, n, dtype):
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    out = ember.matmul(a, b)
    assert out.dtype == dtype
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert np.abs(out - ref).max() <= tol * np.sqrt(k) * np.abs(ref).max()


def test_matmul_numpy_rules_for_vectors_and_batches(rng):
    a = rng.standard_normal((4, 3, 5))
    b = rng.standard_normal((5, 2))
    v = rng.standard_normal(5)
    np.testing.assert_allclose(ember.matmul(a, b), a @ b, rtol=1e-12)
    np.testing.assert_allclose(ember.matmul(a, v), a @ v, rtol=1e-12)
    np.testing.assert_allclose(ember.matmul(v, b), v @ b, rtol=1e-12)
    with pytest.raises(ValueError):
        ember.matmul(np.ones((2, 3)), np.ones((2, 3)))


def test_matmul_same_result_for_any_thread_count(rng):
    a = rng.standard_normal((333, 222)).astype(np.float32)
    b = rng.standard_normal((222, 111)).astype(np.float32)
    before = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        one = ember.matmul(a, b)
        ember.set_num_threads(3)
        assert ember.get_num_threads() == 3
        three = ember.matmul(a, b)
    finally:
        ember.set_num_threads(before)
    np.testing.assert_array_equal(one, three)


@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax(rng, axis):
    x = rng.standard_normal((13, 29)) * 30
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    np.testing.assert_allclose(ember.softmax(x, axis=axis), e / e.sum(axis=axis, keepdims=True), rtol=1e-12)


def _conv2d_reference(x, w, b, stride, padding):
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = x[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return out + (0 if b is None else b[None, :, None, None])


@pytest.mark.parametrize("stride,padding", [(1, 0), (1, 1), (2, 1), (3, 2)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_conv2d_matches_reference(rng, stride, padding, with_bias):
    x = rng.standard_normal((2, 3, 11, 9))
    w = rng.standard_normal((4, 3, 3, 2))
    b = rng.standard_normal(4) if with_bias else None
    out = ember.conv2d(x, w, b, stride=stride, padding=padding)
    np.testing.assert_allclose(out, _conv2d_reference(x, w, b, stride, padding), rtol=1e-11, atol=1e-12)


def test_conv2d_float32_unbatched(rng):
    x = rng.standard_normal((3, 8, 8)).astype(np.float32)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    out = ember.conv2d(x, w, padding=1)
    assert out.shape == (5, 8, 8) and out.dtype == np.float32
    np.testing.assert_allclose(out, _conv2d_reference(x[None], w, None, 1, 1)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("stride,padding", [(1, 0), (2, 2)])
def test_conv1d_matches_numpy_correlate(rng, stride, padding):
    x = rng.standard_normal((2, 3, 40))
    w = rng.standard_normal((4, 3, 5))
    b = rng.standard_normal(4)
    out = ember.conv1d(x, w, b, stride=stride, padding=padding)
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding)))
    ref = np.stack([np.stack([sum(np.correlate(xp[n, c], w[o, c], "valid") for c in range(3)) + b[o]
                              for o in range(4)]) for n in range(2)])[:, :, ::stride]
    np.testing.assert_allclose(out, ref, rtol=1e-11, atol=1e-12)


def test_conv_rejects_kernel_larger_than_input():
    with pytest.raises(ValueError):
        ember.conv2d(np.ones((1, 1, 2, 2)), np.ones((1, 1, 3, 3)))


def test_index_add_matches_numpy(rng):
    x = rng.standard_normal((10, 6))
    index = np.array([0, 3, 3, 9, 0, 3])
    src = rng.standard_normal((6, 6))
    expected = x.copy()
    np.add.at(expected, index, src)
    np.testing.assert_allclose(ember.index_add(x, 0, index, src), expected, rtol=1e-12)
    np.testing.assert_allclose(ember.index_add(x.T, 1, index, src.T), expected.T, rtol=1e-12)


def test_set_num_threads_validates():
    with pytest.raises(ValueError):
        ember.set_num_threads(0)
    assert ember.get_num_threads() >= 1


def test_build_info_and_features_unlabelled_or_stamped():
    info = ember.build_info()
    assert "variant" in info
    assert isinstance(ember.features(), dict)


@pytest.mark.parametrize("isa", ["generic", "avx2"])
def test_matmul_narrower_cpu_kernels(isa):
    # The widest kernel the CPU supports is picked once per process; EMBER_GEMM_ISA caps it,
    # so the SSE2/NEON and AVX2 kernels are checked here on any machine.
    import os
    import subprocess
    import sys

    code = (
        "import numpy as np, ember\n"
        "rng = np.random.default_rng(3)\n"
        "for dt in (np.float32, np.float64):\n"
        "    a = rng.standard_normal((131, 77)).astype(dt); b = rng.standard_normal((77, 203)).astype(dt)\n"
        "    ref = a.astype(np.float64) @ b\n"
        "    err = np.abs(ember.matmul(a, b) - ref).max() / np.abs(ref).max()\n"
        "    assert err < (1e-5 if dt == np.float32 else 1e-12), (dt, err)\n"
    )
    env = dict(os.environ, EMBER_GEMM_ISA=isa)
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
