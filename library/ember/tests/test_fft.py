"""ember.fft against numpy.fft: same shapes, dtypes and values (relative error 1e-10)."""

import numpy as np
import pytest

import ember
import ember.fft as efft

pytestmark = pytest.mark.feature("ember.fft")

# Powers of 2, 3, 5, mixed, small odd primes (generic radix), large primes (Bluestein).
LENGTHS = [1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 16, 30, 31, 37, 49, 60, 64, 97, 100, 121, 128,
           210, 243, 360, 1000, 1009, 1024, 2018, 2310, 4096, 7919, 10007, 65536]
NORMS = [None, "backward", "ortho", "forward"]


def rel_err(a, b):
    scale = np.abs(b).max()
    return np.abs(a - b).max() / (scale if scale else 1.0)


@pytest.mark.parametrize("n", LENGTHS)
def test_fft_ifft_any_length(rng, n):
    z = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    assert rel_err(efft.fft(z), np.fft.fft(z)) < 1e-10
    assert rel_err(efft.ifft(z), np.fft.ifft(z)) < 1e-10


@pytest.mark.parametrize("n", LENGTHS)
def test_rfft_irfft_any_length(rng, n):
    x = rng.standard_normal(n)
    spectrum = np.fft.rfft(x)
    assert rel_err(efft.rfft(x), spectrum) < 1e-10
    assert rel_err(efft.irfft(spectrum, n), np.fft.irfft(spectrum, n)) < 1e-10


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("func", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"])
def test_norm_modes(rng, norm, func):
    x = rng.standard_normal(90)
    if func in ("fft", "ifft", "irfft", "hfft"):
        x = x + 1j * rng.standard_normal(90)
    out = getattr(efft, func)(x, norm=norm)
    expected = getattr(np.fft, func)(x, norm=norm)
    assert out.shape == expected.shape and out.dtype == expected.dtype
    assert rel_err(out, expected) < 1e-10


@pytest.mark.parametrize("n", [5, 8, 20])
def test_n_truncates_and_pads(rng, n):
    x = rng.standard_normal(12) + 1j * rng.standard_normal(12)
    assert rel_err(efft.fft(x, n=n), np.fft.fft(x, n=n)) < 1e-10
    assert rel_err(efft.rfft(x.real, n=n), np.fft.rfft(x.real, n=n)) < 1e-10
    assert rel_err(efft.irfft(x, n=n), np.fft.irfft(x, n=n)) < 1e-10


@pytest.mark.parametrize("axis", [0, 1, -1, 2])
def test_axis_argument(rng, axis):
    x = rng.standard_normal((6, 10, 7))
    assert rel_err(efft.fft(x, axis=axis), np.fft.fft(x, axis=axis)) < 1e-10
    assert rel_err(efft.rfft(x, axis=axis), np.fft.rfft(x, axis=axis)) < 1e-10
    h = np.fft.rfft(x, axis=axis)
    assert rel_err(efft.irfft(h, axis=axis), np.fft.irfft(h, axis=axis)) < 1e-10


def test_multidimensional_transforms(rng):
    x = rng.standard_normal((6, 10, 15))
    z = x + 1j * rng.standard_normal(x.shape)
    for name in ("fft2", "ifft2", "fftn", "ifftn"):
        assert rel_err(getattr(efft, name)(z), getattr(np.fft, name)(z)) < 1e-10, name
    assert rel_err(efft.fftn(z, axes=(0, 2)), np.fft.fftn(z, axes=(0, 2))) < 1e-10
    assert rel_err(efft.fftn(z, s=(8, 9), axes=(1, 2)), np.fft.fftn(z, s=(8, 9), axes=(1, 2))) < 1e-10
    assert rel_err(efft.fft2(z, s=(4, 20), axes=(0, 1)), np.fft.fft2(z, s=(4, 20), axes=(0, 1))) < 1e-10
    assert rel_err(efft.rfftn(x), np.fft.rfftn(x)) < 1e-10
    assert rel_err(efft.rfftn(x, axes=(0, 1)), np.fft.rfftn(x, axes=(0, 1))) < 1e-10
    r = np.fft.rfftn(x)
    assert rel_err(efft.irfftn(r), np.fft.irfftn(r)) < 1e-10
    assert rel_err(efft.irfftn(r, s=x.shape), x) < 1e-10
    assert rel_err(efft.irfftn(r, s=(6, 10, 14), axes=(0, 1, 2)), np.fft.irfftn(r, s=(6, 10, 14), axes=(0, 1, 2))) < 1e-10


def test_dtypes_follow_numpy2(rng):
    x32 = rng.standard_normal(64).astype(np.float32)
    assert efft.fft(x32).dtype == np.complex64
    assert efft.rfft(x32).dtype == np.complex64
    assert efft.irfft(efft.rfft(x32)).dtype == np.float32
    assert efft.fft(x32.astype(np.float64)).dtype == np.complex128
    assert efft.fft(np.arange(8)).dtype == np.complex128
    np.testing.assert_allclose(efft.fft(x32), np.fft.fft(x32.astype(np.float64)), rtol=1e-5, atol=1e-5)


def test_round_trip_and_batches_match(rng):
    x = rng.standard_normal((50, 384))
    np.testing.assert_allclose(efft.irfft(efft.rfft(x), 384), x, atol=1e-12)
    np.testing.assert_allclose(efft.ifft(efft.fft(x)).real, x, atol=1e-12)
    batched = efft.fft(x)
    single = np.stack([efft.fft(row) for row in x])
    np.testing.assert_array_equal(batched, single)


def test_irfft_ignores_imaginary_dc_like_numpy(rng):
    h = rng.standard_normal(9) + 1j * rng.standard_normal(9)
    for n in (16, 17):
        assert rel_err(efft.irfft(h, n), np.fft.irfft(h, n)) < 1e-10


def test_frequencies_and_shifts():
    for n in (1, 8, 9):
        np.testing.assert_allclose(efft.fftfreq(n, 0.1), np.fft.fftfreq(n, 0.1))
        np.testing.assert_allclose(efft.rfftfreq(n, 0.1), np.fft.rfftfreq(n, 0.1))
    x = np.arange(30).reshape(5, 6)
    np.testing.assert_array_equal(efft.fftshift(x), np.fft.fftshift(x))
    np.testing.assert_array_equal(efft.ifftshift(x), np.fft.ifftshift(x))
    np.testing.assert_array_equal(efft.fftshift(x, axes=1), np.fft.fftshift(x, axes=1))
    np.testing.assert_array_equal(efft.ifftshift(efft.fftshift(x)), x)


def test_invalid_arguments():
    with pytest.raises(ValueError):
        efft.fft(np.ones(4), n=0)
    with pytest.raises(ValueError):
        efft.fft(np.ones(4), norm="bogus")
    with pytest.raises(TypeError):
        efft.rfft(np.ones(4, dtype=complex))


def test_plans_are_cached():
    ember._C.fft_clear_plan_cache()
    efft.fft(np.ones(1000))
    cached = ember._C.fft_plan_cache_size()
    assert cached >= 1
    efft.fft(np.ones(1000))
    assert ember._C.fft_plan_cache_size() == cached
