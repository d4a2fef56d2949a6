"""Transforms against Pillow (resize) and NumPy references; batches equal per-image results."""

import numpy as np
import pytest
from PIL import Image

import embervision
from embervision import transforms as T

pytestmark = pytest.mark.feature("vision.transforms")

# Stated tolerances:
#  - uint8 bilinear vs Pillow: at most 1 grey level (Pillow uses 22-bit fixed-point
#    weights, we use double; both round after each pass).
#  - float32 bilinear vs Pillow mode "F": 1e-5 relative + 1e-5 absolute on [0, 1] data.
#  - nearest: exact integer formula; equal to Pillow except at exact ties (see below).
#  - antialias=False vs the NumPy half-pixel reference (torch's formula): 1e-9 in
#    float64, 1 grey level in uint8.
UINT8_TOLERANCE = 1

SIZES = [((32, 48), (16, 24)), ((32, 48), (64, 96)), ((31, 47), (20, 13)), ((17, 23), (40, 9)),
         ((50, 50), (7, 7)), ((10, 12), (10, 30))]


def image_u8(channels, height, width, seed=0):
    return np.random.default_rng(seed).integers(0, 256, size=(channels, height, width), dtype=np.uint8)


def pillow_resize(plane, out_hw, resample):
    mode = "F" if plane.dtype == np.float32 else "L"
    pil = Image.frombytes(mode, plane.shape[::-1], np.ascontiguousarray(plane).tobytes())
    return np.asarray(pil.resize((out_hw[1], out_hw[0]), resample))


@pytest.mark.parametrize("in_hw,out_hw", SIZES)
def test_bilinear_uint8_matches_pillow(in_hw, out_hw):
    x = image_u8(3, *in_hw)
    ours = T.resize(x, out_hw)
    assert ours.shape == (3,) + out_hw and ours.dtype == np.uint8
    for c in range(3):
        ref = pillow_resize(x[c], out_hw, Image.BILINEAR)
        assert np.abs(ours[c].astype(int) - ref).max() <= UINT8_TOLERANCE


def test_bilinear_rgb_matches_pillow_rgb_image():
    x = image_u8(3, 40, 30, seed=5)
    ours = T.resize(x, (17, 45))
    ref = np.asarray(Image.fromarray(T.to_hwc(x)).resize((45, 17), Image.BILINEAR))
    assert np.abs(T.to_hwc(ours).astype(int) - ref).max() <= UINT8_TOLERANCE


@pytest.mark.parametrize("in_hw,out_hw", SIZES)
def test_bilinear_float32_matches_pillow(in_hw, out_hw):
    x = np.random.default_rng(1).random((2,) + in_hw, dtype=np.float32)
    ours = T.resize(x, out_hw)
    assert ours.dtype == np.float32
    for c in range(2):
        np.testing.assert_allclose(ours[c], pillow_resize(x[c], out_hw, Image.BILINEAR), rtol=1e-5, atol=1e-5)


def nearest_index(in_size, out_size):
    """Exact floor((o + 0.5) * in / out) in integers."""
    return (2 * np.arange(out_size) + 1) * in_size // (2 * out_size)


def exact_ties(in_size, out_size):
    return (2 * np.arange(out_size) + 1) * in_size % (2 * out_size) == 0


@pytest.mark.parametrize("in_hw,out_hw", SIZES)
def test_nearest_matches_exact_formula_and_pillow(in_hw, out_hw):
    x = image_u8(1, *in_hw, seed=2)
    ours = T.resize(x, out_hw, interpolation="nearest")
    rows, cols = nearest_index(in_hw[0], out_hw[0]), nearest_index(in_hw[1], out_hw[1])
    np.testing.assert_array_equal(ours[0], x[0][rows][:, cols])
    # Pillow agrees except where (o + 0.5) * in / out is an exact integer: its 16.16
    # fixed-point coordinates land just below the tie and pick the previous pixel.
    pillow = pillow_resize(x[0], out_hw, Image.NEAREST)
    differ = ours[0] != pillow
    tie = exact_ties(in_hw[0], out_hw[0])[:, None] | exact_ties(in_hw[1], out_hw[1])[None, :]
    assert not (differ & ~tie).any()


def bilinear_reference(x, out_h, out_w):
    """Plain NumPy half-pixel bilinear without antialias (torch align_corners=False)."""

    def axis_weights(in_size, out_size):
        src = np.maximum((np.arange(out_size) + 0.5) * in_size / out_size - 0.5, 0.0)
        i0 = np.floor(src).astype(int)
        i1 = np.minimum(i0 + 1, in_size - 1)
        frac = src - i0
        return i0, i1, frac

    y0, y1, fy = axis_weights(x.shape[-2], out_h)
    x0, x1, fx = axis_weights(x.shape[-1], out_w)
    x = x.astype(np.float64)
    rows = x[..., y0, :] * (1 - fy)[:, None] + x[..., y1, :] * fy[:, None]
    return rows[..., x0] * (1 - fx) + rows[..., x1] * fx


@pytest.mark.parametrize("in_hw,out_hw", SIZES)
def test_bilinear_without_antialias_matches_numpy_reference(in_hw, out_hw):
    x = np.random.default_rng(3).random((2,) + in_hw)
    ours = T.resize(x, out_hw, antialias=False)
    np.testing.assert_allclose(ours, bilinear_reference(x, *out_hw), rtol=0, atol=1e-9)
    x8 = image_u8(2, *in_hw, seed=3)
    ours8 = T.resize(x8, out_hw, antialias=False)
    assert np.abs(ours8 - np.round(bilinear_reference(x8, *out_hw))).max() <= UINT8_TOLERANCE


def test_upscaling_is_the_same_with_and_without_antialias():
    x = np.random.default_rng(4).random((3, 9, 11))
    np.testing.assert_allclose(T.resize(x, (20, 30)), T.resize(x, (20, 30), antialias=False), atol=1e-12)


def test_resize_int_size_matches_shorter_edge():
    assert T.resize(image_u8(3, 40, 60), 20).shape == (3, 20, 30)
    assert T.resize(image_u8(3, 60, 40), 20).shape == (3, 30, 20)
    assert T.resize(image_u8(1, 33, 100), [11]).shape == (1, 11, 33)


def test_resize_constant_image_stays_constant():
    x = np.full((2, 13, 17), 0.25, dtype=np.float32)
    np.testing.assert_allclose(T.resize(x, (5, 40)), 0.25, rtol=1e-6)


def test_center_crop_matches_slicing():
    x = image_u8(3, 21, 30)
    top, left = int(round((21 - 10) / 2)), int(round((30 - 7) / 2))
    np.testing.assert_array_equal(T.center_crop(x, (10, 7)), x[:, top:top + 10, left:left + 7])
    np.testing.assert_array_equal(T.center_crop(x, 8), x[:, 6:14, 11:19])


def test_center_crop_larger_than_image_pads_with_zeros():
    x = np.ones((1, 4, 4), dtype=np.float32)
    out = T.center_crop(x, (6, 8))
    assert out.shape == (1, 6, 8)
    assert out.sum() == 16
    np.testing.assert_array_equal(out[0, 1:5, 2:6], 1)


def test_crop_outside_is_zero():
    x = image_u8(2, 5, 5) | 1  # no zero pixels inside
    out = T.crop(x, -2, 3, 4, 4)
    np.testing.assert_array_equal(out[:, :2], 0)
    np.testing.assert_array_equal(out[:, :, 2:], 0)
    np.testing.assert_array_equal(out[:, 2:, :2], x[:, :2, 3:5])


def test_random_crop_is_seeded_and_matches_a_window():
    x = image_u8(3, 40, 50)
    a = T.random_crop(x, (12, 20), np.random.default_rng(7))
    b = T.random_crop(x, (12, 20), np.random.default_rng(7))
    np.testing.assert_array_equal(a, b)
    rng = np.random.default_rng(7)
    top, left = int(rng.integers(0, 40 - 12 + 1)), int(rng.integers(0, 50 - 20 + 1))
    np.testing.assert_array_equal(a, x[:, top:top + 12, left:left + 20])
    positions = {T.random_crop(x, 5, np.random.default_rng(s))[0, 0, 0] for s in range(30)}
    assert len(positions) > 5
    with pytest.raises(ValueError, match="larger than the image"):
        T.random_crop(x, (41, 5), 0)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.float64])
def test_flips_match_numpy(dtype):
    x = image_u8(3, 7, 9).astype(dtype)
    np.testing.assert_array_equal(T.hflip(x), x[:, :, ::-1])
    np.testing.assert_array_equal(T.vflip(x), x[:, ::-1, :])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_normalize_matches_numpy(dtype):
    x = np.random.default_rng(8).random((3, 10, 12)).astype(dtype)
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    ours = T.normalize(x, mean, std)
    assert ours.dtype == dtype
    ref = (x - np.asarray(mean, dtype)[:, None, None]) / np.asarray(std, dtype)[:, None, None]
    np.testing.assert_allclose(ours, ref, rtol=1e-6 if dtype == np.float32 else 1e-12)


def test_normalize_rejects_bad_input():
    with pytest.raises(TypeError, match="float"):
        T.normalize(image_u8(3, 4, 4), [0, 0, 0], [1, 1, 1])
    with pytest.raises(ValueError, match="zeros"):
        T.normalize(np.zeros((3, 4, 4), np.float32), [0, 0, 0], [1, 0, 1])
    with pytest.raises(ValueError):
        T.normalize(np.zeros((3, 4, 4), np.float32), [0, 0], [1, 1])


def test_convert_dtype_matches_torchvision_formulas():
    x = np.arange(256, dtype=np.uint8).reshape(1, 16, 16)
    f = T.convert_dtype(x, np.float32)
    np.testing.assert_allclose(f, x / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(T.convert_dtype(f, np.uint8), x)
    values = np.array([0.0, 0.5, 0.999, 1.0], dtype=np.float32)
    np.testing.assert_array_equal(T.convert_dtype(values, np.uint8), np.floor(values * (256 - 1e-3)))
    np.testing.assert_array_equal(T.convert_dtype(np.array([65535, 256], np.uint16), np.uint8), [255, 1])
    np.testing.assert_array_equal(T.convert_dtype(np.array([255, 1], np.uint8), np.uint16), [65280, 256])


def test_compose_applies_in_order():
    rng = np.random.default_rng(9)
    image = rng.integers(0, 256, size=(40, 60, 3), dtype=np.uint8)  # HWC, as decoded
    pipeline = T.Compose([
        T.ToCHW(),
        T.Resize(32),
        T.CenterCrop(28),
        T.ConvertDtype(np.float32),
        T.Normalize([0.5] * 3, [0.25] * 3),
    ])
    out = pipeline(image)
    chw = T.to_chw(image)
    manual = T.normalize(T.convert_dtype(T.center_crop(T.resize(chw, 32), 28), np.float32), [0.5] * 3, [0.25] * 3)
    assert out.shape == (3, 28, 28)
    np.testing.assert_array_equal(out, manual)
    assert "Resize" in repr(pipeline)


def test_random_horizontal_flip_is_seeded():
    x = image_u8(1, 3, 4)
    flips = [T.RandomHorizontalFlip(0.5, rng=s)(x) for s in range(20)]
    flipped = sum(np.array_equal(f, x[:, :, ::-1]) for f in flips)
    assert 0 < flipped < 20
    assert np.array_equal(T.RandomHorizontalFlip(0.5, rng=3)(x), T.RandomHorizontalFlip(0.5, rng=3)(x))


@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.float64])
def test_batch_equals_per_image(dtype):
    # Large enough that the native code splits the batch across threads.
    batch = np.random.default_rng(10).integers(0, 256, size=(6, 3, 96, 80)).astype(dtype)
    ops = [
        lambda x: T.resize(x, (41, 57)),
        lambda x: T.resize(x, (130, 200), interpolation="nearest"),
        lambda x: T.resize(x, 50, antialias=False),
        lambda x: T.center_crop(x, (60, 90)),
        lambda x: T.crop(x, 5, -3, 40, 40),
        T.hflip,
        T.vflip,
    ]
    if dtype != np.uint8:
        ops.append(lambda x: T.normalize(x, [1.0, 2.0, 3.0], [2.0, 0.5, 4.0]))
    for op in ops:
        together = op(batch)
        separate = np.stack([op(image) for image in batch])
        np.testing.assert_array_equal(together, separate)


def test_non_contiguous_input_is_accepted():
    x = image_u8(3, 20, 30)[:, ::2, ::-1]
    np.testing.assert_array_equal(T.hflip(x), np.ascontiguousarray(x)[:, :, ::-1])
    assert T.resize(x, (5, 5)).shape == (3, 5, 5)


def test_bad_inputs_raise():
    with pytest.raises(TypeError, match="uint8, float32 or float64"):
        T.hflip(np.zeros((3, 4, 4), np.int32))
    with pytest.raises(ValueError, match="shape"):
        T.hflip(np.zeros((4, 4), np.uint8))
    with pytest.raises(ValueError, match="interpolation"):
        T.resize(image_u8(1, 4, 4), 2, interpolation="bicubic")
    with pytest.raises(ValueError, match="device"):
        T.hflip(image_u8(1, 4, 4), device="tpu")


@pytest.mark.skipif(embervision.cuda_available(), reason="checks the error raised without a usable GPU")
def test_cuda_device_without_gpu_raises_clearly():
    x = np.zeros((3, 8, 8), np.float32)
    for call in (lambda: T.resize(x, 4, device="cuda"), lambda: T.hflip(x, device="cuda"),
                 lambda: T.normalize(x, [0] * 3, [1] * 3, device="cuda"),
                 lambda: T.crop(x, 1, 1, 4, 4, device="cuda"), lambda: T.center_crop(x, 4, device="cuda"),
                 lambda: T.random_crop(x, 4, rng=0, device="cuda"), lambda: T.CenterCrop(4, device="cuda")(x),
                 lambda: T.convert_dtype(x, np.uint8, device="cuda"), lambda: T.ConvertDtype(device="cuda")(x)):
        with pytest.raises(RuntimeError, match="device='cuda' requested but .*(no CUDA kernels|no CUDA device)"):
            call()


def test_device_must_be_cpu_or_cuda_for_crop_and_convert_dtype():
    x = image_u8(1, 4, 4)
    for call in (lambda: T.crop(x, 0, 0, 2, 2, device="tpu"), lambda: T.convert_dtype(x, device="tpu")):
        with pytest.raises(ValueError, match="unknown device 'tpu'"):
            call()


def test_crop_window_far_outside_the_image_is_zero():
    x = image_u8(2, 5, 6) + 1
    for top, left in ((-(10 ** 12), 0), (0, 10 ** 12), (2 ** 31 + 3, -(2 ** 31) - 3), (4, -5)):
        out = T.crop(x, top, left, 3, 4)
        expected = np.zeros((2, 3, 4), np.uint8)
        rows = [y for y in range(3) if 0 <= top + y < 5]
        cols = [c for c in range(4) if 0 <= left + c < 6]
        for y in rows:
            for c in cols:
                expected[:, y, c] = x[:, top + y, left + c]
        np.testing.assert_array_equal(out, expected)


def test_transform_errors_keep_their_types_and_messages():
    x = np.zeros((3, 8, 8), np.float32)
    with pytest.raises(ValueError, match="^crop size must be positive$"):
        T.crop(x, 0, 0, 0, 4)
    with pytest.raises(ValueError, match="^std must not contain zeros$"):
        T.normalize(x, [0, 0, 0], [1, 0, 1])
