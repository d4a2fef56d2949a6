"""WAV IO against soundfile (libsndfile), in both directions, and malformed files."""

import struct

import numpy as np
import pytest
import soundfile as sf

import emberaudio
from emberaudio import WavFormatError

pytestmark = pytest.mark.feature("audio.core")

ENCODINGS = ["PCM_8", "PCM_16", "PCM_24", "PCM_32", "FLOAT", "DOUBLE"]
SF_SUBTYPES = {"PCM_8": "PCM_U8", "PCM_16": "PCM_16", "PCM_24": "PCM_24", "PCM_32": "PCM_32",
               "FLOAT": "FLOAT", "DOUBLE": "DOUBLE"}
BITS = {"PCM_8": 8, "PCM_16": 16, "PCM_24": 24, "PCM_32": 32}


def noise(frames, channels, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, size=(frames, channels))


def quantised(x, encoding):
    """What a float signal becomes after saving as `encoding` and loading as float64."""
    if encoding in ("FLOAT", "DOUBLE"):
        return x.astype(np.float32 if encoding == "FLOAT" else np.float64).astype(np.float64)
    scale = float(1 << (BITS[encoding] - 1))
    low, high = (-128, 127) if encoding == "PCM_8" else (-scale, scale - 1)
    return np.clip(np.rint(x * scale), low, high) / scale


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("channels", [1, 2, 6])
@pytest.mark.parametrize("extensible", [False, True])
def test_round_trip(tmp_path, encoding, channels, extensible):
    x = noise(1001, channels)
    path = tmp_path / "a.wav"
    emberaudio.save(path, x, 22050, encoding=encoding, extensible=extensible)
    y, rate = emberaudio.load(path, dtype="float64")
    assert rate == 22050 and y.shape == (1001, channels)
    np.testing.assert_array_equal(y, quantised(x, encoding))
    info = emberaudio.info(path)
    assert (info.encoding, info.channels, info.frames, info.extensible) == (encoding, channels, 1001, extensible)


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("extensible", [False, True])
def test_soundfile_reads_our_files(tmp_path, encoding, extensible):
    x = noise(777, 3, seed=1)
    path = tmp_path / "ours.wav"
    emberaudio.save(path, x, 16000, encoding=encoding, extensible=extensible)
    theirs, rate = sf.read(path, dtype="float64", always_2d=True)
    assert rate == 16000
    assert sf.info(path).subtype == SF_SUBTYPES[encoding]
    ours, _ = emberaudio.load(path, dtype="float64")
    np.testing.assert_array_equal(theirs, ours)


@pytest.mark.parametrize("encoding", ["PCM_16", "PCM_24", "PCM_32"])
def test_integer_samples_are_exact_in_soundfile(tmp_path, encoding):
    bits = BITS[encoding]
    rng = np.random.default_rng(2)
    values = rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), size=(500, 2))
    values[:2] = [[-(1 << (bits - 1)), (1 << (bits - 1)) - 1], [0, -1]]  # extremes
    path = tmp_path / "int.wav"
    emberaudio.save(path, values.astype(np.int32), 8000, encoding=encoding)
    theirs, _ = sf.read(path, dtype="int32", always_2d=True)  # libsndfile left-aligns in int32
    np.testing.assert_array_equal(theirs, values << (32 - bits))
    native, _ = emberaudio.load(path, dtype="native")
    np.testing.assert_array_equal(native, values)


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("wav_format", ["WAV", "WAVEX"])
def test_we_read_soundfile_files(tmp_path, encoding, wav_format):
    x = noise(640, 2, seed=3) * 0.9
    path = tmp_path / "theirs.wav"
    sf.write(path, x, 44100, subtype=SF_SUBTYPES[encoding], format=wav_format)
    theirs, _ = sf.read(path, dtype="float64", always_2d=True)
    ours, rate = emberaudio.load(path, dtype="float64")
    assert rate == 44100
    np.testing.assert_array_equal(ours, theirs)
    assert emberaudio.info(path).extensible == (wav_format == "WAVEX")


def test_mono_many_channels_and_defaults(tmp_path):
    path = tmp_path / "mono.wav"
    emberaudio.save(path, np.linspace(-1, 1, 50), 8000)  # PCM_16 default, 1-D input
    y, rate = emberaudio.load(path)
    assert y.dtype == np.float32 and y.shape == (50, 1) and rate == 8000
    wide = noise(10, 12, seed=4)
    emberaudio.save(path, wide, 48000, encoding="FLOAT")
    np.testing.assert_array_equal(sf.read(path, always_2d=True)[0], wide.astype(np.float32))


def test_float_scaling_and_clipping(tmp_path):
    path = tmp_path / "clip.wav"
    emberaudio.save(path, np.array([1.0, -1.0, 0.5, 2.0, -3.0]), 8000, encoding="PCM_16")
    np.testing.assert_array_equal(emberaudio.load(path, dtype="native")[0][:, 0], [32767, -32768, 16384, 32767, -32768])
    emberaudio.save(path, np.array([0.0, 1.0, -1.0]), 8000, encoding="PCM_8")
    np.testing.assert_array_equal(emberaudio.load(path, dtype="native")[0][:, 0], [128, 255, 0])


def test_save_rejects_bad_arguments(tmp_path):
    path = tmp_path / "bad.wav"
    with pytest.raises(ValueError, match="encoding"):
        emberaudio.save(path, np.zeros(4), 8000, encoding="ULAW")
    with pytest.raises(ValueError, match="must lie in"):
        emberaudio.save(path, np.array([40000], dtype=np.int32), 8000, encoding="PCM_16")
    with pytest.raises(ValueError, match="shape"):
        emberaudio.save(path, np.zeros((2, 2, 2)), 8000)


def valid_wav(tmp_path):
    path = tmp_path / "valid.wav"
    emberaudio.save(path, noise(100, 2), 16000, encoding="PCM_16")
    return path.read_bytes()


def rewrite(tmp_path, data):
    path = tmp_path / "broken.wav"
    path.write_bytes(data)
    return path


def fmt_chunk(tag=1, channels=1, rate=8000, bits=16, block_align=None, byte_rate=None, extra=b""):
    block_align = channels * bits // 8 if block_align is None else block_align
    byte_rate = rate * block_align if byte_rate is None else byte_rate
    payload = struct.pack("<HHIIHH", tag, channels, rate, byte_rate, block_align, bits) + extra
    return b"fmt " + struct.pack("<I", len(payload)) + payload


def riff(*chunks):
    body = b"WAVE" + b"".join(chunks)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def data_chunk(payload, claimed=None):
    return b"data" + struct.pack("<I", len(payload) if claimed is None else claimed) + payload


@pytest.mark.parametrize("make,message", [
    (lambda v: b"RIFX" + v[4:], "not a RIFF file"),
    (lambda v: v[:8] + b"AVI " + v[12:], "not WAVE"),
    (lambda v: v[:10], "too short"),
    (lambda v: v[: len(v) - 50], "truncated"),
    (lambda v: v[:36] + b"da", "truncated"),
    (lambda v: b"".join([b"RF64", v[4:]]), "RF64"),
])
def test_malformed_headers(tmp_path, make, message):
    with pytest.raises(WavFormatError, match=message):
        emberaudio.load(rewrite(tmp_path, make(valid_wav(tmp_path))))


def test_data_size_lies(tmp_path):
    data = riff(fmt_chunk(), data_chunk(b"\x00\x01" * 10, claimed=4000))
    with pytest.raises(WavFormatError, match="claims 4000 bytes"):
        emberaudio.load(rewrite(tmp_path, data))


@pytest.mark.parametrize("fmt,message", [
    (fmt_chunk(tag=2), r"format tag 0x0002 \(Microsoft ADPCM\)"),
    (fmt_chunk(tag=7, bits=8), "mu-law"),
    (fmt_chunk(bits=12, block_align=2), "12-bit PCM"),
    (fmt_chunk(tag=3, bits=16), "16-bit IEEE float"),
    (fmt_chunk(block_align=3), "block_align"),
    (fmt_chunk(byte_rate=1), "byte_rate"),
    (fmt_chunk(channels=0, block_align=0), "0 channels"),
    (b"fmt " + struct.pack("<I", 8) + b"\x01\x00\x01\x00\x40\x1f\x00\x00", "needs at least 16"),
    (fmt_chunk(tag=0xFFFE, extra=struct.pack("<HHI", 22, 16, 4) + b"\x01\x00" + b"\x00" * 14), "GUID"),
])
def test_unsupported_or_inconsistent_fmt(tmp_path, fmt, message):
    with pytest.raises(WavFormatError, match=message):
        emberaudio.load(rewrite(tmp_path, riff(fmt, data_chunk(b"\x00" * 8))))


def test_missing_or_misordered_chunks(tmp_path):
    with pytest.raises(WavFormatError, match="no data chunk"):
        emberaudio.load(rewrite(tmp_path, riff(fmt_chunk())))
    with pytest.raises(WavFormatError, match="no fmt chunk"):
        emberaudio.load(rewrite(tmp_path, riff(b"LIST" + struct.pack("<I", 4) + b"INFO")))
    with pytest.raises(WavFormatError, match="before the fmt chunk"):
        emberaudio.load(rewrite(tmp_path, riff(data_chunk(b"\x00" * 4), fmt_chunk())))
    with pytest.raises(WavFormatError, match="not a multiple of the frame size"):
        emberaudio.load(rewrite(tmp_path, riff(fmt_chunk(channels=2), data_chunk(b"\x00" * 6))))


def test_unknown_chunks_are_skipped(tmp_path):
    odd = b"junk" + struct.pack("<I", 3) + b"abc" + b"\x00"  # odd size, padded
    payload = struct.pack("<4h", 1, -2, 3, -4)
    y, rate = emberaudio.load(rewrite(tmp_path, riff(odd, fmt_chunk(), odd, data_chunk(payload))), dtype="native")
    assert rate == 8000
    np.testing.assert_array_equal(y[:, 0], [1, -2, 3, -4])
