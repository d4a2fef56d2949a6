"""Writing ember-lite model files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Sequence, Union

from ember.mobile.format import encode
from ember.mobile.ops import MobileModel


def export(model_ops: Union[MobileModel, Sequence[object]], path: Union[str, os.PathLike], *,
           input_shape: Optional[Sequence[int]] = None) -> Path:
    """Write `model_ops` (a MobileModel, or a list of ops plus `input_shape`) to `path`.

    The file is written to a temporary name and renamed, so a reader never sees half of it.
    """
    if isinstance(model_ops, MobileModel):
        if input_shape is not None and tuple(input_shape) != model_ops.input_shape:
            raise ValueError("input_shape disagrees with the model's own input shape")
        model = model_ops
    else:
        if input_shape is None:
            raise ValueError("export(ops, path) needs input_shape= when given a list of ops")
        model = MobileModel(input_shape, list(model_ops))
    data = encode(model)
    target = Path(path)
    partial = target.with_name(target.name + ".partial")
    partial.write_bytes(data)
    os.replace(partial, target)
    return target
