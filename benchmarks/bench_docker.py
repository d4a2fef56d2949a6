"""Image build times and sizes, measured side by side in one run (`nox -s bench-docker`).

1. A rebuild of the runtime image after one changed wheel (emberaudio gains a comment) against a
   cold build of the same image (`--no-cache`: every layer, apt-get included), as a ratio. The
   two alternate, `--rounds` times each, so load on the machine hits both alike.
2. An unchanged re-run: shipyard's own seconds.
3. The size of every image (runtime and devel) of each variant with images.

The wheels are built for the images' Python (cached when unchanged) into a temporary dist; the
benchmark's images use their own repository name, so ember:* tags are left alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import docker

from shipyard.image.build import ImageRequest, build_images
from shipyard.plumbing.hashing import sha256_of
from shipyard.record.manifest import ArtifactRecord, merge_artifacts, read_manifest
from shipyard.release.spec import Spec
from shipyard.release.validate import load_spec
from shipyard.wheel.build_request import BuildRequest
from shipyard.wheel.index import write_index
from shipyard.wheel.variant_wheels import build_variant

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the tests' wheel-edit helper, as bench_publish uses their servers

from support.wheel_edit import append_to_wheel_member  # noqa: E402


def _wheels(spec: Spec, variant: str, dist: Path) -> None:
    images = spec.release.images
    assert images is not None
    build_variant(spec, BuildRequest(variant=variant, pythons=(images.python,), components=images.components,
                                     run_tests=False, dist=dist, state=ROOT / ".shipyard"))


def _change_wheel(dist: Path, variant_tag: str, round_no: int) -> None:
    """Append a comment to emberaudio/__init__.py inside its wheel; fix RECORD, index and manifest."""
    wheel = next((dist / "whl" / variant_tag / "emberaudio").glob("*.whl"))
    append_to_wheel_member(wheel, "emberaudio/__init__.py",
                           f"\n# bench-docker change {round_no} {time.time()}\n".encode())
    write_index(dist / "whl" / variant_tag)
    manifest = read_manifest(dist / "manifest.json")
    assert manifest is not None
    old = next(a for a in manifest.artifacts if a.component == "emberaudio" and a.package_type == "wheel")
    merge_artifacts(dist / "manifest.json", release=manifest.release, version=manifest.version,
                    records=[ArtifactRecord(**{**old.model_dump(), "sha256": sha256_of(wheel),
                                               "size": wheel.stat().st_size})])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", default="cpu", help="the variant whose runtime image is timed")
    parser.add_argument("--rounds", type=int, default=2, help="cold builds and rebuilds, alternating")
    args = parser.parse_args()
    spec = load_spec(ROOT)
    images = spec.release.images
    assert images is not None
    bench = dataclasses.replace(spec, release=spec.release.model_copy(
        update={"images": images.model_copy(update={"repository": "ember-bench"})}))
    variant = spec.release.variants[args.variant]
    with tempfile.TemporaryDirectory(prefix="bench-docker-", dir="/var/tmp") as work:
        dist = Path(work) / "dist"
        _wheels(spec, args.variant, dist)
        request = ImageRequest(variant=args.variant, dist=dist, targets=("runtime",), allow_untested=True)
        build_images(bench, request)  # warm the layer cache once, untimed
        cold, rebuild = [], []
        for round_no in range(args.rounds):
            start = time.monotonic()
            build_images(bench, dataclasses.replace(request, no_cache=True))
            cold.append(time.monotonic() - start)
            _change_wheel(dist, variant.tag, round_no)
            start = time.monotonic()
            (result,) = build_images(bench, request)
            rebuild.append(time.monotonic() - start)
            assert not result.cached
            print(f"round {round_no + 1}: cold {cold[-1]:.1f} s, rebuild after one changed wheel {rebuild[-1]:.1f} s")
        start = time.monotonic()
        (again,) = build_images(bench, request)
        noop = time.monotonic() - start
        assert again.cached
        client = docker.from_env()
        for ref in again.plan.tags:
            client.images.remove(ref, noprune=False)
    cold_s, rebuild_s = statistics.median(cold), statistics.median(rebuild)
    print(f"\nruntime image, variant {args.variant}: cold {cold_s:.1f} s, rebuild after one changed wheel "
          f"{rebuild_s:.1f} s: ratio {rebuild_s / cold_s:.2f}")
    print(f"unchanged re-run: {noop:.2f} s of shipyard's own time")
    print("\nimage sizes (docker image inspect, base layers included):")
    client = docker.from_env()
    for name in images.variants:
        for target in ("runtime", "devel"):
            flavour = f"cuda{spec.release.variants[name].cuda}" if spec.release.variants[name].cuda else "cpu"
            ref = f"{images.repository}:{spec.release.release.version}-{flavour}-{target}"
            try:
                size = client.images.get(ref).attrs["Size"] / 1e6
                budget = getattr(images.variants[name], f"{target}_budget_mb")
                print(f"  {ref:40} {size:6.0f} MB (budget {budget:g} MB)")
            except docker.errors.ImageNotFound:
                print(f"  {ref:40} not built here (shipyard image build --variant {name})")
    shutil.rmtree(dist, ignore_errors=True)


if __name__ == "__main__":
    main()
