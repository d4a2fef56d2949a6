"""Malformed, truncated, wrong-version and corrupted model files are rejected with a
clear error code and message, never a crash (fuzzed in-process and under ASan/UBSan)."""

import struct
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ember import mobile

pytestmark = pytest.mark.feature("mobile.runtime")

REJECTIONS = {"EL_ERR_TRUNCATED", "EL_ERR_BAD_MAGIC", "EL_ERR_UNSUPPORTED_VERSION",
              "EL_ERR_CHECKSUM", "EL_ERR_MALFORMED", "EL_ERR_BAD_OPCODE", "EL_ERR_SHAPE", "EL_ERR_TOO_LARGE"}


def repaired(data: bytes) -> bytes:
    """data with its file_size field and CRC trailer made consistent again."""
    if len(data) < 132:
        return data
    out = bytearray(data)
    struct.pack_into("<Q", out, 16, len(out))
    struct.pack_into("<I", out, len(out) - 4, zlib.crc32(bytes(out[:-4])))
    return bytes(out)


def rejection(runtime, data: bytes) -> mobile.LiteError:
    with pytest.raises(mobile.LiteError) as info:
        runtime.load(data)
    return info.value


@pytest.fixture(scope="module")
def good(exported_models):
    return exported_models["cnn"].path.read_bytes()


def test_every_truncation_is_reported_as_truncated(lite_runtime, good):
    for length in range(len(good)):
        error = rejection(lite_runtime, good[:length])
        assert error.status == "EL_ERR_TRUNCATED", (length, str(error))
    assert "truncated" in str(rejection(lite_runtime, good[:-1]))


@pytest.mark.parametrize("version", [0, 2, 0xFFFFFFFF])
def test_wrong_version_names_both_versions(lite_runtime, good, version):
    data = repaired(good[:8] + struct.pack("<I", version) + good[12:])
    error = rejection(lite_runtime, data)
    assert error.status == "EL_ERR_UNSUPPORTED_VERSION"
    assert f"format version {version} is not supported" in str(error)
    assert "reads version 1" in str(error)


def test_bad_checksum(lite_runtime, good):
    payload_flip = bytearray(good)
    payload_flip[-10] ^= 0x40
    assert rejection(lite_runtime, bytes(payload_flip)).status == "EL_ERR_CHECKSUM"
    trailer_flip = bytearray(good)
    trailer_flip[-1] ^= 0x01
    error = rejection(lite_runtime, bytes(trailer_flip))
    assert error.status == "EL_ERR_CHECKSUM" and "CRC32" in str(error)


def test_bad_magic_and_trailing_bytes(lite_runtime, good):
    assert rejection(lite_runtime, b"PK\x03\x04" + good[4:]).status == "EL_ERR_BAD_MAGIC"
    error = rejection(lite_runtime, good + b"\x00")
    assert error.status == "EL_ERR_MALFORMED" and "unexpected bytes" in str(error)


def test_bad_opcode_and_reserved_fields(lite_runtime, good):
    data = bytearray(good)
    struct.pack_into("<I", data, 128 + 96 * 2, 42)  # third op
    error = rejection(lite_runtime, repaired(bytes(data)))
    assert error.status == "EL_ERR_BAD_OPCODE" and "op 2: unknown opcode 42" in str(error)
    data = bytearray(good)
    struct.pack_into("<I", data, 68, 1)  # header flags
    assert rejection(lite_runtime, repaired(bytes(data))).status == "EL_ERR_MALFORMED"


def test_tensor_out_of_payload(lite_runtime, good):
    data = bytearray(good)
    num_ops = struct.unpack_from("<I", data, 24)[0]
    struct.pack_into("<Q", data, 128 + 96 * num_ops + 56, 1 << 40)  # tensor 0 data_offset
    error = rejection(lite_runtime, repaired(bytes(data)))
    assert error.status == "EL_ERR_MALFORMED" and "tensor 0" in str(error)


def test_shape_mismatch_is_a_shape_error(lite_runtime):
    model = mobile.MobileModel((2, 4), [mobile.Linear(np.ones((3, 5), np.float32)), mobile.ReLU()])
    error = rejection(lite_runtime, mobile.encode(model))
    assert error.status == "EL_ERR_SHAPE"
    assert "op 0" in str(error) and "[2, 4]" in str(error)


def test_missing_file_is_an_io_error(lite_runtime, tmp_path):
    with pytest.raises(mobile.LiteError) as info:
        lite_runtime.load(tmp_path / "absent.elm")
    assert info.value.status == "EL_ERR_IO"


@st.composite
def mutations(draw, seeds):
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "field", "cut", "grow"]))
        if kind == "flip" and data:
            data[draw(st.integers(0, len(data) - 1))] ^= 1 << draw(st.integers(0, 7))
        elif kind == "field" and len(data) >= 8:
            at = draw(st.integers(0, min(len(data), 1024) // 8 - 1)) * 8
            value = draw(st.sampled_from([0, 1, 2, 64, 2**31 - 1, 2**31, 2**32 - 1, 2**63, 2**64 - 1]))
            data[at:at + 8] = value.to_bytes(8, "little")
        elif kind == "cut":
            del data[draw(st.integers(0, len(data))):]
        elif kind == "grow":
            data += draw(st.binary(min_size=1, max_size=64))
    return bytes(data), draw(st.booleans())


@settings(max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzzed_files_are_rejected_cleanly_or_run(lite_runtime, exported_models, data):
    seeds = [m.path.read_bytes() for m in exported_models.values()]
    mutated, repair = data.draw(mutations(seeds))
    if repair:
        mutated = repaired(mutated)
    try:
        model = lite_runtime.load(mutated)
    except mobile.LiteError as error:
        assert error.status in REJECTIONS
        assert str(error).startswith(error.status + ": ") and len(str(error)) > len(error.status) + 3
        return
    # Accepted: it is a valid file, so the Python reader agrees, and it runs.
    assert mobile.decode(mutated).input_shape == model.input_shape
    if int(np.prod(model.input_shape)) <= 1 << 16 and int(np.prod(model.output_shape)) <= 1 << 16:
        model.run(np.zeros(model.input_shape, np.float32))


def test_fuzz_driver_under_asan_and_ubsan(sanitized_build, exported_models, over_limit_models):
    seeds = [m.path for m in exported_models.values()] + [over_limit_models["conv_4kb"]]
    proc = sanitized_build.run(["fuzz_model_load", "--iterations", "20000", *seeds], timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "ERROR: AddressSanitizer" not in proc.stderr and "runtime error" not in proc.stderr
    for status in ("EL_OK", "EL_ERR_TRUNCATED", "EL_ERR_CHECKSUM", "EL_ERR_MALFORMED", "EL_ERR_SHAPE",
                   "EL_ERR_TOO_LARGE"):
        assert status + "=" in proc.stdout


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_demo_under_asan_and_ubsan(sanitized_build, exported_models, name):
    model = exported_models[name]
    proc = sanitized_build.run(["ember-lite-demo", model.path, model.input_path, model.expected_path])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "runtime error" not in proc.stderr
