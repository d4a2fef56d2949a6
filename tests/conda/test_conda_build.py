"""conda packages (#11): the variant config shipyard writes from release.yaml, the matrix's conda
cells, recipe errors at their file and line, the preflight that refuses to start a build whose
dependencies no channel has. The real builds, their cache and a failed build's effect are tested on
the release that tests/conda/test_conda_install.py builds once."""

from __future__ import annotations

import asyncio
import datetime
import json
import re
import shutil
import time
from pathlib import Path

import pytest
import yaml
import zstandard
from rattler.index import index_fs
from rattler_build import assemble_package

from shipyard.cli import main
from shipyard.conda.build import BUILD_ROOT_ENV, conda_output_dir
from shipyard.conda.package_tests import conda_specs
from shipyard.conda.variants import write_variant_config
from shipyard.errors import SpecError
from shipyard.host.toolchains.discover import discover
from shipyard.record.manifest import read_manifest
from shipyard.release.matrix import expand, select
from shipyard.release.project_declaration import declared_version
from shipyard.release.validate import load_spec

# --- variant config -------------------------------------------------------------------------

def test_variant_config_comes_from_release_yaml(spec_copy, tmp_path):
    spec_copy.edit("release.yaml", 'pythons: ["3.9", "3.10", "3.11", "3.12", "3.13"]', 'pythons: ["3.10", "3.12"]')
    spec_copy.edit("release.yaml", '  python: "3.11"', '  python: "3.12"')  # the images' Python must stay in the list
    release = load_spec(spec_copy.root).release
    path = write_variant_config(release, release.variants["cuda11"], tmp_path / "state")
    assert path == tmp_path / "state" / "conda" / "variants" / "cuda11.yaml"
    assert yaml.safe_load(path.read_text()) == {
        "release_version": [release.release.version], "variant_tag": ["cu118"], "cuda_version": ["11.8"],
        "cuda_archs": [";".join(release.variants["cuda11"].archs)],
        # conda-forge's CUDA 11 packages: cudatoolkit, and nvcc_<subdir> for compiler('cuda')
        "cuda_runtime": ["cudatoolkit"], "cuda_compiler": ["nvcc"], "cuda_compiler_version": ["11.8"],
        "python": ["3.10", "3.12"], "python_min": ["3.10"]}
    cpu = yaml.safe_load(write_variant_config(release, release.variants["cpu"], tmp_path / "state").read_text())
    assert (cpu["variant_tag"], cpu["cuda_version"], cpu["cuda_archs"]) == (["cpu"], ["none"], ["none"])
    assert cpu["cuda_runtime"] == ["none"] and "cuda_compiler" not in cpu
    cu124 = yaml.safe_load(write_variant_config(release, release.variants["cuda12"], tmp_path / "state").read_text())
    assert (cu124["cuda_runtime"], cu124["cuda_compiler"]) == (["cuda-cudart"], ["cuda-nvcc"])


def test_conda_channels_are_validated_in_release_yaml(spec_copy):
    spec_copy.edit("release.yaml", "channels: [conda-forge]", "channels: [conda forge, 'https://me:Kq7vZw3Xp@x.org/c']")
    with pytest.raises(SpecError) as error:
        load_spec(spec_copy.root)
    text = str(error.value)
    assert re.search(r"release\.yaml:\d+: conda\.channels\.0: not a conda channel; write a channel name such as "
                     r"conda-forge, or a URL \(https://…, file:///…\) \(got 'conda forge'\)", text)
    assert re.search(r"release\.yaml:\d+: conda\.channels\.1: a channel URL carries credentials .+ "
                     r"\(got 'https://x\.org/c'\)", text)
    assert "Kq7vZw3Xp" not in text  # a secret no temp path can hold by chance


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
    # the variant provider is one more pure wheel; 5 of them are ember's linux-x86_64-manylinux2014 CPU wheels,
    # a platform without conda packages (release.yaml's exclusion)
    assert len(select(cells, package_type="wheel")) == 108
    assert "linux-x86_64-manylinux2014" not in pure.platforms


def test_shipyard_build_still_builds_only_wheels(repo):
    from shipyard.wheel.build_request import BuildRequest
    from shipyard.wheel.cell_selection import selected_cells

    cells, ruled_out = selected_cells(load_spec(repo), BuildRequest(variant="cpu"), discover())
    assert cells and {c.package_type for c in cells} == {"wheel"}
    assert ruled_out == []  # every ember component admits every Python of the release


# --- recipe errors and the preflight ----------------------------------------------------------

@pytest.fixture
def conda_repo(spec_copy, repo, tmp_path, monkeypatch):
    """A copy of release.yaml, feature_status.yaml and recipes/, with component folders that hold
    only a pyproject.toml naming the project's version (what a recipe renders with), and its own
    build root: for the tests that must fail before any build starts (SpecCopy copies recipes/)."""
    for component in ("ember", "embervision", "emberaudio", "emberelastic"):
        version = declared_version(repo / "library" / component)
        (spec_copy.root / "library" / component / "pyproject.toml").write_text(
            f'[project]\nname = "{component}"\nversion = "{version}"\n')
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
    conda_repo.edit("recipes/emberaudio/recipe.yaml", "    - ember ==${{ ember_version }}\n",
                    "    - ember ==${{ ember_version }}\n    - no-such-package >=2\n")
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


def test_without_a_channel_the_build_solves_from_release_yaml_channels_not_the_bootstrap(
        conda_repo, tmp_path, capsys, monkeypatch):
    """A CI runner has no pyenv: `shipyard conda build` without --channel takes release.yaml's
    conda.channels (conda-forge there) and never makes the bootstrap channel implicitly."""
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))  # a bare container's view
    version = load_spec(conda_repo.root).release.release.version
    first = _metadata_channel(tmp_path / "first", [("python", "3.11.7", "linux-64"), ("pip", "26.0", "noarch"),
                                                    ("hatchling", "1.33.0", "noarch"), ("ember", version, "linux-64")])
    second = _metadata_channel(tmp_path / "second", [("unrelated", "1.0", "noarch")])
    conda_repo.edit("release.yaml", "channels: [conda-forge]", f"channels: ['{first}', '{second}']")
    code = main(["--root", str(conda_repo.root), "conda", "build", "--variant", "cpu", "--component",
                 "emberaudio", "--python", "3.11", "--state", str(tmp_path / "state")])
    err = " ".join(capsys.readouterr().err.split())
    # emberaudio needs numpy, which neither channel has: the preflight names both, in release.yaml's
    # order, and no other (no bootstrap channel was made).
    assert code == 4, err
    assert f"dependencies: {first}, {second}" in err
    assert f"channels searched, in this order: {first} {second} fix" in err, err
    assert "bootstrap channel /" not in err and "pyenv" not in err, err


def test_the_bootstrap_channel_is_made_only_on_request(repo, tmp_path, monkeypatch, capsys):
    """--bootstrap-channel makes it from this host's pyenv Pythons: without them it says so."""
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    monkeypatch.setenv("SHIPYARD_CACHE", str(tmp_path / "cache"))  # a cold machine: nothing cached
    code = main(["--root", str(repo), "conda", "build", "--variant", "cpu", "--component", "emberaudio",
                 "--python", "3.11", "--bootstrap-channel", "--state", str(tmp_path / "state"),
                 "--dist", str(tmp_path / "dist")])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 4, err
    assert "Python 3.11 has no pyenv build" in err, err


# --- requires-python --------------------------------------------------------------------------

def _ember_requires(conda_repo, specifier: str) -> None:
    conda_repo.edit("release.yaml", "    import_name: ember\n",
                    f"    import_name: ember\n    requires_python: \"{specifier}\"\n")


def test_a_python_the_component_rules_out_is_not_applicable_not_a_failure(conda_repo, tmp_path, capsys):
    _ember_requires(conda_repo, ">=3.10")
    dist, state = tmp_path / "dist", tmp_path / "state"
    code = main(["--root", str(conda_repo.root), "conda", "build", "--variant", "cpu", "--component", "ember",
                 "--python", "3.9", "--channel", "file:///nonexistent", "--state", str(state), "--dist", str(dist)])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0  # nothing the run asked for can be built, and that is no failure
    cell = "ember-cpu-linux-x86_64-cp39-conda"
    assert re.search(rf"{cell} │ not applicable \(requires-python >=3\.10\) │ not built", out), out
    assert "not applicable, not built: 1 cell (ember: requires-python >=3.10, 1)" in out
    manifest = read_manifest(dist / "manifest.json")
    assert manifest is not None and manifest.artifacts == ()
    assert [(r.cell_id, r.package_type, r.python, r.result, r.reason) for r in manifest.not_applicable] == [
        (cell, "conda", "3.9", "not applicable", "requires-python >=3.10")]
    # Never attempted: no build root, no package, no channel.
    assert not (tmp_path / "roots").exists() and not (dist / "conda").exists()


def test_the_conda_build_plans_no_package_for_a_python_the_component_rules_out(conda_repo, tmp_path, capsys):
    """With every Python, the ones ember admits are planned (libember once) and 3.9 is not: the
    preflight solves each planned package and names every one whose dependencies are missing."""
    _ember_requires(conda_repo, ">=3.10")
    empty = _metadata_channel(tmp_path / "bare", [("python", "3.11.7", "linux-64")])
    code = main(["--root", str(conda_repo.root), "conda", "build", "--variant", "cpu", "--component", "ember",
                 "--channel", empty, "--state", str(tmp_path / "state"), "--dist", str(tmp_path / "dist")])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 4, err
    assert "ember-cpu-linux-x86_64-cp39-conda: not applicable (requires-python >=3.10), not built" in err
    # The mutex, libember and ember for 3.10 to 3.13; every Python's ember fails for want of pip and numpy.
    assert "preflight, solving 6 packages' requirements" in err
    assert set(re.findall(r"\bember-[0-9.]+-py(\d+)_cpu_h", err)) == {"310", "311", "312", "313"}, err


# --- the channel index ----------------------------------------------------------------------


def test_indexing_the_same_packages_later_gives_the_same_repodata_bytes(tmp_path):
    """py-rattler stamps each record it indexes for the first time with the clock (indexed_timestamp,
    in ms); shipyard's index drops it, so two clean indexings a moment apart (two builds) write the
    same repodata.json and .json.zst, and a solver still picks the packages from the channel
    (exclude_newer falls back to the packages' build time)."""
    from rattler import Channel, Gateway, solve

    from shipyard.conda.rattler_glue import index_channel

    channels = [tmp_path / "first", tmp_path / "second"]
    _metadata_channel(channels[0], [("tiny", "1.0", "noarch"), ("tiny-native", "2.0", "linux-64")])
    shutil.copytree(channels[0], channels[1])
    raw = {}
    for channel in channels:  # py-rattler's own first index of each: the clock is in it
        _remove_index(channel)
        time.sleep(0.05)
        asyncio.run(index_fs(channel, write_zst=True, write_shards=False, force=True))
        raw[channel] = (channel / "noarch" / "repodata.json").read_bytes()
    assert raw[channels[0]] != raw[channels[1]], "py-rattler's index no longer differs: simplify index_channel"
    written = []
    for channel in channels:
        _remove_index(channel)
        time.sleep(0.05)
        index_channel(channel)
        written.append({f"{subdir}/{name}": (channel / subdir / name).read_bytes()
                        for subdir in ("noarch", "linux-64") for name in ("repodata.json", "repodata.json.zst")})
    assert written[0] == written[1]
    record = json.loads(written[0]["noarch/repodata.json"])["packages.conda"]["tiny-1.0-0.conda"]
    assert "indexed_timestamp" not in record and record["timestamp"] == 1767225600000
    assert json.loads(zstandard.ZstdDecompressor().decompressobj().decompress(
        written[0]["linux-64/repodata.json.zst"])) == json.loads(written[0]["linux-64/repodata.json"])

    cutoff = datetime.datetime(2026, 6, 1, tzinfo=datetime.UTC)
    records = asyncio.run(solve([Channel(channels[1].as_uri())], ["tiny", "tiny-native"],
                                platforms=["linux-64", "noarch"], gateway=Gateway(cache_dir=tmp_path / "cache"),
                                exclude_newer=cutoff))
    assert sorted(f"{r.name.normalized}-{r.version}" for r in records) == ["tiny-1.0", "tiny-native-2.0"]


def _remove_index(channel: Path) -> None:
    for repodata in channel.glob("*/repodata.json*"):
        repodata.unlink()


def test_test_requirements_become_conda_specs_named_as_conda_forge_names_them():
    """A tests folder's requirements.txt is solved from conda channels: each PyPI name becomes the
    package conda-forge publishes it as (`installer` is `python-installer` there), its version
    specifier kept."""
    assert conda_specs(["pytest>=7", "Scikit_Build_Core", "installer==0.7.0", "numpy"]) == [
        "pytest >=7", "scikit-build-core", "python-installer ==0.7.0", "numpy"]


# --- what a run tests and publishes -----------------------------------------------------------

def _package(folder: Path, name: str, version: str, build: str, subdir: str, depends: list[str]) -> Path:
    """A real (metadata-only) .conda file."""
    empty = folder / ".empty"
    empty.mkdir(parents=True, exist_ok=True)
    out = folder / subdir
    out.mkdir(parents=True, exist_ok=True)
    assemble_package(name=name, version=version, target_platform=subdir, build_string=build, output_dir=str(out),
                     files_dir=str(empty), depends=depends, noarch="generic" if subdir == "noarch" else None,
                     timestamp=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC), compression_threads=1)
    return out / f"{name}-{version}-{build}.conda"


def _run_cells(spec, folder: Path, ember_results: dict[str, bool]):
    """The cells of a cpu run as the pipeline has them after its tests: the mutex, libember, an
    ember per Python in `ember_results` (passed or not), emberaudio (noarch) tested with 3.9 and 3.13."""
    from shipyard.conda.build import PackageOutcome
    from shipyard.conda.variant_packages import CondaCell
    from shipyard.testing.verdict import TestRun

    cells = {c.id: c for c in select(expand(spec.release), variant="cpu", platform="linux-x86_64",
                                     package_type="conda")}
    version = spec.release.components["ember"].version or "1.7.0"

    def outcome(name: str, version: str, build: str, subdir: str, depends: list[str], cell_id: str | None):
        path = _package(folder, name, version, build, subdir, depends)
        return PackageOutcome(name, version, build, subdir, "built", 1.0, path, cells.get(cell_id or ""), "k")

    def verdict(passed: bool) -> TestRun:
        return TestRun("installed", (), 1.0, problems=() if passed else ("ember.fft (stable): 1 failed",))

    mutex = outcome("ember-variant", "1.0", "cpu", "noarch", [], None)
    lib = outcome("libember", version, "cpu_h0_0", "linux-64", ["ember-variant ==1.0 cpu"],
                  "libember-cpu-linux-x86_64-conda")
    run = [CondaCell(mutex), CondaCell(lib)]
    for python, passed in ember_results.items():
        tag = python.replace(".", "")
        ember = outcome("ember", version, f"py{tag}_cpu_h0_0", "linux-64",
                        [f"libember =={version} cpu_h0_0", "ember-variant ==1.0 cpu"],
                        f"ember-cpu-linux-x86_64-cp{tag}-conda")
        run.append(CondaCell(ember, python, verdict(passed)))
    audio = outcome("emberaudio", spec.release.components["emberaudio"].version or version, "pyh0_0", "noarch",
                    [f"ember =={version}"], "emberaudio-any-conda")
    run += [CondaCell(audio, "3.9", verdict(True)), CondaCell(audio, "3.13", verdict(True))]
    return run


def test_libember_is_published_only_when_a_package_built_on_it_passed(conda_repo, tmp_path):
    from shipyard.conda.variant_packages import CondaRunRequest, publish_run

    spec = load_spec(conda_repo.root)
    said: list[str] = []
    request = CondaRunRequest(variant="cpu", state=tmp_path / "state", dist=tmp_path / "dist")
    cells = _run_cells(spec, tmp_path / "built", {"3.11": False, "3.12": False})
    publish_run(spec, cells, [], request, said.append)
    published = sorted(p.name for p in (tmp_path / "dist" / "conda").glob("*/*.conda"))
    assert published == ["ember-variant-1.0-cpu.conda", "emberaudio-1.7.0-pyh0_0.conda"]
    assert ("libember-1.7.0-cpu_h0_0: not published: no package that depends on it passed its tests "
            "(ember-1.7.0-py311_cpu_h0_0, ember-1.7.0-py312_cpu_h0_0 failed)") in said, said
    manifest = read_manifest(tmp_path / "dist" / "manifest.json")
    assert manifest is not None
    assert "libember-cpu-linux-x86_64-conda" not in manifest.by_cell()

    # One ember that passed proves the core: it is published with that ember.
    cells = _run_cells(spec, tmp_path / "built-again", {"3.11": False, "3.12": True})
    publish_run(spec, cells, [], request, said.append)
    manifest = read_manifest(tmp_path / "dist" / "manifest.json")
    assert manifest is not None
    assert {"libember-cpu-linux-x86_64-conda", "ember-cpu-linux-x86_64-cp312-conda"} <= set(manifest.by_cell())
    assert "ember-cpu-linux-x86_64-cp311-conda" not in manifest.by_cell()


def test_a_package_built_only_for_the_selections_tests_is_recorded_not_tested(conda_repo, tmp_path):
    """`--component emberaudio` also builds ember (and its core): published for emberaudio's tests
    to install, recorded as the wheels' are (`not tested`, with why), and proven by nothing, so the
    gate of a release channel does not take emberaudio's tests for ember's."""
    from shipyard.conda.variant_packages import CondaRunRequest, publish_run
    from shipyard.wheel.build_request import dependency_detail

    spec = load_spec(conda_repo.root)
    cells = _run_cells(spec, tmp_path / "built", {"3.11": True})
    why = dependency_detail("ember", "emberaudio")
    for cell in cells:
        if cell.package.cell is not None and cell.package.cell.component == "ember":
            cell.python, cell.test, cell.untested = None, None, why
    request = CondaRunRequest(variant="cpu", state=tmp_path / "state", dist=tmp_path / "dist")
    publish_run(spec, cells, [], request, lambda _: None)
    manifest = read_manifest(tmp_path / "dist" / "manifest.json")
    assert manifest is not None
    records = manifest.by_cell()
    for cell_id in ("ember-cpu-linux-x86_64-cp311-conda", "libember-cpu-linux-x86_64-conda"):
        record = records[cell_id]
        assert (record.build["result"], record.build["detail"], record.tests, record.proven_by) == (
            "not tested", why, None, ()), cell_id
    audio = records["emberaudio-any-conda"]
    assert audio.tests is not None and audio.tests["result"] == "passed"


def test_a_conda_record_carries_the_components_own_version(conda_repo, tmp_path):
    conda_repo.edit("release.yaml", "  emberaudio:\n    path: library/emberaudio\n",
                    "  emberaudio:\n    path: library/emberaudio\n    version: \"2.0.1\"\n")
    from shipyard.conda.variant_packages import CondaRunRequest, publish_run

    spec = load_spec(conda_repo.root)
    assert spec.release.release.version == "1.7.0"
    request = CondaRunRequest(variant="cpu", state=tmp_path / "state", dist=tmp_path / "dist")
    publish_run(spec, _run_cells(spec, tmp_path / "built", {"3.11": True}), [], request, lambda _: None)
    manifest = read_manifest(tmp_path / "dist" / "manifest.json")
    assert manifest is not None
    records = manifest.by_cell()
    audio = records["emberaudio-any-conda"]
    assert (audio.name, audio.version) == ("emberaudio-2.0.1-pyh0_0.conda", "2.0.1")
    assert records["ember-cpu-linux-x86_64-cp311-conda"].version == "1.7.0"
    # A noarch package's record names every Python its tests passed with.
    assert audio.tests is not None and audio.tests["pythons"] == ["3.9", "3.13"]


def test_a_recipe_renders_with_its_components_own_version(conda_repo, tmp_path, capsys):
    """emberaudio at 2.0.1 in a 1.7.0 release: its package is emberaudio-2.0.1, and it still asks
    for ember's own version (the preflight names the rendered package, so nothing is built)."""
    conda_repo.edit("release.yaml", "  emberaudio:\n    path: library/emberaudio\n",
                    "  emberaudio:\n    path: library/emberaudio\n    version: \"2.0.1\"\n")
    bare = _metadata_channel(tmp_path / "bare", [("python", "3.11.7", "linux-64")])
    state = tmp_path / "state"
    code = main(["--root", str(conda_repo.root), "conda", "build", "--variant", "cpu", "--component", "emberaudio",
                 "--python", "3.11", "--channel", bare, "--state", str(state)])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 4, err
    assert re.search(r"emberaudio-2\.0\.1-pyh[0-9a-f]{7}_0 \(", err), err
    assert "ember ==1.7.0" in err
    config = yaml.safe_load((state / "conda" / "variants" / "cpu.yaml").read_text())
    assert (config["emberaudio_version"], config["ember_version"]) == (["2.0.1"], ["1.7.0"])


def test_a_nightly_recipe_renders_with_each_components_development_version(conda_repo, tmp_path, capsys,
                                                                           monkeypatch):
    """Built for nightly, emberaudio (its own 2.0.1) is emberaudio-2.0.1.dev<day> and asks for
    ember's nightly, 1.7.0.dev<day>: the day the build stamps (SOURCE_DATE_EPOCH here, the commit's
    otherwise). The preflight names the rendered package, so nothing is built."""
    conda_repo.edit("release.yaml", "  emberaudio:\n    path: library/emberaudio\n",
                    "  emberaudio:\n    path: library/emberaudio\n    version: \"2.0.1\"\n")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", str(int(datetime.datetime(2026, 12, 1, 23, 0, tzinfo=datetime.UTC)
                                                    .timestamp())))
    bare = _metadata_channel(tmp_path / "bare", [("python", "3.11.7", "linux-64")])
    state = tmp_path / "state"
    code = main(["--root", str(conda_repo.root), "conda", "build", "--variant", "cpu", "--component", "emberaudio",
                 "--python", "3.11", "--channel", bare, "--state", str(state), "--publish-channel", "nightly"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 4, err
    assert re.search(r"emberaudio-2\.0\.1\.dev20261201-pyh[0-9a-f]{7}_0 \(", err), err
    assert "ember ==1.7.0.dev20261201" in err
    config = yaml.safe_load((state / "conda" / "variants" / "cpu.yaml").read_text())
    assert (config["emberaudio_version"], config["ember_version"]) == (["2.0.1.dev20261201"], ["1.7.0.dev20261201"])


def test_a_noarch_package_is_tested_with_the_oldest_and_the_newest_python(repo, spec_copy):
    from shipyard.conda.build import PackageOutcome
    from shipyard.conda.variant_packages import pythons_to_test

    spec = load_spec(repo)
    cells = {c.id: c for c in expand(spec.release)}

    def package(cell_id: str) -> PackageOutcome:
        return PackageOutcome("x", "1", "0", "noarch", "built", 0.0, Path("x.conda"), cells[cell_id], "k")

    audio = package("emberaudio-any-conda")
    assert spec.release.pythons == ("3.9", "3.10", "3.11", "3.12", "3.13")
    assert pythons_to_test(spec, audio, spec.release.pythons) == ["3.9", "3.13"]
    assert pythons_to_test(spec, audio, ("3.12", "3.10", "3.11")) == ["3.10", "3.12"]  # the run's Pythons, in order
    assert pythons_to_test(spec, audio, ("3.11",)) == ["3.11"]  # one Python: one run
    assert pythons_to_test(spec, package("ember-cpu-linux-x86_64-cp312-conda"), spec.release.pythons) == ["3.12"]
    assert pythons_to_test(spec, package("libember-cpu-linux-x86_64-conda"), spec.release.pythons) == []
    # The oldest Python the component admits, not the release's.
    spec_copy.edit("release.yaml", "    import_name: emberaudio\n",
                   "    import_name: emberaudio\n    requires_python: \">=3.11\"\n")
    narrowed = load_spec(spec_copy.root)
    assert pythons_to_test(narrowed, audio, narrowed.release.pythons) == ["3.11", "3.13"]


def test_a_conda_component_whose_version_only_its_build_knows_must_state_it(conda_repo, tmp_path, capsys):
    (conda_repo.root / "library" / "emberaudio" / "pyproject.toml").write_text(
        '[project]\nname = "emberaudio"\ndynamic = ["version"]\n')
    code = main(["--root", str(conda_repo.root), "conda", "build", "--variant", "cpu", "--component", "emberaudio",
                 "--channel", "file:///nonexistent", "--state", str(tmp_path / "state")])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2, err
    assert (f"{conda_repo.root / 'release.yaml'}: components.emberaudio.version: its project declares no version "
            f"that can be read without building it") in err
    assert "Traceback" not in err
