"""`shipyard build [--platform NAME]`: a release may list this host's os and arch twice, under two
names and two glibc promises (`linux-x86_64` for manylinux2014, `linux-x86_64-glibc231` for
manylinux_2_31); both build here by default, and `--platform` narrows a build to one (as each CI job
does). No builds: the cells a build would take."""

from __future__ import annotations

from pathlib import Path

import pytest

from shipyard.cli import main
from shipyard.host.toolchains.discover import discover, this_platform
from shipyard.release.validate import load_spec
from shipyard.wheel.build_request import BuildRequest
from shipyard.wheel.cell_selection import selected_cells

PLATFORMS = """platforms:
  linux-x86_64:
    wheel_platform_tag: manylinux2014_x86_64
  linux-x86_64-glibc231:
    os: linux
    arch: x86_64
    wheel_platform_tag: manylinux_2_31_x86_64
    github_runner: ubuntu-22.04
  macos-arm64: {}
"""


@pytest.fixture
def release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Path:
    monkeypatch.setenv("SHIPYARD_CACHE", str(tmp_path / "cache"))
    project = tmp_path / "release" / "twice"
    (project / "src" / "twice").mkdir(parents=True)
    (project / "src" / "twice" / "__init__.py").write_text("")
    (project / "src" / "twice" / "_speed.c").write_text("")
    (project / "pyproject.toml").write_text('[project]\nname = "twice"\nversion = "1.0"\nrequires-python = ">=3.9"\n')
    root = tmp_path / "release"
    assert main(["init", "--root", str(root), str(project)]) == 0, capsys.readouterr().err
    text = (root / "release.yaml").read_text()
    start = text.index("platforms:")
    end = text.index("pythons:")
    (root / "release.yaml").write_text(text[:start] + PLATFORMS + text[end:])
    assert main(["validate", "--root", str(root)]) == 0, capsys.readouterr().err
    return root


@pytest.mark.skipif(this_platform() != "linux-x86_64", reason="the release's two platforms are linux x86_64")
def test_build_takes_every_platform_of_this_host_or_the_one_it_is_asked_for(release: Path) -> None:
    spec = load_spec(release)
    by_default = selected_cells(spec, BuildRequest(variant="cpu"), discover())[0]
    assert {c.platform for c in by_default} == {"linux-x86_64", "linux-x86_64-glibc231"}
    request = BuildRequest(variant="cpu", platforms=("linux-x86_64-glibc231",))
    cells = selected_cells(spec, request, discover())[0]
    assert cells and {c.platform for c in cells} == {"linux-x86_64-glibc231"}
    assert {c.python for c in cells} == {c.python for c in by_default}


@pytest.mark.parametrize(("name", "says"), [
    ("linux-aarch64", "--platform linux-aarch64: not a platform or mobile target of release.yaml; use one of "
                      "linux-x86_64, linux-x86_64-glibc231, macos-arm64; did you mean 'linux-x86_64'?"),
    ("macos-arm64", f"--platform macos-arm64: its cells build on a macos-arm64 host, this is {this_platform()}; "
                    f"build them there"),
])
def test_a_platform_that_cannot_build_here_is_one_line(release: Path, name: str, says: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    if name == this_platform():
        pytest.skip("this host is that platform")
    capsys.readouterr()
    assert main(["--root", str(release), "build", "--variant", "cpu", "--platform", name,
                 "--dist", str(release / "dist")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {says}"]
    assert not (release / "dist").exists()
