"""WAV (RIFF/WAVE) reading and writing.

Arrays are frames-first: ``load`` returns ``(frames, channels)`` (2-D even for mono)
and ``save`` accepts ``(frames,)`` or ``(frames, channels)``.

Supported: PCM 8-bit (unsigned), 16, 24 and 32-bit (signed), IEEE float 32 and 64,
any number of channels, plain and WAVE_FORMAT_EXTENSIBLE headers. Malformed files
raise ``WavFormatError`` (a ``ValueError``) naming the problem.

Scaling between integers and floats is by 2**(bits - 1), as soundfile reads:
16-bit k reads as k / 32768; 8-bit k reads as (k - 128) / 128. Writing floats
multiplies by the same factor, rounds to nearest and clips, so loading a saved
file returns the same samples wherever they were representable.
"""

import os
import struct
from typing import Tuple, Union

import numpy as np

PathLike = Union[str, os.PathLike]

WAVE_FORMAT_PCM = 0x0001
WAVE_FORMAT_IEEE_FLOAT = 0x0003
WAVE_FORMAT_EXTENSIBLE = 0xFFFE
# The 14 bytes that follow the 2-byte format code in an EXTENSIBLE SubFormat GUID.
_GUID_TAIL = b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"

_KNOWN_TAGS = {0x0002: "Microsoft ADPCM", 0x0006: "A-law", 0x0007: "mu-law", 0x0011: "IMA ADPCM",
               0x0055: "MPEG layer 3"}

ENCODINGS = {
    # name: (format tag, bits per sample)
    "PCM_8": (WAVE_FORMAT_PCM, 8),
    "PCM_16": (WAVE_FORMAT_PCM, 16),
    "PCM_24": (WAVE_FORMAT_PCM, 24),
    "PCM_32": (WAVE_FORMAT_PCM, 32),
    "FLOAT": (WAVE_FORMAT_IEEE_FLOAT, 32),
    "DOUBLE": (WAVE_FORMAT_IEEE_FLOAT, 64),
}


class WavFormatError(ValueError):
    """The file is not a WAV file this module can read, or it is damaged."""


class WavInfo:
    """What the header of a WAV file says."""

    __slots__ = ("sample_rate", "channels", "frames", "encoding", "extensible")

    def __init__(self, sample_rate: int, channels: int, frames: int, encoding: str, extensible: bool):
        self.sample_rate, self.channels, self.frames = sample_rate, channels, frames
        self.encoding, self.extensible = encoding, extensible

    def __repr__(self) -> str:
        return (f"WavInfo(sample_rate={self.sample_rate}, channels={self.channels}, frames={self.frames}, "
                f"encoding={self.encoding!r}, extensible={self.extensible})")


def _iter_chunks(data: bytes, start: int, end: int):
    """(chunk id, payload offset, payload size) for each chunk in data[start:end]."""
    pos = start
    while pos < end:
        if end - pos < 8:
            raise WavFormatError(f"truncated chunk header at byte {pos} ({end - pos} bytes left)")
        chunk_id, size = struct.unpack_from("<4sI", data, pos)
        yield chunk_id, pos + 8, size
        pos += 8 + size + (size & 1)  # chunks are padded to an even size


def _parse_fmt(payload: bytes) -> Tuple[str, int, int, bool]:
    """(encoding, channels, sample_rate, extensible) from a fmt chunk payload."""
    if len(payload) < 16:
        raise WavFormatError(f"fmt chunk is {len(payload)} bytes, needs at least 16")
    tag, channels, sample_rate, byte_rate, block_align, bits = struct.unpack_from("<HHIIHH", payload)
    extensible = tag == WAVE_FORMAT_EXTENSIBLE
    if extensible:
        if len(payload) < 40:
            raise WavFormatError(f"WAVE_FORMAT_EXTENSIBLE fmt chunk is {len(payload)} bytes, needs 40")
        # Samples are read at the container width `bits`; fewer valid bits (e.g.
        # 20 in 24) only means the low bits are zero.
        guid = payload[24:40]
        if guid[2:] != _GUID_TAIL:
            raise WavFormatError("unsupported WAVE_FORMAT_EXTENSIBLE sub-format GUID")
        tag = struct.unpack_from("<H", guid)[0]
    if tag not in (WAVE_FORMAT_PCM, WAVE_FORMAT_IEEE_FLOAT):
        name = _KNOWN_TAGS.get(tag, "unknown")
        raise WavFormatError(f"unsupported WAV encoding: format tag 0x{tag:04x} ({name}); "
                             "only PCM and IEEE float are supported")
    encoding = next((name for name, spec in ENCODINGS.items() if spec == (tag, bits)), None)
    if encoding is None:
        kind = "PCM" if tag == WAVE_FORMAT_PCM else "IEEE float"
        raise WavFormatError(f"unsupported WAV encoding: {bits}-bit {kind}")
    if channels == 0:
        raise WavFormatError("fmt chunk declares 0 channels")
    if sample_rate == 0:
        raise WavFormatError("fmt chunk declares a sample rate of 0")
    if block_align != channels * bits // 8:
        raise WavFormatError(f"fmt chunk block_align is {block_align}, expected {channels * bits // 8} "
                             f"for {channels} channels of {bits} bits")
    if byte_rate != sample_rate * block_align:
        raise WavFormatError(f"fmt chunk byte_rate is {byte_rate}, expected {sample_rate * block_align}")
    return encoding, channels, sample_rate, extensible


def _parse(data: bytes):
    """(info, raw sample bytes) of a WAV file held in memory."""
    if len(data) < 12:
        raise WavFormatError(f"file is {len(data)} bytes, too short for a RIFF/WAVE header")
    riff, riff_size, wave = struct.unpack_from("<4sI4s", data)
    if riff != b"RIFF":
        hint = " (RF64 is not supported)" if riff == b"RF64" else ""
        raise WavFormatError(f"not a RIFF file: starts with {riff!r}{hint}")
    if wave != b"WAVE":
        raise WavFormatError(f"RIFF file is not WAVE: form type {wave!r}")
    if riff_size + 8 > len(data):
        raise WavFormatError(f"RIFF header claims {riff_size + 8} bytes but the file has {len(data)} "
                             "(truncated file)")
    fmt = None
    for chunk_id, offset, size in _iter_chunks(data, 12, riff_size + 8):
        if offset + size > riff_size + 8:
            raise WavFormatError(f"{chunk_id.decode('latin-1')!r} chunk claims {size} bytes but only "
                                 f"{riff_size + 8 - offset} remain (truncated chunk)")
        if chunk_id == b"fmt ":
            fmt = _parse_fmt(data[offset: offset + size])
        elif chunk_id == b"data":
            if fmt is None:
                raise WavFormatError("data chunk comes before the fmt chunk")
            encoding, channels, sample_rate, extensible = fmt
            block_align = channels * ENCODINGS[encoding][1] // 8
            if size % block_align:
                raise WavFormatError(f"data chunk size {size} is not a multiple of the frame size {block_align}")
            info = WavInfo(sample_rate, channels, size // block_align, encoding, extensible)
            return info, data[offset: offset + size]
    if fmt is None:
        raise WavFormatError("no fmt chunk")
    raise WavFormatError("no data chunk")


def _decode_samples(raw: bytes, info: WavInfo) -> np.ndarray:
    """Integer or float samples as stored, shaped (frames, channels)."""
    if info.encoding == "PCM_24":
        triplets = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        values = triplets[:, 0] | (triplets[:, 1] << 8) | (triplets[:, 2] << 16)
        samples = np.where(values & 0x800000, values - (1 << 24), values).astype(np.int32)
    else:
        dtype = {"PCM_8": "u1", "PCM_16": "<i2", "PCM_32": "<i4", "FLOAT": "<f4", "DOUBLE": "<f8"}[info.encoding]
        samples = np.frombuffer(raw, dtype=dtype)
    return samples.reshape(info.frames, info.channels)


def info(path: PathLike) -> WavInfo:
    """Header information of a WAV file."""
    with open(path, "rb") as f:
        return _parse(f.read())[0]


def load(path: PathLike, dtype="float32") -> Tuple[np.ndarray, int]:
    """Read a WAV file: (samples of shape (frames, channels), sample_rate).

    dtype "float32"/"float64" scales integer PCM to [-1, 1); "native" returns the
    stored values (uint8, int16, int32 with 24-bit values in the low bits, float).
    """
    with open(path, "rb") as f:
        wav_info, raw = _parse(f.read())
    samples = _decode_samples(raw, wav_info)
    if dtype == "native":
        return samples.copy(), wav_info.sample_rate
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise ValueError(f"dtype must be a float type or 'native', got {dtype}")
    if wav_info.encoding in ("FLOAT", "DOUBLE"):
        return samples.astype(dtype), wav_info.sample_rate
    bits = ENCODINGS[wav_info.encoding][1]
    offset = 128 if bits == 8 else 0
    scaled = (samples.astype(np.float64) - offset) / float(1 << (bits - 1))
    return scaled.astype(dtype), wav_info.sample_rate


def _encode_samples(samples: np.ndarray, encoding: str) -> bytes:
    tag, bits = ENCODINGS[encoding]
    if tag == WAVE_FORMAT_IEEE_FLOAT:
        if samples.dtype.kind not in "fiu":
            raise TypeError(f"cannot save {samples.dtype} samples")
        return samples.astype("<f4" if bits == 32 else "<f8").tobytes()
    low, high = (0, 255) if bits == 8 else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if samples.dtype.kind == "f":
        offset = 128 if bits == 8 else 0
        scaled = np.rint(samples.astype(np.float64) * float(1 << (bits - 1))) + offset
        values = np.clip(scaled, low, high).astype(np.int64)
    elif samples.dtype.kind in "iu":
        values = samples.astype(np.int64)
        if values.size and (values.min() < low or values.max() > high):
            raise ValueError(f"integer samples for {encoding} must lie in [{low}, {high}]")
    else:
        raise TypeError(f"cannot save {samples.dtype} samples")
    if bits == 24:
        little = values.astype("<i4").view(np.uint8).reshape(-1, 4)
        return little[:, :3].tobytes()
    return values.astype({8: "u1", 16: "<i2", 32: "<i4"}[bits]).tobytes()


def save(path: PathLike, samples: np.ndarray, sample_rate: int, encoding: str = "PCM_16",
         extensible: bool = False) -> None:
    """Write a WAV file from (frames,) or (frames, channels) samples.

    Float samples are scaled (see module doc) and clipped; integer samples are
    written as stored values and must fit the encoding. ``extensible`` writes a
    WAVE_FORMAT_EXTENSIBLE header.
    """
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown encoding {encoding!r}; expected one of {sorted(ENCODINGS)}")
    samples = np.asarray(samples)
    if samples.ndim == 1:
        samples = samples[:, None]
    if samples.ndim != 2 or samples.shape[1] < 1:
        raise ValueError(f"samples must be (frames,) or (frames, channels), got shape {samples.shape}")
    sample_rate = int(sample_rate)
    if not 0 < sample_rate < 2 ** 32:
        raise ValueError(f"invalid sample rate {sample_rate}")
    tag, bits = ENCODINGS[encoding]
    channels = samples.shape[1]
    block_align = channels * bits // 8
    payload = _encode_samples(np.ascontiguousarray(samples), encoding)
    fmt = struct.pack("<HHIIHH", WAVE_FORMAT_EXTENSIBLE if extensible else tag, channels, sample_rate,
                      sample_rate * block_align, block_align, bits)
    if extensible:
        channel_mask = (1 << channels) - 1 if channels <= 18 else 0
        fmt += struct.pack("<HHI", 22, bits, channel_mask) + struct.pack("<H", tag) + _GUID_TAIL
    elif tag == WAVE_FORMAT_IEEE_FLOAT:
        fmt += struct.pack("<H", 0)  # cbSize: non-PCM formats carry the extension size
    chunks = b"fmt " + struct.pack("<I", len(fmt)) + fmt
    if tag == WAVE_FORMAT_IEEE_FLOAT:
        chunks += b"fact" + struct.pack("<II", 4, samples.shape[0])
    chunks += b"data" + struct.pack("<I", len(payload)) + payload
    if len(payload) & 1:
        chunks += b"\x00"
    if len(chunks) + 4 >= 2 ** 32:
        raise ValueError("audio too long for a RIFF/WAVE file (4 GiB limit)")
    with open(path, "wb") as f:
        f.write(b"RIFF" + struct.pack("<I", len(chunks) + 4) + b"WAVE" + chunks)
