"""Byte layout of ember-lite model files (.elm); see library/ember-lite/FORMAT.md."""

from __future__ import annotations

import struct
import zlib
from typing import List, Tuple

import numpy as np

from ember.mobile.ops import (
    Add, Conv2d, Exp, Flatten, Linear, MobileModel, Mul, ReLU, Reshape, Softmax,
)

MAGIC = b"EMBLITE\x00"
FORMAT_VERSION = 1
HEADER_SIZE = 128
OP_RECORD_SIZE = 96
TENSOR_RECORD_SIZE = 80
ALIGNMENT = 64
MAX_RANK = 6
DTYPE_FLOAT32 = 1

OPCODES = {Linear: 1, ReLU: 2, Softmax: 3, Conv2d: 4, Add: 5, Mul: 6, Exp: 7, Flatten: 8,
           Reshape: 9}

_HEADER = struct.Struct("<8sIIQIIQQQQII6qQ")
_OP = struct.Struct("<II4i8qQ")
_TENSOR = struct.Struct("<II6qQQQ")
assert _HEADER.size == HEADER_SIZE and _OP.size == OP_RECORD_SIZE
assert _TENSOR.size == TENSOR_RECORD_SIZE


class ModelFormatError(ValueError):
    """A model file that breaks FORMAT.md; `code` names the runtime's matching el_status."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code


def _align(n: int) -> int:
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def _dims(shape) -> List[int]:
    return list(shape) + [0] * (MAX_RANK - len(shape))


def _op_record(op, tensors: List[np.ndarray]) -> Tuple[int, List[int], List[int]]:
    """(opcode, tensor indices, params) for one op, appending its weights to `tensors`."""

    def add(array) -> int:
        if array is None:
            return -1
        tensors.append(np.ascontiguousarray(array, dtype="<f4"))
        return len(tensors) - 1

    slots, params = [-1, -1, -1, -1], [0] * 8
    if isinstance(op, Linear):
        # Stored as [in, out] so the runtime runs one matmul without a transpose.
        slots[0] = add(op.weight.T)
        slots[1] = add(op.bias)
    elif isinstance(op, Conv2d):
        slots[0] = add(op.weight)
        slots[1] = add(op.bias)
        params[0], params[1] = int(op.stride), int(op.padding)
    elif isinstance(op, (Add, Mul)):
        slots[0] = add(op.constant)
    elif isinstance(op, Flatten):
        params[0] = int(op.start_dim)
    elif isinstance(op, Reshape):
        params[0] = len(op.shape)
        params[1:1 + len(op.shape)] = op.shape
    elif not isinstance(op, (ReLU, Softmax, Exp)):
        raise TypeError(f"ember-lite has no op for {type(op).__name__}")
    return OPCODES[type(op)], slots, params


def encode(model: MobileModel) -> bytes:
    """The bytes of `model` as an .elm file (deterministic: same model, same bytes)."""
    tensors: List[np.ndarray] = []
    op_records = [_op_record(op, tensors) for op in model.ops]
    tensor_table = HEADER_SIZE + OP_RECORD_SIZE * len(op_records)
    payload_offset = _align(tensor_table + TENSOR_RECORD_SIZE * len(tensors))
    offsets, cursor = [], 0
    for array in tensors:
        offsets.append(cursor)
        cursor = _align(cursor + array.nbytes)
    payload_size = cursor
    file_size = payload_offset + payload_size + 4

    out = bytearray(file_size)
    _HEADER.pack_into(out, 0, MAGIC, FORMAT_VERSION, HEADER_SIZE, file_size, len(op_records),
                      len(tensors), HEADER_SIZE, tensor_table, payload_offset, payload_size,
                      len(model.input_shape), 0, *_dims(model.input_shape), 0)
    for index, (code, slots, params) in enumerate(op_records):
        _OP.pack_into(out, HEADER_SIZE + OP_RECORD_SIZE * index, code, 0, *slots, *params, 0)
    for index, (array, offset) in enumerate(zip(tensors, offsets)):
        _TENSOR.pack_into(out, tensor_table + TENSOR_RECORD_SIZE * index, DTYPE_FLOAT32,
                          array.ndim, *_dims(array.shape), offset, array.nbytes, 0)
        start = payload_offset + offset
        out[start:start + array.nbytes] = array.tobytes()
    struct.pack_into("<I", out, file_size - 4, zlib.crc32(bytes(out[:file_size - 4])))
    return bytes(out)


def decode(data: bytes) -> MobileModel:
    """Parse an .elm file back into a MobileModel; raises ModelFormatError when invalid.

    Checks the framing (magic, version, sizes, checksum, tables); the shape rules of each
    op are left to whoever runs the model.
    """
    if len(data) < HEADER_SIZE:
        raise ModelFormatError("EL_ERR_TRUNCATED", f"{len(data)} bytes is shorter than the header")
    fields = _HEADER.unpack_from(data, 0)
    (magic, version, header_size, file_size, num_ops, num_tensors, op_table, tensor_table,
     payload_offset, payload_size, input_rank, flags) = fields[:12]
    input_dims, reserved = fields[12:18], fields[18]
    if magic != MAGIC:
        raise ModelFormatError("EL_ERR_BAD_MAGIC", "not an ember-lite model")
    if version != FORMAT_VERSION:
        raise ModelFormatError("EL_ERR_UNSUPPORTED_VERSION", f"format version {version}")
    if header_size != HEADER_SIZE:
        raise ModelFormatError("EL_ERR_MALFORMED", f"header_size {header_size}")
    if file_size > len(data):
        raise ModelFormatError("EL_ERR_TRUNCATED", f"header says {file_size} bytes, {len(data)} present")
    if file_size < len(data):
        raise ModelFormatError("EL_ERR_MALFORMED", "bytes after the end of the model")
    (stored,) = struct.unpack_from("<I", data, file_size - 4)
    if stored != zlib.crc32(data[:file_size - 4]):
        raise ModelFormatError("EL_ERR_CHECKSUM", "CRC32 mismatch")
    expected_tensor_table = HEADER_SIZE + OP_RECORD_SIZE * num_ops
    if (op_table != HEADER_SIZE or tensor_table != expected_tensor_table
            or payload_offset != _align(expected_tensor_table + TENSOR_RECORD_SIZE * num_tensors)
            or payload_offset + payload_size + 4 != file_size or flags or reserved
            or not 1 <= num_ops <= 1024 or num_tensors > 4096 or not 1 <= input_rank <= MAX_RANK):
        raise ModelFormatError("EL_ERR_MALFORMED", "inconsistent header")

    tensors = []
    for index in range(num_tensors):
        dtype, rank, *rest = _TENSOR.unpack_from(data, tensor_table + TENSOR_RECORD_SIZE * index)
        dims, offset, nbytes = rest[:6], rest[6], rest[7]
        if dtype != DTYPE_FLOAT32 or not 1 <= rank <= MAX_RANK:
            raise ModelFormatError("EL_ERR_MALFORMED", f"tensor {index}: dtype/rank")
        shape = tuple(dims[:rank])
        count = int(np.prod(shape)) if shape else 1
        if nbytes != 4 * count or offset % ALIGNMENT or offset + nbytes > payload_size:
            raise ModelFormatError("EL_ERR_MALFORMED", f"tensor {index}: data range")
        start = payload_offset + offset
        tensors.append(np.frombuffer(data, dtype="<f4", count=count, offset=start)
                       .astype(np.float32).reshape(shape))

    def tensor(slot):
        if slot == -1:
            return None
        if not 0 <= slot < len(tensors):
            raise ModelFormatError("EL_ERR_MALFORMED", f"tensor index {slot}")
        return tensors[slot]

    ops = []
    for index in range(num_ops):
        code, _, *rest = _OP.unpack_from(data, HEADER_SIZE + OP_RECORD_SIZE * index)
        slots, params = rest[:4], rest[4:12]
        if code == 1:
            ops.append(Linear(tensor(slots[0]).T, tensor(slots[1])))
        elif code == 2:
            ops.append(ReLU())
        elif code == 3:
            ops.append(Softmax())
        elif code == 4:
            ops.append(Conv2d(tensor(slots[0]), tensor(slots[1]), params[0], params[1]))
        elif code == 5:
            ops.append(Add(tensor(slots[0])))
        elif code == 6:
            ops.append(Mul(tensor(slots[0])))
        elif code == 7:
            ops.append(Exp())
        elif code == 8:
            ops.append(Flatten(params[0]))
        elif code == 9:
            ops.append(Reshape(tuple(params[1:1 + params[0]])))
        else:
            raise ModelFormatError("EL_ERR_BAD_OPCODE", f"op {index}: opcode {code}")
    return MobileModel(tuple(input_dims[:input_rank]), ops)
