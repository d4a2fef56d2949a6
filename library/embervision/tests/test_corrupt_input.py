"""Corrupt, truncated and hostile inputs raise ValueError naming the problem."""

import struct
import zlib

import numpy as np
import pytest
from PIL import Image

import embervision

pytestmark = pytest.mark.feature("vision.image-io")


def png_chunk(kind, payload):
    """A PNG chunk with a correct CRC."""
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def valid_png(channels=3):
    image = np.random.default_rng(0).integers(0, 256, size=(24, 20, channels), dtype=np.uint8)
    return embervision.encode_png(image)


def valid_jpeg(tmp_path, progressive=False):
    y, x = np.mgrid[0:48, 0:40]
    image = np.stack([x * 5, y * 4, (x + y) * 2], axis=-1).astype(np.uint8)
    path = tmp_path / "valid.jpg"
    Image.fromarray(image).save(path, quality=90, progressive=progressive)
    return path.read_bytes()


def test_png_truncated_at_every_chunk_boundary():
    data = valid_png()
    for cut in (8, 20, 33, 40, len(data) // 2, len(data) - 12, len(data) - 1):
        with pytest.raises(ValueError, match="PNG"):
            embervision.decode_png(data[:cut])


def test_png_bad_signature():
    data = bytearray(valid_png())
    data[1] = ord("Q")
    with pytest.raises(ValueError, match="bad signature"):
        embervision.decode_png(bytes(data))


def test_png_corrupt_idat_crc():
    data = bytearray(valid_png())
    idat = data.index(b"IDAT")
    length = struct.unpack(">I", data[idat - 4: idat])[0]
    data[idat + 4 + length] ^= 0xFF  # the stored CRC no longer matches the chunk
    with pytest.raises(ValueError, match="(?i)crc"):
        embervision.decode_png(bytes(data))


def test_png_corrupt_zlib_stream_with_valid_crc():
    raw = b"\x00" + b"\x10" * 30
    bad = bytearray(zlib.compress(raw * 4))
    bad[3] ^= 0x5A

    data = (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", 10, 4, 8, 2, 0, 0, 0))
            + png_chunk(b"IDAT", bytes(bad)) + png_chunk(b"IEND", b""))
    with pytest.raises(ValueError, match="invalid PNG"):
        embervision.decode_png(data)


def test_png_bad_ihdr_values():
    # colour type 2 (RGB) with bit depth 3 does not exist
    data = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 4, 3, 2, 0, 0, 0))
    with pytest.raises(ValueError, match="invalid PNG"):
        embervision.decode_png(data + png_chunk(b"IEND", b""))


def test_png_decompression_bomb_is_refused():
    data = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", 100000, 100000, 8, 6, 0, 0, 0))
    data += png_chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + png_chunk(b"IEND", b"")
    with pytest.raises(ValueError, match="exceeds the limit"):
        embervision.decode_png(data)
    # Without the limit decoding proceeds: it fails on the missing data, or earlier
    # when 40 GB of address space is not available.
    with pytest.raises((ValueError, MemoryError)):
        embervision.decode_png(data, max_pixels=None)


def test_png_largest_header_is_refused_even_without_limit():
    # (2^31 - 1)^2 pixels of 16-bit RGBA would overflow a 64-bit byte count
    ihdr = struct.pack(">IIBBBBB", 0x7FFFFFFF, 0x7FFFFFFF, 16, 6, 0, 0, 0)
    data = (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", zlib.compress(b"\x00"))
            + png_chunk(b"IEND", b""))
    with pytest.raises(ValueError, match="too large"):
        embervision.decode_png(data, max_pixels=None)


def test_jpeg_truncated(tmp_path):
    data = valid_jpeg(tmp_path)
    for cut in (3, 20, 200, len(data) // 2, len(data) - 2):
        with pytest.raises(ValueError, match="JPEG"):
            embervision.decode_jpeg(data[:cut])


def test_progressive_jpeg_truncated(tmp_path):
    data = valid_jpeg(tmp_path, progressive=True)
    with pytest.raises(ValueError, match="JPEG"):
        embervision.decode_jpeg(data[: len(data) * 2 // 3])


def test_jpeg_missing_soi():
    with pytest.raises(ValueError, match="SOI"):
        embervision.decode_jpeg(b"\x00\x01\x02\x03" * 10)


def test_jpeg_garbage_after_soi():
    with pytest.raises(ValueError, match="invalid JPEG"):
        embervision.decode_jpeg(b"\xff\xd8\xff" + bytes(range(256)) * 4)


def test_jpeg_corrupt_huffman_data(tmp_path):
    data = bytearray(valid_jpeg(tmp_path))
    sos = data.index(b"\xff\xda")
    for i in range(sos + 20, len(data) - 2, 7):
        data[i] = 0xFF if data[i] != 0xFF else 0x00
    with pytest.raises(ValueError, match="invalid JPEG"):
        embervision.decode_jpeg(bytes(data))


def test_jpeg_dimension_bomb_is_refused(tmp_path):
    data = bytearray(valid_jpeg(tmp_path))
    sof = data.index(b"\xff\xc0")
    data[sof + 5: sof + 9] = struct.pack(">HH", 60000, 60000)
    with pytest.raises(ValueError, match="exceeds the limit"):
        embervision.decode_jpeg(bytes(data))


@pytest.mark.parametrize("payload", [b"", b"\x89PNG", b"GIF89a" + b"\x00" * 20])
def test_read_image_rejects_unknown_or_empty(tmp_path, payload):
    path = tmp_path / "bad.img"
    path.write_bytes(payload)
    with pytest.raises(ValueError, match="unsupported image format"):
        embervision.read_image(path)


def test_decoders_reject_the_other_format(tmp_path):
    with pytest.raises(ValueError, match="not a PNG"):
        embervision.decode_png(valid_jpeg(tmp_path))
    with pytest.raises(ValueError, match="not a JPEG"):
        embervision.decode_jpeg(valid_png())
