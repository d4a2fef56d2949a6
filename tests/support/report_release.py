"""A dist/ for the report and notes tests: the real release description, and a manifest of a
partial cpu run on linux-x86_64 that holds one passed, one failed, one cached and one untested
cell, with a failing beta feature. The artifact files are small stand-ins (the report reads
only their names, sizes and hashes), so no build runs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from shipyard.host.toolchains.discover import Inventory
from shipyard.record.manifest import ArtifactRecord, FeatureRecord, Manifest
from shipyard.release.matrix import Cell, excluded_cells, expand, not_applicable
from shipyard.release.spec import Spec

VERSION = "1.7.0"
PASSED = "ember-cpu-linux-x86_64-cp311-wheel"  # fft (beta) fails in it; the cell passes
FAILED = "embervision-cpu-linux-x86_64-cp311-wheel"  # a stable feature fails: the cell fails
CACHED = "emberaudio-any-wheel"
UNTESTED = "ember-cpu-linux-x86_64-cp312-wheel"
FAILED_LOG = "tests/test_transforms.py::test_resize_batched FAILED\nE   AssertionError: shape (2, 3) != (3, 2)\n" \
             "==== 1 failed, 11 passed in 2.31s ===="


def host_without_tools() -> Inventory:
    """A linux-x86_64 host with no interpreter, compiler or toolkit: every cell of the host the
    manifest lacks is unavailable, with resolve()'s reason, whatever this machine holds."""
    return Inventory(host_platform="linux-x86_64", interpreters=(), compilers=(), cuda_toolkits=(),
                     cross_compilers={}, emulators={}, wine=None, docker_engine=None, android_ndk=None)


def _feature(status: str, passed: int, failed: int = 0, skipped: int = 0) -> dict:
    total = passed + failed + skipped
    result = "failed" if failed else ("partial" if skipped and passed else "passed" if passed else "skipped")
    summary = {"failed": f"failed ({failed} of {total})", "partial": f"passed ({skipped} of {total} skipped)",
               "passed": f"passed ({total} of {total})", "skipped": f"skipped (all {total})"}[result]
    return {"status": status, "result": result, "summary": summary, "passed": passed, "failed": failed,
            "skipped": skipped, "skip_reasons": ["no CUDA device"] if skipped else []}


def _tests(spec: Spec, cell: Cell, failing: set[str], log: str = "") -> dict:
    features = {fid: _feature(status, 0 if fid in failing else 4, failed=1 if fid in failing else 0,
                              skipped=2 if fid == "ember.cuda" else 0)
                for fid, _, status in spec.features_for(cell.component, "linux-x86_64")}
    blocking = [f for f in failing if spec.statuses.blocks(features[f]["status"])]  # stable, unless declared
    return {"result": "failed" if blocking else "passed", "installed": f"{VERSION}+cpu", "installer": "uv",
            "seconds": 12.5, "problems": [f"{features[f]['status']} feature {f} failed" for f in blocking],
            "features": features, "slowest": [], "span": [0, 0], "log_tail": log}


def write_release_dist(spec: Spec, dist: Path) -> Manifest:
    """Write dist/manifest.json and its artifact files; return the manifest."""
    cells = {c.id: c for c in expand(spec.release)}
    plan = {
        PASSED: ("passed", _tests(spec, cells[PASSED], {"ember.fft"}, "==== 40 passed, 1 failed in 9.1s ====")),
        FAILED: ("failed", _tests(spec, cells[FAILED], {"vision.transforms"}, FAILED_LOG)),
        CACHED: ("cached", _tests(spec, cells[CACHED], set())),
        UNTESTED: ("built", None),
    }
    records = []
    for cell_id, (result, tests) in plan.items():
        cell = cells[cell_id]
        tag = "" if cell.is_pure else "+cpu"
        name = (f"{cell.component}-{VERSION}-py3-none-any.whl" if cell.is_pure else
                f"{cell.component}-{VERSION}{tag}-{cell.python_tag}-{cell.python_tag}-manylinux_2_35_x86_64.whl")
        path = dist / "whl" / "cpu" / cell.component / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(cell_id.encode() * 4096)  # a stand-in of a known size
        platform = "linux-x86_64"
        records.append(ArtifactRecord(
            name=name, path=path.relative_to(dist).as_posix(), sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
            size=path.stat().st_size, cell_id=cell_id, component=cell.component, package_type=cell.package_type,
            variant=cell.variant, variant_tag=cell.variant_tag, platform=cell.platform, python=cell.python,
            version=VERSION,
            features=tuple(FeatureRecord(id=i, title=t, status=s) for i, t, s in spec.features_for(cell.component,
                                                                                                 platform)),
            tests=tests, build={"cache_key": "k", "cached": result == "cached", "seconds": 1.5 if result == "cached"
                                else 40.0, "result": result, "detail": "; ".join((tests or {}).get("problems", ()))}))
    manifest = Manifest(release=spec.release.release.name, version=VERSION,
                        artifacts=tuple(sorted(records, key=lambda r: r.cell_id)))
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "manifest.json").write_text(json.dumps(manifest.model_dump(mode="json"), indent=2, sort_keys=True))
    return manifest


def expected_cell_count(spec: Spec, manifest: Manifest | None) -> int:
    """The manifest's cells plus every matrix cell it lacks plus the excluded and the not-applicable ones."""
    built = set(manifest.by_cell()) if manifest else set()
    return (len(built) + sum(1 for c in expand(spec.release) if c.id not in built) + len(excluded_cells(spec.release))
            + len(not_applicable(spec.release)))


def add_conda_and_image(spec: Spec, dist: Path) -> Manifest:
    """Add to write_release_dist's manifest what a conda build and an image build of the cpu
    variant record: ember (py3.11) and libember for linux-x86_64, the noarch emberaudio, and the
    runtime image `ember:1.7.0-cpu-runtime`. Stand-in files, as there."""
    data = json.loads((dist / "manifest.json").read_text())
    added = [("ember-cpu-linux-x86_64-cp311-conda", "ember", "conda", "cpu", "cpu", "linux-x86_64", "3.11",
              f"ember-{VERSION}-py311_cpu_h0_0.conda"),
             ("libember-cpu-linux-x86_64-conda", "ember", "conda", "cpu", "cpu", "linux-x86_64", None,
              f"libember-{VERSION}-cpu_h0_0.conda"),
             ("emberaudio-any-conda", "emberaudio", "conda", "any", "any", "any", None,
              f"emberaudio-{VERSION}-pyh0_0.conda"),
             ("ember-cpu-linux-x86_64-runtime-docker", "ember", "docker", "cpu", "cpu", "linux-x86_64", "3.11",
              f"ember:{VERSION}-cpu-runtime")]
    for cell_id, component, package_type, variant, tag, platform, python, name in added:
        path = dist / ("conda" if package_type == "conda" else "images") / name.replace(":", "_")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(cell_id.encode() * 1024)
        record = ArtifactRecord(
            name=name, path=path.relative_to(dist).as_posix(), sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
            size=path.stat().st_size, cell_id=cell_id, component=component, package_type=package_type,
            variant=variant, variant_tag=tag, platform=platform, python=python, version=VERSION, features=(),
            tests=_tests(spec, next(c for c in expand(spec.release) if c.id == PASSED), set()),
            build={"cache_key": "k", "cached": False, "seconds": 30.0, "result": "passed"})
        data["artifacts"].append(record.model_dump(mode="json"))
    manifest = Manifest.model_validate(data)
    (dist / "manifest.json").write_text(json.dumps(data, indent=2, sort_keys=True))
    return manifest
