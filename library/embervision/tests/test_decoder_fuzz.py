"""Fuzzing: mutated and truncated PNG/JPEG bytes give an exception or a valid array,
never a crash. Example counts are bounded so the suite stays fast."""

import io

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

import embervision

pytestmark = pytest.mark.feature("vision.image-io")

# database=None: nothing is written into the source tree between runs.
FUZZ = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def _seed_png(channels, bit_depth, interlaced=False):
    rng = np.random.default_rng(channels)
    dtype = np.uint16 if bit_depth == 16 else np.uint8
    image = rng.integers(0, 2 ** bit_depth, size=(12, 10, channels)).astype(dtype)
    return embervision.encode_png(image, compression_level=1)


def _seed_jpeg(progressive):
    y, x = np.mgrid[0:32, 0:24]
    image = np.stack([x * 9, y * 7, (x * y) % 256], axis=-1).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, "JPEG", quality=80, progressive=progressive)
    return buffer.getvalue()


SEEDS_PNG = [_seed_png(c, b) for c in (1, 2, 3, 4) for b in (8, 16)]
SEEDS_JPEG = [_seed_jpeg(False), _seed_jpeg(True)]


def mutations(seeds):
    """A seed file with a few bytes overwritten, a slice removed, or cut short."""

    @st.composite
    def mutate(draw):
        data = bytearray(draw(st.sampled_from(seeds)))
        for _ in range(draw(st.integers(1, 6))):
            kind = draw(st.sampled_from(["set", "flip", "delete", "insert"]))
            pos = draw(st.integers(0, len(data) - 1))
            if kind == "set":
                data[pos] = draw(st.integers(0, 255))
            elif kind == "flip":
                data[pos] ^= 1 << draw(st.integers(0, 7))
            elif kind == "delete":
                del data[pos: pos + draw(st.integers(1, 16))]
            else:
                data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
            if not data:
                break
        if draw(st.booleans()):
            data = data[: draw(st.integers(0, len(data)))]
        return bytes(data)

    return mutate()


def check_decoder(decoder, data):
    try:
        image = decoder(data, max_pixels=1 << 22)
    except ValueError as error:
        assert str(error), "errors must carry a message"
        return
    assert image.ndim == 3 and image.shape[2] in (1, 2, 3, 4)
    assert image.dtype in (np.uint8, np.uint16)
    assert image.size > 0


@FUZZ
@given(mutations(SEEDS_PNG))
def test_png_decoder_survives_mutations(data):
    check_decoder(embervision.decode_png, data)


@FUZZ
@given(mutations(SEEDS_JPEG))
def test_jpeg_decoder_survives_mutations(data):
    check_decoder(embervision.decode_jpeg, data)


@settings(max_examples=100, deadline=None, database=None)
@given(st.binary(max_size=300))
def test_decode_image_survives_random_bytes(data):
    for prefix in (b"", b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff"):
        try:
            embervision.decode_image(prefix + data, max_pixels=1 << 22)
        except ValueError:
            pass
