"""CUDA transforms agree with the CPU ones (run only where a GPU is present)."""

import numpy as np
import pytest

import embervision
from embervision import transforms as T

pytestmark = [
    pytest.mark.feature("vision.transforms"),
    pytest.mark.gpu,
    pytest.mark.skipif(not embervision.cuda_available(),
                       reason="no usable CUDA device (or embervision built without CUDA)"),
]


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.float64])
@pytest.mark.parametrize("interpolation", ["bilinear", "nearest"])
@pytest.mark.parametrize("out_hw", [(17, 29), (120, 90)])
def test_cuda_resize_matches_cpu(dtype, interpolation, out_hw):
    x = np.random.default_rng(0).integers(0, 256, size=(4, 3, 48, 64)).astype(dtype)
    cpu = T.resize(x, out_hw, interpolation=interpolation)
    gpu = T.resize(x, out_hw, interpolation=interpolation, device="cuda")
    assert gpu.dtype == cpu.dtype and gpu.shape == cpu.shape
    if dtype == np.uint8:
        # float weights on the device vs double on the host: rounding may differ by 1
        assert np.abs(gpu.astype(int) - cpu).max() <= 1
    else:
        np.testing.assert_allclose(gpu, cpu, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_cuda_flips_match_cpu(dtype):
    x = np.random.default_rng(1).integers(0, 256, size=(2, 3, 33, 47)).astype(dtype)
    np.testing.assert_array_equal(T.hflip(x, device="cuda"), T.hflip(x))
    np.testing.assert_array_equal(T.vflip(x, device="cuda"), T.vflip(x))


def test_cuda_normalize_matches_cpu():
    x = np.random.default_rng(2).random((2, 3, 20, 30), dtype=np.float32)
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    np.testing.assert_allclose(T.normalize(x, mean, std, device="cuda"), T.normalize(x, mean, std), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.float64])
def test_cuda_crops_match_cpu(dtype):
    x = np.random.default_rng(3).integers(0, 256, size=(2, 3, 33, 47)).astype(dtype)
    for top, left, height, width in ((0, 0, 33, 47), (5, 7, 10, 20), (-4, 40, 12, 16), (30, -3, 9, 9)):
        np.testing.assert_array_equal(T.crop(x, top, left, height, width, device="cuda"),
                                      T.crop(x, top, left, height, width))
    np.testing.assert_array_equal(T.center_crop(x, (20, 50), device="cuda"), T.center_crop(x, (20, 50)))


@pytest.mark.parametrize("source, target", [(np.uint8, np.float32), (np.uint8, np.float64),
                                            (np.float32, np.uint8), (np.float64, np.uint8),
                                            (np.float64, np.float32), (np.float32, np.float64)])
def test_cuda_convert_dtype_matches_cpu(source, target):
    rng = np.random.default_rng(4)
    if source == np.uint8:
        x = rng.integers(0, 256, size=(2, 3, 17, 19), dtype=np.uint8)
    else:
        x = np.concatenate([rng.random(2 * 3 * 17 * 19 - 3), [0.0, 0.5, 1.0]]).astype(source).reshape(2, 3, 17, 19)
    gpu = T.convert_dtype(x, target, device="cuda")
    assert gpu.dtype == np.dtype(target)
    np.testing.assert_array_equal(gpu, T.convert_dtype(x, target))


def test_cuda_transforms_of_an_empty_batch():
    x = np.zeros((0, 3, 8, 8), np.float32)
    assert T.resize(x, (4, 5), device="cuda").shape == (0, 3, 4, 5)
    assert T.crop(x, 1, 1, 4, 4, device="cuda").shape == (0, 3, 4, 4)
    assert T.hflip(x, device="cuda").shape == (0, 3, 8, 8)
    assert T.convert_dtype(x, np.uint8, device="cuda").shape == (0, 3, 8, 8)
