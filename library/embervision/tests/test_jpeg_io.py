"""JPEG decoding and encoding against Pillow (which also uses libjpeg-turbo)."""

import io

import numpy as np
import pytest
from PIL import Image

import embervision

pytestmark = pytest.mark.feature("vision.image-io")

# Both decoders run libjpeg(-turbo)'s integer IDCT with fancy upsampling, so the
# pixels agree; 1 grey level is allowed for differences between library versions.
JPEG_TOLERANCE = 1


def smooth_image(height, width, channels, seed=0):
    """A photo-like image (smooth gradients plus mild noise) that JPEG handles well."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    planes = [127 + 100 * np.sin(x / (7.0 + c) + y / (11.0 + 2 * c)) for c in range(channels)]
    image = np.stack(planes, axis=-1) + rng.normal(0, 4, size=(height, width, channels))
    return np.clip(np.round(image), 0, 255).astype(np.uint8)


def assert_close(actual, expected, tolerance=JPEG_TOLERANCE):
    assert actual.shape == expected.shape
    diff = np.abs(actual.astype(np.int32) - expected.astype(np.int32))
    assert diff.max() <= tolerance, f"max diff {diff.max()}"


@pytest.mark.parametrize("subsampling", [0, 1, 2])
@pytest.mark.parametrize("progressive", [False, True])
def test_rgb_decode_matches_pillow(tmp_path, subsampling, progressive):
    image = smooth_image(45, 67, 3)
    path = tmp_path / "rgb.jpg"
    Image.fromarray(image).save(path, quality=90, subsampling=subsampling, progressive=progressive)
    decoded = embervision.read_image(path)
    assert decoded.dtype == np.uint8
    assert_close(decoded, np.asarray(Image.open(path)))
    assert np.abs(decoded.astype(int) - image).mean() < 4


def test_gray_decode_matches_pillow(tmp_path):
    image = smooth_image(33, 40, 1)[:, :, 0]
    path = tmp_path / "gray.jpg"
    Image.fromarray(image).save(path, quality=85)  # 2-D uint8 -> mode L
    decoded = embervision.read_image(path)
    assert decoded.shape == (33, 40, 1)
    assert_close(decoded[:, :, 0], np.asarray(Image.open(path)))


def test_cmyk_decodes_to_rgb(tmp_path):
    image = smooth_image(24, 32, 4)
    path = tmp_path / "cmyk.jpg"
    Image.frombytes("CMYK", (32, 24), image.tobytes()).save(path, quality=95)
    decoded = embervision.read_image(path)
    assert decoded.shape == (24, 32, 3)
    # Pillow: R = (255 - C) * (255 - K) / 255. Allow JPEG loss on top of rounding.
    expected = np.asarray(Image.open(path).convert("RGB"))
    assert np.abs(decoded.astype(int) - expected).max() <= 2


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("quality", [50, 95])
def test_encode_decodes_in_pillow_identically(channels, quality):
    image = smooth_image(50, 38, channels, seed=channels)
    data = embervision.encode_jpeg(image, quality=quality)
    ours = embervision.decode_jpeg(data)
    pillow = np.asarray(Image.open(io.BytesIO(data)))
    assert_close(ours.reshape(pillow.shape), pillow)
    assert np.abs(ours.astype(int) - image).mean() < (5 if quality == 95 else 8)


def test_quality_trades_size_for_error():
    image = smooth_image(64, 64, 3, seed=3)
    sizes, errors = [], []
    for quality in (10, 50, 95):
        data = embervision.encode_jpeg(image, quality=quality)
        sizes.append(len(data))
        errors.append(np.abs(embervision.decode_jpeg(data).astype(int) - image).mean())
    assert sizes == sorted(sizes)
    assert errors == sorted(errors, reverse=True)


def test_write_jpeg_and_read_image(tmp_path):
    image = smooth_image(20, 30, 3)
    path = tmp_path / "out.jpg"
    embervision.write_jpeg(image, path, quality=90)
    assert_close(embervision.read_image(path), np.asarray(Image.open(path)))


@pytest.mark.parametrize("target", ["gray", "gray_alpha", "rgb", "rgba"])
def test_mode_conversion_matches_pillow_convert(tmp_path, target):
    path = tmp_path / "src.jpg"
    Image.fromarray(smooth_image(20, 24, 3)).save(path, quality=90)
    decoded = embervision.read_image(path, mode=target)
    pil_mode = {"gray": "L", "gray_alpha": "LA", "rgb": "RGB", "rgba": "RGBA"}[target]
    expected = np.asarray(Image.open(path).convert(pil_mode))
    assert_close(decoded.reshape(expected.shape), expected)


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="quality"):
        embervision.encode_jpeg(np.zeros((4, 4, 3), np.uint8), quality=0)
    with pytest.raises(ValueError, match="channels"):
        embervision.encode_jpeg(np.zeros((4, 4, 4), np.uint8))
    with pytest.raises(TypeError, match="uint8"):
        embervision.encode_jpeg(np.zeros((4, 4, 3), np.uint16))
