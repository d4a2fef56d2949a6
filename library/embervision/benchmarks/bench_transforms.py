"""Times embervision's codecs and CPU transforms, with Pillow as a yardstick.

Run: python library/embervision/benchmarks/bench_transforms.py [--repeat N]
Prints one line per case: best-of-N milliseconds.
"""

import argparse
import io
import time

import numpy as np

import embervision
from embervision import transforms as T


def best_ms(fn, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def photo(height, width, seed=0):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    planes = [127 + 100 * np.sin(x / (17.0 + c) + y / (23.0 + 2 * c)) for c in range(3)]
    image = np.stack(planes, axis=-1) + rng.normal(0, 6, size=(height, width, 3))
    return np.clip(image, 0, 255).astype(np.uint8)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    try:
        from PIL import Image
    except ImportError:
        Image = None

    image = photo(1024, 1024)
    png = embervision.encode_png(image)
    jpeg = embervision.encode_jpeg(image, quality=90)
    batch = np.stack([T.to_chw(photo(256, 256, seed=s)) for s in range(32)])
    batch_f = T.convert_dtype(batch, np.float32)
    cases = [
        ("decode_png 1024x1024 RGB", lambda: embervision.decode_png(png)),
        ("encode_png 1024x1024 RGB (level 6)", lambda: embervision.encode_png(image)),
        ("decode_jpeg 1024x1024 RGB", lambda: embervision.decode_jpeg(jpeg)),
        ("encode_jpeg 1024x1024 RGB (q90)", lambda: embervision.encode_jpeg(image, 90)),
        ("resize uint8 32x3x256x256 -> 224 bilinear", lambda: T.resize(batch, 224)),
        ("resize float32 32x3x256x256 -> 128 bilinear", lambda: T.resize(batch_f, 128)),
        ("resize uint8 32x3x256x256 -> 128 nearest", lambda: T.resize(batch, 128, interpolation="nearest")),
        ("hflip float32 32x3x256x256", lambda: T.hflip(batch_f)),
        ("center_crop uint8 32x3x256x256 -> 224", lambda: T.center_crop(batch, 224)),
        ("normalize float32 32x3x256x256", lambda: T.normalize(batch_f, [0.485, 0.456, 0.406], [0.229, 0.224, 0.225])),
    ]
    if Image is not None:
        pil_images = [Image.fromarray(T.to_hwc(b)) for b in batch]
        cases += [
            ("Pillow decode PNG 1024x1024 RGB", lambda: np.asarray(Image.open(io.BytesIO(png)))),
            ("Pillow decode JPEG 1024x1024 RGB", lambda: np.asarray(Image.open(io.BytesIO(jpeg)))),
            ("Pillow resize 32 RGB 256x256 -> 224 bilinear", lambda: [p.resize((224, 224), Image.BILINEAR) for p in pil_images]),
        ]
    print(f"embervision {embervision.__version__} ({embervision.build_info()['variant']}), best of {args.repeat}")
    for name, fn in cases:
        print(f"{name:48s} {best_ms(fn, args.repeat):9.2f} ms")


if __name__ == "__main__":
    main()
