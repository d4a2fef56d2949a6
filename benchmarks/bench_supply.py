"""bench-supply: what the SBOM and the signed provenance add to a build (issue #18: seconds, not more).

On a dist/ folder a build wrote (default: this repository's, after `nox -s build-cpu`), side by side:
- per wheel, the relabelling re-pack alone, and re-pack plus its SBOM (tracing every grafted library
  to its Debian package), as a build does it;
- signing the provenance of every artifact of the manifest, and `shipyard verify` of all of them.
Usage: python benchmarks/bench_supply.py [DIST]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

from shipyard.host.toolchains.discover import discover  # noqa: E402
from shipyard.host.toolchains.resolve import Toolchain  # noqa: E402
from shipyard.record.manifest import read_manifest  # noqa: E402
from shipyard.release.validate import load_spec  # noqa: E402
from shipyard.supply.keys import generate_key, load_public_key, signer_from_pem  # noqa: E402
from shipyard.supply.provenance import attest_manifest  # noqa: E402
from shipyard.supply.sbom import wheel_sbom_files  # noqa: E402
from shipyard.supply.verify import verify  # noqa: E402
from shipyard.wheel.repair import relabel_wheel  # noqa: E402


def main() -> int:
    dist = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "dist"
    manifest = read_manifest(dist / "manifest.json")
    if manifest is None:
        print(f"{dist}: no manifest.json; run `nox -s build-cpu` first")
        return 2
    spec = load_spec(REPO)
    inventory = discover()
    wheels = []
    for artifact in manifest.artifacts:
        if artifact.package_type == "wheel":
            # The compiler that keeps the platform's glibc promise (the bullseye sysroot's): the
            # SBOM traces the libraries the wheel vendored from where that compiler linked them.
            platform = spec.release.platforms.get(artifact.platform)  # none for a pure wheel ("any")
            promise = platform.promised_glibc if platform else None
            compiler = inventory.compiler_at_most(None, glibc=promise)
            wheels.append((dist / artifact.path, Toolchain(inventory.interpreters[0], compiler, None, None)))
    with tempfile.TemporaryDirectory(prefix="bench-supply-") as tmp:
        base = Path(tmp)
        plain = with_sbom = 0.0
        for wheel, toolchain in wheels:
            start = time.perf_counter()
            relabel_wheel(wheel, label=None, extra_files={}, out_dir=base / "a", epoch=1600000000)
            plain += time.perf_counter() - start
            start = time.perf_counter()
            files = wheel_sbom_files(wheel, toolchain, version="0", epoch=1600000000)
            relabel_wheel(wheel, label=None, extra_files=files, out_dir=base / "b", epoch=1600000000)
            with_sbom += time.perf_counter() - start
        copy = base / "dist"
        shutil.copytree(dist, copy)
        shutil.rmtree(copy / "provenance", ignore_errors=True)
        private, public, _ = generate_key(base / "key.pem")
        signer = signer_from_pem(private.read_bytes(), str(private))
        start = time.perf_counter()
        report = attest_manifest(spec, copy, signer, str(private))
        signing = time.perf_counter() - start
        start = time.perf_counter()
        results = verify(copy, load_public_key(public))
        checking = time.perf_counter() - start
    print(f"{len(wheels)} wheels: re-pack {plain:.2f} s, re-pack + SBOM {with_sbom:.2f} s "
          f"(SBOM adds {with_sbom - plain:.2f} s, {with_sbom / plain:.2f}x)")
    print(f"{report.signed} artifacts signed in {signing:.2f} s; verified ({len(results)} checks) in {checking:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
