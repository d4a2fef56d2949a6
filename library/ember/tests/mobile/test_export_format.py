"""ember.mobile.export writes the byte layout FORMAT.md documents."""

import struct
import zlib

import numpy as np
import pytest

from ember import mobile

pytestmark = pytest.mark.feature("mobile.runtime")


def _model():
    rng = np.random.default_rng(3)
    return mobile.MobileModel((2, 5), [
        mobile.Linear(rng.standard_normal((3, 5)).astype(np.float32),
                      rng.standard_normal(3).astype(np.float32)),
        mobile.ReLU(),
        mobile.Softmax(),
    ])


def test_header_tables_payload_and_checksum(tmp_path):
    path = mobile.export(_model(), tmp_path / "m.elm")
    data = path.read_bytes()
    assert data[:8] == b"EMBLITE\x00"
    version, header_size, file_size, num_ops, num_tensors = struct.unpack_from("<IIQII", data, 8)
    assert (version, header_size, file_size, num_ops, num_tensors) == (1, 128, len(data), 3, 2)
    op_table, tensor_table, payload_offset, payload_size = struct.unpack_from("<QQQQ", data, 32)
    assert op_table == 128 and tensor_table == 128 + 96 * 3
    assert payload_offset % 64 == 0 and payload_offset >= tensor_table + 80 * 2
    assert payload_offset + payload_size + 4 == len(data)
    assert struct.unpack_from("<II2q", data, 64) == (2, 0, 2, 5)
    # Linear: opcode 1, weight tensor 0, bias tensor 1; weight stored [in, out].
    assert struct.unpack_from("<II4i", data, 128) == (1, 0, 0, 1, -1, -1)
    dtype, rank, d0, d1 = struct.unpack_from("<II2q", data, tensor_table)
    assert (dtype, rank, d0, d1) == (1, 2, 5, 3)
    offset, nbytes = struct.unpack_from("<QQ", data, tensor_table + 56)
    assert offset % 64 == 0 and nbytes == 60
    stored = np.frombuffer(data, "<f4", 15, payload_offset + offset).reshape(5, 3)
    np.testing.assert_array_equal(stored, _model().ops[0].weight.T)
    assert struct.unpack_from("<I", data, len(data) - 4)[0] == zlib.crc32(data[:-4])


def test_export_is_deterministic_and_round_trips(tmp_path):
    first = mobile.export(_model(), tmp_path / "a.elm").read_bytes()
    second = mobile.export(_model(), tmp_path / "b.elm").read_bytes()
    assert first == second
    assert mobile.encode(mobile.decode(first)) == first


def test_export_from_op_list_needs_input_shape(tmp_path):
    ops = list(_model().ops)
    with pytest.raises(ValueError, match="input_shape"):
        mobile.export(ops, tmp_path / "m.elm")
    path = mobile.export(ops, tmp_path / "m.elm", input_shape=(2, 5))
    assert mobile.load(path).input_shape == (2, 5)


def test_unknown_op_is_rejected(tmp_path):
    with pytest.raises(TypeError, match="no op"):
        mobile.export(mobile.MobileModel((1, 2), [object()]), tmp_path / "m.elm")
    assert not (tmp_path / "m.elm").exists()


def test_reference_matches_plain_numpy(tmp_path):
    model = _model()
    path = mobile.export(model, tmp_path / "m.elm")
    x = np.linspace(-1, 1, 10, dtype=np.float32).reshape(2, 5)
    hidden = np.maximum(x.astype(np.float64) @ model.ops[0].weight.T + model.ops[0].bias, 0)
    expected = np.exp(hidden) / np.exp(hidden).sum(axis=1, keepdims=True)
    for backend in ("ember", "numpy"):
        np.testing.assert_allclose(mobile.run_reference(path, x, backend=backend), expected,
                                   rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("damage, code", [
    (lambda d: d[:100], "EL_ERR_TRUNCATED"),
    (lambda d: b"NOTLITE\x00" + d[8:], "EL_ERR_BAD_MAGIC"),
    (lambda d: d[:8] + struct.pack("<I", 9) + d[12:], "EL_ERR_UNSUPPORTED_VERSION"),
    (lambda d: d[:-5] + bytes([d[-5] ^ 1]) + d[-4:], "EL_ERR_CHECKSUM"),
], ids=["truncated", "bad-magic", "wrong-version", "bad-checksum"])
def test_python_reader_rejects_damaged_files(damage, code):
    data = mobile.encode(_model())
    with pytest.raises(mobile.ModelFormatError) as info:
        mobile.decode(damage(data))
    assert info.value.code == code
