"""Small real artifacts for the publish tests: wheels of tiny projects written with the `wheel`
package (installable by pip), .conda packages built by rattler-build from the fixture recipe, and
a dist/manifest.json that records them with per-feature test results."""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import docker
import yaml
from wheel.wheelfile import WheelFile

from shipyard.plumbing.hashing import sha256_of
from shipyard.record.manifest import ArtifactRecord, FeatureRecord, Manifest
from shipyard.wheel.repair import source_date_epoch

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "tests" / "fixtures" / "conda" / "featured" / "recipe.yaml"
VERSION = "1.7.0"


def make_wheel(folder: Path, project: str, version: str, *, payload: str = "", requires: Sequence[str] = ()) -> Path:
    """A pure-Python wheel `project-version-py3-none-any.whl` holding one module; `requires` are its
    Requires-Dist."""
    folder.mkdir(parents=True, exist_ok=True)
    module = project.replace("-", "_")
    path = folder / f"{module}-{version}-py3-none-any.whl"
    info = f"{module}-{version}.dist-info"
    with source_date_epoch(1603800000), WheelFile(path, "w") as wf:  # the same bytes on every run
        wf.writestr(f"{module}/__init__.py", f"VERSION = {version!r}\nPAYLOAD = {payload!r}\n")
        wf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n"
                                         + "".join(f"Requires-Dist: {r}\n" for r in requires))
        wf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: shipyard-tests\nRoot-Is-Purelib: true\n"
                                     "Tag: py3-none-any\n")
    return path


def build_conda_packages(out: Path, tags: Iterable[str], version: str = VERSION) -> list[Path]:
    """The fixture recipe (noarch: generic, shipyard-featured) built once per variant tag."""
    from rattler_build import Stage0Recipe, ToolConfiguration, VariantConfig

    recipe_dir = Path(tempfile.mkdtemp(prefix="recipe-", dir=out.parent))
    data = yaml.safe_load(RECIPE.read_text())
    data["context"]["version"] = version
    (recipe_dir / "recipe.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    packages = []
    for tag in tags:
        recipe = Stage0Recipe.from_file(recipe_dir / "recipe.yaml")
        results = recipe.run_build(
            variant_config=VariantConfig.from_yaml(f"variant_tag: [{tag}]\n"), output_dir=out, channels=[],
            tool_config=ToolConfiguration(test_strategy="skip", compression_threads=1), package_format="conda")
        packages.extend(Path(p) for r in results for p in r.packages)
    return packages


def features(stable: str = "passed", beta: str = "passed") -> dict:
    def one(status: str, result: str) -> dict:
        return {"status": status, "result": result, "summary": f"{result} (1 of 1)", "passed": int(result == "passed"),
                "failed": int(result == "failed"), "skipped": 0, "skip_reasons": []}

    return {"ember.kernels": one("stable", stable), "ember.fft": one("beta", beta)}


def record(dist: Path, path: Path, *, component: str, package_type: str, variant: str, tag: str,
           tests: dict | None, version: str = VERSION) -> ArtifactRecord:
    return ArtifactRecord(
        name=path.name, path=path.relative_to(dist).as_posix(), sha256=sha256_of(path), size=path.stat().st_size,
        cell_id=f"{component}-{variant}-{path.name}", component=component, package_type=package_type,
        variant=variant, variant_tag=tag, platform="linux-x86_64", python=None, version=version,
        features=(FeatureRecord(id="ember.kernels", title="kernels", status="stable"),),
        tests=None if tests is None else {"result": "passed", "features": tests}, build={})


def write_manifest(dist: Path, records: Iterable[ArtifactRecord], version: str = VERSION) -> Path:
    manifest = Manifest(release="ember", version=version, artifacts=tuple(sorted(records, key=lambda r: r.cell_id)))
    path = dist / "manifest.json"
    path.write_text(json.dumps(manifest.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")
    return path


def synthetic_dist(dist: Path, conda_packages: Iterable[Path] = (), *, projects: Iterable[str] = ("ember",),
                   stable: str = "passed", beta: str = "passed", payload: str = "",
                   version: str = VERSION) -> list[ArtifactRecord]:
    """dist/ with cpu and cu118 wheels of each project, a pure emberaudio wheel and the conda
    packages given, and its manifest."""
    records = []
    common = {"version": version}
    for project in projects:
        for variant, tag in (("cpu", "cpu"), ("cuda11", "cu118")):
            wheel = make_wheel(dist / "whl" / tag / project, project, f"{version}+{tag}", payload=payload)
            records.append(record(dist, wheel, component=project, package_type="wheel", variant=variant, tag=tag,
                                  tests=features(stable, beta), **common))
    pure = make_wheel(dist / "whl" / "cpu" / "emberaudio", "emberaudio", version, payload=payload)
    records.append(record(dist, pure, component="emberaudio", package_type="wheel", variant="any", tag="any",
                          tests=features(), **common))
    for package in conda_packages:
        target = dist / "conda" / "noarch" / package.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(package.read_bytes())
        tag = "cu118" if "cu118" in package.name else "cpu"
        records.append(record(dist, target, component="ember", package_type="conda",
                              variant="cuda11" if tag == "cu118" else "cpu", tag=tag, tests=features(stable, beta),
                              **common))
    write_manifest(dist, records, version)
    return records


def import_image(folder: Path, ref: str, payload: str) -> str:
    """A one-layer image `ref` made with `docker import` from a tarball holding one file (no base
    image, no build): its image id."""
    import io
    import tarfile

    from shipyard.plumbing import command

    folder.mkdir(parents=True, exist_ok=True)
    archive = folder / f"{ref.replace(':', '_').replace('/', '_')}.tar"
    data = f"{ref} {payload}\n".encode()
    with tarfile.open(archive, "w") as tar:
        info = tarfile.TarInfo("etc/shipyard-test-image")
        info.size, info.mtime, info.mode = len(data), 1603800000, 0o644
        tar.addfile(info, io.BytesIO(data))
    command.run(["docker", "import", str(archive), ref], timeout=120)
    return command.run(["docker", "image", "inspect", "--format", "{{.Id}}", ref], timeout=60).stdout.strip()


def remove_images(client: docker.DockerClient, repo: str, ids: Iterable[str] = ()) -> None:
    """The images a test imported (`ids`) and every image any of whose references names `repo`
    (a re-import leaves the one before untagged; a killed push leaves its registry handle)."""
    # One listing call: images.list() inspects each image after listing, and an image another
    # process removes in between (the engine is shared) would raise ImageNotFound.
    found = {image["Id"] for image in client.api.images(all=True)
             if any(repo in ref for ref in (image.get("RepoTags") or []) + (image.get("RepoDigests") or []))}
    for image_id in {f"sha256:{i.removeprefix('sha256:')}" for i in ids} | found:
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.remove(image_id, force=True)


def image_record(ref: str, image_id: str, *, variant: str = "cpu", tag: str = "cpu", stable: str = "passed",
                 version: str = VERSION) -> ArtifactRecord:
    """The manifest record `shipyard image build` writes for an image (package type docker):
    its version tag as name, its id as sha256."""
    repository = ref.split(":", 1)[0]
    # Cell ids and components are identifiers (no ':' or '/'), as image/record.py writes them.
    return ArtifactRecord(
        name=ref, path="", sha256=image_id.removeprefix("sha256:"), size=1,
        cell_id=ref.replace(":", "-").replace("/", "-") + "-docker", component=repository.rsplit("/", 1)[-1],
        package_type="docker", variant=variant, variant_tag=tag, platform="linux-x86_64",
        python="3.11", version=version, features=(FeatureRecord(id="ember.kernels", title="kernels", status="stable"),),
        tests={"result": "passed", "features": features(stable)}, build={"tags": [ref], "target": "runtime"})
