"""ember.mobile: export models for ember-lite, the mobile runtime, and check them.

    from ember import mobile
    model = mobile.MobileModel((1, 16), [mobile.Linear(w, b), mobile.ReLU(), mobile.Softmax()])
    mobile.export(model, "model.elm")
    expected = mobile.run_reference("model.elm", x)

The byte layout is documented in library/ember-lite/FORMAT.md.
"""

from ember.mobile.export import export
from ember.mobile.format import FORMAT_VERSION, ModelFormatError, decode, encode
from ember.mobile.ops import (
    Add, Conv2d, Exp, Flatten, Linear, MobileModel, Mul, ReLU, Reshape, Softmax,
)
from ember.mobile.reference import run_model, run_reference
from ember.mobile.runtime import AllocatorStats, EmberLite, LiteError, LiteModel


def load(path) -> MobileModel:
    """Read and validate an .elm file into a MobileModel."""
    with open(path, "rb") as handle:
        return decode(handle.read())


__all__ = [
    "Add", "AllocatorStats", "Conv2d", "EmberLite", "LiteError", "LiteModel", "Exp", "Flatten", "FORMAT_VERSION", "Linear", "MobileModel",
    "ModelFormatError", "Mul", "ReLU", "Reshape", "Softmax", "decode", "encode", "export",
    "load", "run_model", "run_reference",
]
