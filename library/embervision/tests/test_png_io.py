"""PNG decoding and encoding: round trips, Pillow and reference-writer agreement."""

import io

import numpy as np
import pytest
from PIL import Image

import embervision

pytestmark = pytest.mark.feature("vision.image-io")

CHANNEL_MODES = {1: "gray", 2: "gray_alpha", 3: "rgb", 4: "rgba"}
PILLOW_MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}


def to_pillow(image):
    """A Pillow image of an (H, W, C) uint8 array, mode chosen by C."""
    height, width, channels = image.shape
    return Image.frombytes(PILLOW_MODES[channels], (width, height), np.ascontiguousarray(image).tobytes())


def random_image(rng, height, width, channels, dtype=np.uint8):
    high = np.iinfo(dtype).max + 1
    return rng.integers(0, high, size=(height, width, channels), dtype=np.int64).astype(dtype)


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("level", [0, 6, 9])
def test_round_trip_every_mode_and_depth(channels, dtype, level):
    image = random_image(np.random.default_rng(channels), 37, 53, channels, dtype)
    decoded = embervision.decode_png(embervision.encode_png(image, compression_level=level))
    assert decoded.dtype == dtype
    np.testing.assert_array_equal(decoded, image)


def test_two_dimensional_input_encodes_as_gray():
    image = random_image(np.random.default_rng(0), 9, 11, 1)[:, :, 0]
    decoded = embervision.decode_png(embervision.encode_png(image))
    assert decoded.shape == (9, 11, 1)
    np.testing.assert_array_equal(decoded[:, :, 0], image)


def test_write_png_and_read_image(tmp_path):
    image = random_image(np.random.default_rng(1), 20, 30, 3)
    path = tmp_path / "out.png"
    embervision.write_png(image, path)
    np.testing.assert_array_equal(embervision.read_image(path), image)
    np.testing.assert_array_equal(np.asarray(Image.open(path)), image)


def test_encoding_is_deterministic():
    image = random_image(np.random.default_rng(2), 16, 16, 4)
    assert embervision.encode_png(image) == embervision.encode_png(image.copy())


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_decode_matches_pillow_8bit(tmp_path, channels):
    image = random_image(np.random.default_rng(10 + channels), 31, 17, channels)
    path = tmp_path / "pillow.png"
    to_pillow(image).save(path)
    decoded = embervision.read_image(path)
    expected = np.asarray(Image.open(path))
    np.testing.assert_array_equal(decoded.reshape(expected.shape), expected)


def test_decode_matches_pillow_16bit_gray(tmp_path):
    image = random_image(np.random.default_rng(3), 13, 29, 1, np.uint16)[:, :, 0]
    path = tmp_path / "gray16.png"
    Image.fromarray(image).save(path)  # uint16 2-D -> mode I;16
    decoded = embervision.read_image(path)
    assert decoded.dtype == np.uint16
    np.testing.assert_array_equal(decoded[:, :, 0], np.asarray(Image.open(path)).astype(np.uint16))
    np.testing.assert_array_equal(decoded[:, :, 0], image)


def test_palette_expands_to_rgb_like_pillow(tmp_path):
    rng = np.random.default_rng(4)
    indices = rng.integers(0, 16, size=(21, 19), dtype=np.uint8)
    palette = rng.integers(0, 256, size=16 * 3, dtype=np.uint8)
    pil = Image.frombytes("P", indices.shape[::-1], indices.tobytes())
    pil.putpalette(palette.tolist())
    path = tmp_path / "palette.png"
    pil.save(path)
    decoded = embervision.read_image(path)
    np.testing.assert_array_equal(decoded, np.asarray(Image.open(path).convert("RGB")))
    np.testing.assert_array_equal(decoded, palette.reshape(16, 3)[indices])


def test_palette_with_transparency_expands_to_rgba_like_pillow(tmp_path):
    rng = np.random.default_rng(5)
    indices = rng.integers(0, 8, size=(12, 14), dtype=np.uint8)
    pil = Image.frombytes("P", indices.shape[::-1], indices.tobytes())
    pil.putpalette(rng.integers(0, 256, size=8 * 3, dtype=np.uint8).tolist())
    path = tmp_path / "palette_trns.png"
    pil.save(path, transparency=bytes([0, 255, 128, 7, 255, 255, 255, 255]))
    decoded = embervision.read_image(path)
    assert decoded.shape == (12, 14, 4)
    np.testing.assert_array_equal(decoded, np.asarray(Image.open(path).convert("RGBA")))


@pytest.mark.parametrize("bit_depth", [1, 2, 4])
def test_low_bit_depth_gray_expands_to_8bit(tmp_path, reference_png, bit_depth):
    levels = 2 ** bit_depth
    samples = np.random.default_rng(bit_depth).integers(0, levels, size=(9, 13, 1), dtype=np.uint8)
    path = tmp_path / "low.png"
    path.write_bytes(reference_png(samples, bit_depth=bit_depth))
    decoded = embervision.read_image(path)
    # libpng scales to 8 bits (value * 255 / (levels - 1)); Pillow keeps mode "1"/"L"
    expected_scaled = (samples.astype(np.int64) * 255 // (levels - 1)).astype(np.uint8)
    np.testing.assert_array_equal(decoded, expected_scaled)
    np.testing.assert_array_equal(decoded[:, :, 0], np.asarray(Image.open(path).convert("L")))


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
@pytest.mark.parametrize("bit_depth", [8, 16])
@pytest.mark.parametrize("interlace", [False, True])
def test_decode_matches_independent_writer(reference_png, channels, bit_depth, interlace):
    dtype = np.uint16 if bit_depth == 16 else np.uint8
    image = random_image(np.random.default_rng(channels * bit_depth), 19, 23, channels, dtype)
    decoded = embervision.decode_png(reference_png(image, bit_depth=bit_depth, interlace=interlace))
    assert decoded.dtype == dtype
    np.testing.assert_array_equal(decoded, image)


def test_palette_low_bit_depth_interlaced(reference_png):
    rng = np.random.default_rng(6)
    indices = rng.integers(0, 4, size=(17, 11), dtype=np.uint8)
    palette = rng.integers(0, 256, size=(4, 3), dtype=np.uint8)
    data = reference_png(indices, bit_depth=2, palette=palette, interlace=True)
    np.testing.assert_array_equal(embervision.decode_png(data), palette[indices])


@pytest.mark.parametrize("target", ["gray", "gray_alpha", "rgb", "rgba"])
@pytest.mark.parametrize("source", [1, 2, 3, 4])
def test_mode_conversion_matches_pillow_convert(tmp_path, source, target):
    image = random_image(np.random.default_rng(20 + source), 15, 12, source)
    path = tmp_path / "src.png"
    to_pillow(image).save(path)
    decoded = embervision.read_image(path, mode=target)
    target_channels = {"gray": 1, "gray_alpha": 2, "rgb": 3, "rgba": 4}[target]
    expected = np.asarray(Image.open(path).convert(PILLOW_MODES[target_channels]))
    np.testing.assert_array_equal(decoded.reshape(expected.shape), expected)


def test_gray_trns_becomes_alpha_only_when_asked(reference_png):
    image = np.array([[[0], [50]], [[50], [255]]], dtype=np.uint8)
    data = reference_png(image, trns=(50).to_bytes(2, "big"))
    np.testing.assert_array_equal(embervision.decode_png(data), image)
    with_alpha = embervision.decode_png(data, mode="gray_alpha")
    np.testing.assert_array_equal(with_alpha[:, :, 1], [[255, 0], [0, 255]])
    pil = np.asarray(Image.open(io.BytesIO(data)).convert("LA"))
    np.testing.assert_array_equal(with_alpha, pil)


def test_decode_accepts_numpy_uint8_buffer():
    image = random_image(np.random.default_rng(7), 5, 6, 3)
    buffer = np.frombuffer(embervision.encode_png(image), dtype=np.uint8)
    np.testing.assert_array_equal(embervision.decode_png(buffer), image)
    np.testing.assert_array_equal(embervision.decode_image(buffer), image)


def test_decoded_pixels_are_a_writable_numpy_array_that_outlives_its_input():
    image = random_image(np.random.default_rng(8), 7, 9, 4, np.uint16)
    data = bytearray(embervision.encode_png(image))
    decoded = embervision.decode_png(data)
    del data
    assert isinstance(decoded, np.ndarray) and decoded.flags.writeable and decoded.flags.c_contiguous
    decoded[0, 0, 0] = 1
    np.testing.assert_array_equal(decoded[1:], image[1:])


def test_a_pixel_limit_beyond_64_bits_is_no_limit():
    image = random_image(np.random.default_rng(9), 5, 6, 3)
    np.testing.assert_array_equal(embervision.decode_png(embervision.encode_png(image), max_pixels=10 ** 30), image)


def test_bad_arguments_raise():
    image = np.zeros((4, 4, 3), np.uint8)
    with pytest.raises(ValueError, match="compression_level"):
        embervision.encode_png(image, compression_level=10)
    with pytest.raises(TypeError, match="uint8 or uint16"):
        embervision.encode_png(image.astype(np.float32))
    with pytest.raises(ValueError, match="1 to 4 channels"):
        embervision.encode_png(np.zeros((4, 4, 5), np.uint8))
    with pytest.raises(ValueError, match="unknown image mode"):
        embervision.decode_png(embervision.encode_png(image), mode="cmyk")
