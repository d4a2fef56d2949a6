"""A narrowed conda build (`--component`) builds what its selection depends on within the release,
unless a channel its tests are served already holds it for the variant (an earlier run's output,
or the native packages a CI pure lane merged into dist/conda): which components it adds, and what
it says. Channels are folders with repodata.json as conda/channel.py indexes them. No builds."""

from __future__ import annotations

import json
import re
from pathlib import Path

from shipyard.cli import main
from shipyard.conda.build import BUILD_ROOT_ENV
from shipyard.conda.dependency_packages import dependency_components
from shipyard.release.project_declaration import declared_version
from shipyard.release.validate import load_spec


def _channel(folder: Path, *builds: tuple[str, str, str], version: str = "1.7.0") -> Path:
    """A channel folder whose index lists (name, build, subdir) packages of `version`."""
    for subdir in ("linux-64", "noarch"):
        packages = {f"{name}-{version}-{build}.conda": {"name": name, "version": version, "build": build,
                                                    "build_number": 0, "depends": [], "subdir": subdir,
                                                    **({"noarch": "python"} if subdir == "noarch" else {})}
                    for name, build, where in builds if where == subdir}
        (folder / subdir).mkdir(parents=True, exist_ok=True)
        (folder / subdir / "repodata.json").write_text(json.dumps(
            {"info": {"subdir": subdir}, "packages": {}, "packages.conda": packages, "repodata_version": 1}))
    return folder


def test_a_narrowed_conda_build_adds_what_its_selection_needs_unless_a_channel_holds_it(repo, tmp_path):
    spec = load_spec(repo)
    cpu = spec.release.variants["cpu"]
    output, dist = tmp_path / "output", tmp_path / "dist" / "conda"

    def added(selected, pythons=("3.11",)) -> tuple[dict[str, str], list[str]]:
        said: list[str] = []
        return dependency_components(spec, selected, cpu, pythons, [output, dist], "linux-64", said.append), said

    # A clean checkout: nothing holds ember, which emberaudio's and emberelastic's tests install.
    assert added(["emberaudio", "emberelastic"]) == (
        {"ember": "emberaudio"}, ["also building ember: emberaudio depends on it"])
    assert added(["emberaudio", "ember"]) == ({}, [])
    # The CI pure lane: the native lane's fragments are merged into dist/conda first; nothing is rebuilt.
    _channel(dist, ("ember", "py311_cpu_h1a2b3c4_0", "linux-64"), ("libember", "cpu_h1a2b3c4_0", "linux-64"),
             ("ember", "py312_cu118_h1a2b3c4_0", "linux-64"))
    assert added(["emberaudio"]) == ({}, [f"ember: taken from {dist} (emberaudio depends on it)"])
    # A Python the channel has no ember of for this variant (3.12 is there for cu118 only): built.
    assert added(["emberaudio"], ("3.11", "3.12")) == (
        {"ember": "emberaudio"}, ["also building ember: emberaudio depends on it"])
    # The tests' solve takes a name only from the first channel that has it: the run's output
    # folder, served before dist/conda, holds only a 3.12 ember, so 3.11's must be built.
    _channel(output, ("ember", "py312_cpu_h5d6e7f8_0", "linux-64"))
    assert added(["emberaudio"])[0] == {"ember": "emberaudio"}
    assert added(["emberaudio"], ("3.12",)) == ({}, [f"ember: taken from {output} (emberaudio depends on it)"])


def test_conda_build_of_a_pure_component_plans_the_package_it_depends_on(spec_copy, repo, tmp_path, capsys,
                                                                         monkeypatch):
    """`shipyard conda build --component emberaudio` renders and solves ember (with its core and the
    mutex) too, so that emberaudio's tests can install it; the preflight stops before any build here
    (a channel with python alone), which is all this needs to see."""
    for component in ("ember", "embervision", "emberaudio", "emberelastic"):  # what the recipes render with
        needs = 'dependencies = ["ember==1.7.0", "numpy"]\n' if component == "emberaudio" else ""
        (spec_copy.root / "library" / component / "pyproject.toml").write_text(
            f'[project]\nname = "{component}"\nversion = "{declared_version(repo / "library" / component)}"\n{needs}')
    monkeypatch.setenv(BUILD_ROOT_ENV, str(tmp_path / "roots"))  # never the machine's shared build root
    bare = _channel(tmp_path / "bare", ("python", "h0_0", "linux-64"), version="3.11.7")
    args = ["--root", str(spec_copy.root), "conda", "build", "--variant", "cpu", "--component", "emberaudio",
            "--python", "3.11", "--channel", str(bare), "--state", str(tmp_path / "state")]
    code = main([*args, "--dist", str(tmp_path / "dist")])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 4, err
    assert "also building ember: emberaudio depends on it" in err
    assert "conda cpu: preflight, solving 4 packages' requirements" in err, err  # mutex, libember, ember, emberaudio
    assert re.search(r"ember-1\.7\.0-py311_cpu_h[0-9a-f]{7}_0 \(", err), err
