"""Regenerate the golden models ctest runs on every target (host and under qemu).

    python make_golden.py            # from an environment where ember is installed

Each <name>.elm comes with <name>.input.bin and <name>.expected.bin (raw little-endian
float32); the expected output is ember.mobile's float64 numpy reference. Deterministic:
running it again gives the same bytes.

limits/<name>.elm are valid files that the loader must refuse with EL_ERR_TOO_LARGE (a
buffer over EL_MAX_BUFFER_BYTES); ctest checks the refusal and seeds the fuzzer with them.
"""

from pathlib import Path

import numpy as np

from ember import mobile


def golden_models():
    """name -> (model, input) for every golden model."""
    rng = np.random.default_rng(20201027)

    def normal(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    mlp = mobile.MobileModel((4, 16), [
        mobile.Linear(normal(32, 16, scale=0.25), normal(32, scale=0.1)),
        mobile.ReLU(),
        mobile.Linear(normal(10, 32, scale=0.2), normal(10, scale=0.1)),
        mobile.Softmax(),
    ])
    cnn = mobile.MobileModel((2, 3, 12, 12), [
        mobile.Conv2d(normal(8, 3, 3, 3, scale=0.3), normal(8, scale=0.1), stride=1, padding=1),
        mobile.ReLU(),
        mobile.Conv2d(normal(4, 8, 3, 3, scale=0.2), None, stride=2, padding=0),
        mobile.Add(normal(4, 5, 5, scale=0.1)),
        mobile.Flatten(1),
        mobile.Linear(normal(6, 100, scale=0.1), normal(6, scale=0.1)),
        mobile.Exp(),
        mobile.Mul(normal(2, 6, scale=0.5)),
        mobile.Reshape((2, 3, 2)),
        mobile.Softmax(),
    ])
    return {
        "mlp": (mlp, normal(4, 16)),
        "cnn": (cnn, normal(2, 3, 12, 12)),
    }


def limit_models():
    """name -> model for every model whose buffers exceed EL_MAX_BUFFER_BYTES."""
    # 4 KB of weights, but the im2col buffer is 32*32 x 2018*2018 floats (16.7 GB): its byte
    # count wrapped a 32-bit size_t and overflowed the heap on armv7.
    conv = mobile.MobileModel((1, 1, 1, 1), [
        mobile.Conv2d(np.full((1, 1, 32, 32), 0.5, np.float32), None, stride=1, padding=1024)])
    return {"conv_im2col_over_limit": conv}


def main() -> None:
    here = Path(__file__).resolve().parent
    (here / "limits").mkdir(exist_ok=True)
    for name, model in limit_models().items():
        path = mobile.export(model, here / "limits" / f"{name}.elm")
        print(f"limits/{path.name}: {path.stat().st_size} bytes")
    for name, (model, x) in golden_models().items():
        path = mobile.export(model, here / f"{name}.elm")
        expected = mobile.run_reference(path, x, backend="numpy")
        x.astype("<f4").tofile(here / f"{name}.input.bin")
        expected.astype("<f4").tofile(here / f"{name}.expected.bin")
        print(f"{path.name}: {path.stat().st_size} bytes, output {expected.shape}")


if __name__ == "__main__":
    main()
