"""Markers (feature, gpu), the --feature selector, and a reference PNG writer."""

import struct
import zlib

import numpy as np
import pytest


def pytest_addoption(parser):
    parser.addoption(
        "--feature",
        action="append",
        default=[],
        metavar="ID",
        help="run only tests marked @pytest.mark.feature(ID); may be repeated",
    )


def pytest_configure(config):
    config.addinivalue_line("markers", "feature(id): the feature_status.yaml feature this test proves")
    config.addinivalue_line("markers", "gpu: needs a CUDA device; skipped with a reason when none is present")


def pytest_collection_modifyitems(config, items):
    wanted = set(config.getoption("--feature"))
    if not wanted:
        return
    selected, deselected = [], []
    for item in items:
        ids = {m.args[0] for m in item.iter_markers("feature") if m.args}
        (selected if ids & wanted else deselected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected


# Adam7 passes: (x0, y0, dx, dy).
_ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
_COLOR_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}


def _chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def _pack_rows(samples: np.ndarray, bit_depth: int) -> list:
    """Rows of big-endian samples packed at bit_depth, each prefixed by filter type 0."""
    rows = []
    for row in samples.reshape(samples.shape[0], -1):
        if bit_depth == 16:
            data = row.astype(">u2").tobytes()
        elif bit_depth == 8:
            data = row.astype(np.uint8).tobytes()
        else:
            data = np.packbits(np.unpackbits(row.astype(np.uint8)[:, None], axis=1)[:, 8 - bit_depth:]).tobytes()
        rows.append(b"\x00" + data)
    return rows


def write_reference_png(samples: np.ndarray, bit_depth: int = 8, palette=None, trns: bytes = None,
                        interlace: bool = False) -> bytes:
    """A PNG written by plain Python (independent of libpng and Pillow).

    samples: (H, W, C) with C in 1..4, or (H, W) palette indices when palette is given.
    """
    samples = np.asarray(samples)
    if palette is not None:
        color_type, channels = 3, 1
        samples = samples.reshape(samples.shape[0], samples.shape[1], 1)
    else:
        channels = samples.shape[2]
        color_type = _COLOR_TYPES[channels]
    height, width = samples.shape[:2]
    header = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 1 if interlace else 0)
    raw = b""
    if interlace:
        for x0, y0, dx, dy in _ADAM7:
            sub = samples[y0::dy, x0::dx]
            if sub.size:
                raw += b"".join(_pack_rows(sub, bit_depth))
    else:
        raw = b"".join(_pack_rows(samples, bit_depth))
    out = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header)
    if palette is not None:
        out += _chunk(b"PLTE", np.asarray(palette, dtype=np.uint8).tobytes())
    if trns is not None:
        out += _chunk(b"tRNS", trns)
    return out + _chunk(b"IDAT", zlib.compress(raw, 6)) + _chunk(b"IEND", b"")


@pytest.fixture
def reference_png():
    """The plain-Python PNG writer (see write_reference_png)."""
    return write_reference_png
