"""conda packages (#11): the variant config shipyard writes from release.yaml, the matrix's conda
cells, recipe errors at their file and line, the preflight that refuses to start a build whose
dependencies no channel has, and (slow) real rattler-build builds of ember with their cache."""

from __future__ import annotations

import asyncio
import datetime
import io
import json
import re
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml
import zstandard
from rattler.index import index_fs
from rattler.package import IndexJson
from rattler_build import assemble_package

from shipyard.cli import main
from shipyard.conda.build import BUILD_ROOT_ENV, CondaBuildRequest, build_conda_variant, conda_output_dir
from shipyard.conda.variants import write_variant_config
from shipyard.errors import SpecError
from shipyard.matrix import Cell, expand, select
from shipyard.toolchains.discover import discover
from shipyard.toolchains.resolve import Missing, resolve
from shipyard.validate import load_spec

# --- variant config -------------------------------------------------------------------------

def test_variant_config_comes_from_release_yaml(spec_copy, tmp_path):
    spec_copy.edit("release.yaml", 'pythons: ["3.9", "3.10", "3.11", "3.12", "3.13"]', 'pythons: ["3.10", "3.12"]')
    spec_copy.edit("release.yaml", '  python: "3.11"', '  python: "3.12"')  # the images' Python must stay in the list
    release = load_spec(spec_copy.root).release
    path = write_variant_config(release, release.variants["cuda11"], tmp_path / "state")
    assert path == tmp_path / "state" / "conda" / "variants" / "cuda11.yaml"
    assert yaml.safe_load(path.read_text()) == {
        "release_version": [release.release.version], "variant_tag": ["cu118"], "cuda_version": ["11.8"],
        "cuda_archs": [";".join(release.variants["cuda11"].archs)], "python": ["3.10", "3.12"],
        "python_min": ["3.10"]}
    cpu = yaml.safe_load(write_variant_config(release, release.variants["cpu"], tmp_path / "state").read_text())
    assert (cpu["variant_tag"], cpu["cuda_version"], cpu["cuda_archs"]) == (["cpu"], ["none"], ["none"])


def test_conda_channels_are_validated_in_release_yaml(spec_copy):
    spec_copy.edit("release.yaml", "channels: [conda-forge]", "channels: [conda forge, 'https://me:pw@x.org/c']")
    with pytest.raises(SpecError) as error:
        load_spec(spec_copy.root)
    text = str(error.value)
    assert re.search(r"release\.yaml:\d+: conda\.channels: 'conda forge' is not a conda channel; write a "
                     r"channel name such as conda-forge", text)
    assert "pw" not in text


def test_a_conda_package_type_needs_the_conda_section(spec_copy):
    text = (spec_copy.root / "release.yaml").read_text()
    (spec_copy.root / "release.yaml").write_text(text.split("\nconda:\n")[0] + "\n" + text.split(
        "channels: [conda-forge]\n")[1])
    with pytest.raises(SpecError) as error:
        load_spec(spec_copy.root)
    assert "components.ember.package_types: package type 'conda' needs the channels" in str(error.value)


# --- matrix ---------------------------------------------------------------------------------

def test_matrix_has_the_conda_cells(repo):
    release = load_spec(repo).release
    cells = expand(release)
    conda = select(cells, variant="cpu", platform="linux-x86_64", package_type="conda")
    ids = [c.id for c in conda]
    # The core once per platform and variant, the extension per Python, pure components once.
    assert ids[:len(release.pythons) + 1] == ["libember-cpu-linux-x86_64-conda"] + [
        f"ember-cpu-linux-x86_64-cp{p.replace('.', '')}-conda" for p in release.pythons]
    assert "libembervision-cpu-linux-x86_64-conda" in ids
    assert {c.id for c in conda if c.is_pure} == {"emberaudio-any-conda", "emberelastic-any-conda"}
    pure = next(c for c in cells if c.id == "emberelastic-any-conda")
    assert pure.variant_tags == tuple(v.tag for v in release.variants.values())
    assert "windows-amd64" not in pure.platforms  # release.yaml's exclusion holds for conda too
    # Every wheel cell is still there, with the id it had.
    assert "ember-cu118-linux-x86_64-cp311-wheel" in {c.id for c in cells}
    assert len(select(cells, package_type="wheel")) == 102


def test_shipyard_build_still_builds_only_wheels(repo):
    from shipyard.wheel.pipeline import BuildRequest, _cells

    cells = _cells(load_spec(repo), BuildRequest(variant="cpu"), discover())
    assert cells and {c.package_type for c in cells} == {"wheel"}


# --- recipe errors and the preflight ----------------------------------------------------------

@pytest.fixture
def conda_repo(spec_copy, repo, tmp_path, monkeypatch):
    """A copy of release.yaml, feature_status.yaml and recipes/, with empty component folders,
    and its own build root: for the tests that must fail before any build starts."""
    shutil.copytree(repo / "recipes", spec_copy.root / "recipes")
    monkeypatch.setenv(BUILD_ROOT_ENV, str(tmp_path / "roots"))
    return spec_copy


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_a_recipe_parse_error_names_file_and_line(conda_repo, tmp_path, capsys):
    recipe = conda_repo.root / "recipes" / "emberaudio" / "recipe.yaml"
    conda_repo.edit("recipes/emberaudio/recipe.yaml", "  noarch: python\n", "  noarch: python\n  bogus_key: 1\n")
    code = main(["--root", str(conda_repo.root), "conda", "build", "--variant", "cpu", "--component",
                 "emberaudio", "--channel", "file:///nonexistent", "--state", str(tmp_path / "state")])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{recipe}:{_line_of(recipe, 'bogus_key')}: build.bogus_key: invalid value for 'build': " \
           f"unknown field 'bogus_key'" in " ".join(err.split())


def test_a_recipe_render_error_names_file_and_line(conda_repo, tmp_path, capsys):
    recipe = conda_repo.root / "recipes" / "ember" / "recipe.yaml"
    conda_repo.edit("recipes/ember/recipe.yaml", "string: py${{ python", "string: py${{ pyhton")
    code = main(["--root", str(conda_repo.root), "conda", "build", "--variant", "cpu", "--component", "ember",
                 "--python", "3.11", "--channel", "file:///nonexistent", "--state", str(tmp_path / "state")])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2
    assert f"{recipe}:{_line_of(recipe, 'pyhton')}: outputs.1.build.string:" in err
    assert "undefined value" in err


def _metadata_channel(folder: Path, packages: list[tuple[str, str, str]]) -> str:
    """A channel of metadata-only packages (name, version, subdir): enough for a solver."""
    empty = folder.parent / f"{folder.name}-empty"
    empty.mkdir(parents=True)
    when = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    for name, version, subdir in packages:
        (folder / subdir).mkdir(parents=True, exist_ok=True)
        assemble_package(name=name, version=version, target_platform=subdir, build_string="0",
                         output_dir=str(folder / subdir), files_dir=str(empty), timestamp=when,
                         noarch="generic" if subdir == "noarch" else None, compression_threads=1)
    (folder / "noarch").mkdir(exist_ok=True)
    asyncio.run(index_fs(folder, write_zst=True, write_shards=False, force=True))
    return folder.resolve().as_uri()


def test_an_unsatisfiable_dependency_is_reported_before_any_build(conda_repo, tmp_path, capsys):
    conda_repo.edit("recipes/emberaudio/recipe.yaml", "    - ember ==${{ version }}\n",
                    "    - ember ==${{ version }}\n    - no-such-package >=2\n")
    version = load_spec(conda_repo.root).release.release.version
    first = _metadata_channel(tmp_path / "first", [("python", "3.11.7", "linux-64"), ("pip", "26.0", "noarch"),
                                                    ("hatchling", "1.33.0", "noarch"), ("numpy", "2.2.6", "linux-64"),
                                                    ("ember", version, "linux-64")])
    second = _metadata_channel(tmp_path / "second", [("no-such-package", "1.0", "noarch")])
    state = tmp_path / "state"
    code = main(["--root", str(conda_repo.root), "conda", "build", "--variant", "cpu", "--component",
                 "emberaudio", "--channel", first, "--channel", second, "--state", str(state)])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 4
    assert re.search(r"emberaudio-" + re.escape(version) + r"-pyh[0-9a-f]{7}_0 \(\S+recipes/emberaudio/recipe\.yaml\): "
                     r"its run requirements \[.*no-such-package >=2.*\] cannot be met", err), err
    assert f"channels searched, in this order: {first} {second}" in err
    assert "(nothing was built)" in err
    root = tmp_path / "roots" / "cpu"
    assert not list(root.glob("*/*.conda")) and not list(root.glob("bld/*"))
    assert not conda_output_dir(state, load_spec(conda_repo.root).release.variants["cpu"]).exists()


# --- real builds (slow) -----------------------------------------------------------------------

@pytest.fixture(scope="session")
def conda_channels(conda_bootstrap) -> list[str]:
    """The dependency channels of the conda builds: shipyard's bootstrap channel (tests/conftest.py)."""
    return [conda_bootstrap.url()]


def _about(package: Path) -> dict[str, object]:
    with zipfile.ZipFile(package) as archive:
        info = next(n for n in archive.namelist() if n.startswith("info-"))
        data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(archive.read(info))).read()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = tar.extractfile("info/about.json")
        assert member is not None
        return json.load(member)


@pytest.fixture(scope="module")
def cpu_build(repo, conda_channels, tmp_path_factory):
    state = tmp_path_factory.mktemp("conda-state")
    request = CondaBuildRequest(variant="cpu", channels=tuple(conda_channels), pythons=("3.11",),
                                components=("ember",), state=state)
    return state, request, build_conda_variant(load_spec(repo), request)


@pytest.mark.slow
def test_cpu_build_makes_libember_and_ember_pinned_to_it(repo, cpu_build):
    spec = load_spec(repo)
    version = spec.release.release.version
    _, _, outcomes = cpu_build
    by_name = {o.name: o for o in outcomes}
    assert set(by_name) == {"ember-variant", "libember", "ember"}
    assert all(o.result == "built" for o in outcomes)
    lib, ember, mutex = by_name["libember"], by_name["ember"], by_name["ember-variant"]
    assert re.fullmatch(re.escape(f"libember-{version}-cpu_h") + r"[0-9a-f]{7}_0\.conda", lib.path.name)
    assert re.fullmatch(re.escape(f"ember-{version}-py311_cpu_h") + r"[0-9a-f]{7}_0\.conda", ember.path.name)
    assert mutex.path.name == "ember-variant-1.0-cpu.conda"
    depends = IndexJson.from_package_archive(ember.path).depends
    assert f"libember =={version} {lib.build}" in depends
    assert "ember-variant ==1.0 cpu" in depends
    assert IndexJson.from_package_archive(lib.path).constrains == [f"ember =={version} *_cpu_*"]
    assert not [d for d in IndexJson.from_package_archive(lib.path).depends if d.startswith("cuda-cudart")]
    # Each package carries its platform's features and their statuses, from feature_status.yaml.
    expected = [{"id": i, "title": t, "status": s} for i, t, s in spec.features_for("ember", "linux-x86_64")]
    for package in (lib.path, ember.path):
        assert _about(package)["extra"] == {"shipyard": {"variant": "cpu", "features": expected}}
    assert lib.cell is not None and lib.cell.id == "libember-cpu-linux-x86_64-conda"
    assert ember.cell is not None and ember.cell.id == "ember-cpu-linux-x86_64-cp311-conda"
    print("times:", {o.label: round(o.seconds, 1) for o in outcomes})


@pytest.mark.slow
def test_an_unchanged_rerun_is_cached_and_rewrites_nothing(repo, cpu_build, tmp_path, capsys):
    state, request, first = cpu_build
    before = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in sorted(first[0].path.parent.parent.rglob("*"))}
    code = main(["--root", str(repo), "conda", "build", "--variant", "cpu", "--python", "3.11", "--component",
                 "ember", *[a for c in request.channels for a in ("--channel", c)], "--state", str(state),
                 "--no-tests", "--dist", str(tmp_path / "dist")])
    out = capsys.readouterr().out
    assert code == 0
    for outcome in first:
        assert re.search(re.escape(outcome.label) + r"\s*│\s*cached", out), out
    assert "built in" not in out
    after = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in sorted(first[0].path.parent.parent.rglob("*"))}
    assert after == before


@pytest.mark.slow
def test_cu118_libember_depends_on_the_matching_cuda_runtime(repo, conda_channels, tmp_path):
    spec = load_spec(repo)
    variant = spec.release.variants["cuda11"]
    core = Cell("ember", variant.name, variant.tag, discover().host_platform, None, "conda", package="libember")
    toolchain = resolve(core, spec.release, discover())
    if isinstance(toolchain, Missing):
        pytest.skip(f"no CUDA {variant.cuda} toolchain on this machine: {toolchain}")
    outcomes = build_conda_variant(spec, CondaBuildRequest(variant="cuda11", channels=tuple(conda_channels),
                                                           pythons=("3.11",), components=("ember",),
                                                           state=tmp_path / "state"))
    lib = next(o for o in outcomes if o.name == "libember")
    assert lib.build.startswith(f"{variant.tag}_h")
    assert f"cuda-cudart {variant.cuda}.*" in IndexJson.from_package_archive(lib.path).depends
    mutex = next(o for o in outcomes if o.name == "ember-variant")
    assert IndexJson.from_package_archive(mutex.path).constrains == [f"__cuda >={variant.cuda}"]


@pytest.mark.slow
def test_a_failed_build_leaves_the_output_as_it_was(repo, cpu_build, tmp_path, capsys):
    state, request, first = cpu_build
    copy = tmp_path / "repo"
    copy.mkdir()
    for name in ("release.yaml", "feature_status.yaml"):
        shutil.copy(repo / name, copy / name)
    shutil.copytree(repo / "recipes", copy / "recipes")
    shutil.copytree(repo / "library", copy / "library", ignore=shutil.ignore_patterns("build", "__pycache__"))
    recipe = copy / "recipes" / "emberaudio" / "recipe.yaml"
    failing = "    content:\n      - echo emberaudio-fails-on-purpose && exit 3\n"
    recipe.write_text(recipe.read_text().replace("    content:\n", failing, 1))
    output = first[0].path.parent.parent
    before = {p: p.read_bytes() for p in sorted(output.rglob("*")) if p.is_file()}
    code = main(["--root", str(copy), "conda", "build", "--variant", "cpu", "--python", "3.11", "--component",
                 "emberaudio", *[a for c in request.channels for a in ("--channel", c)], "--state", str(state),
                 "--dist", str(tmp_path / "dist")])
    err = capsys.readouterr().err
    assert code == 5, err
    assert not (tmp_path / "dist" / "conda").exists()  # nothing published
    assert re.search(r"conda build of emberaudio-\S+ \(\S+recipe\.yaml\) failed", err)
    assert "emberaudio-fails-on-purpose" in err  # the tail of rattler-build's log, quoted
    assert {p: p.read_bytes() for p in sorted(output.rglob("*")) if p.is_file()} == before
