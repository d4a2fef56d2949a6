"""The sdist kind (issue #53, item 3): a component's sdist is built by its PEP 517 backend, checked
(twine check; every source file in it, a missing one named), its wheels built from it unpacked, its
SBOM beside it verified, and it reaches pip through a pypi target (pip builds it: --no-binary).

The builds here run this test's own Python as the build environment (it holds setuptools): a tiny C
extension, tests/fixtures/sdist_cext, whose header only MANIFEST.in brings into the sdist."""

from __future__ import annotations

import hashlib
import io
import json
import secrets
import shutil
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest
from support.publish_project import PublishProject
from support.publish_servers import pip_installed_sha, pypi_server
from support.synthetic_release import features, record, write_manifest

from shipyard.errors import BuildError
from shipyard.host.toolchains.discover import discover
from shipyard.plumbing.hashing import sha256_of
from shipyard.release.kinds import KINDS, SDIST, kind_of
from shipyard.release.matrix import expand, select
from shipyard.release.spec import Release
from shipyard.supply.sbom import read_sdist_sbom, sdist_sbom
from shipyard.wheel.build_env import BuildEnv
from shipyard.wheel.pep517 import build_wheel
from shipyard.wheel.sdist import build_sdist, check_sdist, unpack_sdist

FIXTURE = Path(__file__).parent.parent / "fixtures" / "sdist_cext"


def _env() -> BuildEnv:
    interpreter = next(i for i in discover().interpreters
                       if i.version == f"{sys.version_info.major}.{sys.version_info.minor}")
    return BuildEnv(interpreter, Path(sys.prefix), (), "this-python")


def _project(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURE, tmp_path / "sdcext"))


# --- the kind ------------------------------------------------------------------------------------

def test_the_sdist_kind_is_one_cell_per_component_and_goes_to_pypi_and_devpi_targets() -> None:
    assert KINDS["sdist"] is SDIST and kind_of("sdist") is SDIST
    assert SDIST.once_per_component and SDIST.publish_targets == ("devpi", "pypi") and not SDIST.on_nightly
    assert SDIST.contents_check == "source-sbom" and SDIST.ci_lanes == ()
    release = Release.model_validate({
        "schema_version": 1, "release": {"name": "r", "version": "1.0.0"},
        "components": {"native": {"name": "native", "path": "n", "kind": "python-native", "import_name": "n",
                                  "package_types": ["wheel", "sdist"]},
                       "pure": {"name": "pure", "path": "p", "kind": "python-pure", "import_name": "p",
                                "package_types": ["wheel", "sdist"]}},
        "variants": {"cpu": {"name": "cpu", "tag": "cpu"}, "cuda11": {"name": "cuda11", "tag": "cu118", "cuda": "11.8",
                                                                       "arch_list": "8.0"}},
        "platforms": {"linux-x86_64": {"name": "linux-x86_64"}}, "pythons": ["3.11", "3.12"]})
    sdists = select(expand(release), package_type="sdist")
    # One for every variant, platform and Python: native or pure, each component's sources make one.
    assert [c.id for c in sdists] == ["native-any-sdist", "pure-any-sdist"]
    assert sdists[0].variants == ("cpu", "cuda11") and sdists[0].python is None
    assert len(select(expand(release), package_type="wheel", component="native")) == 4


# --- build and check -----------------------------------------------------------------------------

def test_the_sdist_is_built_twine_checked_and_the_wheel_builds_from_it_unpacked(tmp_path: Path) -> None:
    project, env = _project(tmp_path), _env()
    sdist = build_sdist(project, env, tmp_path / "out", epoch=1603800000)
    assert sdist.name == "sdcext-1.7.0.tar.gz"
    contents = check_sdist(sdist, project)
    assert "src/sdcext/sdcext.h" in contents.files and (contents.name, contents.version) == ("sdcext", "1.7.0")
    unpacked = unpack_sdist(sdist, tmp_path / "unpacked")
    assert unpacked.name == "sdcext-1.7.0" and (unpacked / "PKG-INFO").is_file()
    wheel = build_wheel(unpacked, env, tmp_path / "wheels", cmake_defines={}, extra_env={}, build_dir=None, jobs=1)
    with zipfile.ZipFile(wheel) as zf:
        assert any(n.startswith("sdcext/_native") and n.endswith(".so") for n in zf.namelist())
    # The SBOM beside it lists each of its files, with its sha256, as verify reads it.
    sbom = tmp_path / "sdcext.cdx.json"
    sbom.write_bytes(sdist_sbom(contents.files, name="sdcext", version="1.7.0", epoch=1603800000))
    listed = read_sdist_sbom(sbom).built
    assert set(listed) == set(contents.files) and "PKG-INFO" in listed


def test_an_sdist_whose_manifest_leaves_out_a_header_fails_naming_it(tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "MANIFEST.in").write_text("")  # the header no longer goes into the sdist
    sdist = build_sdist(project, _env(), tmp_path / "out", epoch=1603800000)
    with pytest.raises(BuildError) as caught:
        check_sdist(sdist, project)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("sdcext-1.7.0.tar.gz lacks 1 source file(s) of ")
    assert ": src/sdcext/sdcext.h; add them to the sdist (MANIFEST.in" in message


def test_a_tarball_without_pkg_info_is_no_sdist(tmp_path: Path) -> None:
    (tmp_path / "x-1.0").mkdir()
    (tmp_path / "x-1.0" / "setup.py").write_text("")
    fake = tmp_path / "x-1.0.tar.gz"
    with tarfile.open(fake, "w:gz") as tar:
        tar.add(tmp_path / "x-1.0", arcname="x-1.0")
    with pytest.raises(BuildError, match="no PKG-INFO below its top folder"):
        check_sdist(fake, tmp_path / "x-1.0")


# --- verify --------------------------------------------------------------------------------------

def _tiny_sdist(path: Path, files: dict[str, bytes]) -> Path:
    """An sdist as a backend writes one: one top folder, name-version/, with PKG-INFO."""
    path.parent.mkdir(parents=True, exist_ok=True)
    top = path.name.removesuffix(".tar.gz")
    with tarfile.open(path, "w:gz") as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mtime = len(data), 1603800000
            tar.addfile(info, io.BytesIO(data))
    return path


def _signed_sdist_dist(root: Path) -> tuple[Path, Path, Path]:
    """A release root with a signing key and a dist/ holding one sdist, its SBOM beside it, recorded
    and signed (`shipyard attest`) as `shipyard build` leaves them: (dist, sdist, SBOM)."""
    from shipyard.cli import main

    assert main(["--root", str(root), "keygen"]) == 0
    dist = root / "dist"
    files = {"PKG-INFO": b"Metadata-Version: 2.1\nName: ember\nVersion: 1.7.0\n",
             "pyproject.toml": b"[project]\nname = 'ember'\nversion = '1.7.0'\n",
             "src/ember/__init__.py": b"VERSION = '1.7.0'\n"}
    sdist = _tiny_sdist(dist / "sdist" / "ember-1.7.0.tar.gz", files)
    sbom = dist / "sboms" / f"{sdist.name}.cdx.json"
    sbom.parent.mkdir(parents=True)
    sbom.write_bytes(sdist_sbom(files, name="ember", version="1.7.0", epoch=1603800000))
    made = record(dist, sdist, component="ember", package_type="sdist", variant="any", tag="any", tests=None)
    write_manifest(dist, [made.model_copy(update={"build": {"sbom": "sboms/ember-1.7.0.tar.gz.cdx.json"}})])
    assert main(["--root", str(root), "attest", "--dist", str(dist)]) == 0
    return dist, sdist, sbom


def test_verify_passes_a_signed_sdist_and_names_it_when_its_bytes_or_its_sbom_change(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from support.release_copy import SpecCopy

    from shipyard.cli import main
    from shipyard.errors import VERIFY_FAILED

    monkeypatch.delenv("SHIPYARD_SIGNING_KEY", raising=False)
    root = SpecCopy(tmp_path).root
    dist, sdist, sbom = _signed_sdist_dist(root)
    capsys.readouterr()
    assert main(["--root", str(root), "verify", str(dist)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "sboms/ember-1.7.0.tar.gz.cdx.json lists each of its 3 files (sha256)" in out
    assert "1 of 1 artifacts verified" in out
    # The SBOM beside it disagrees (a file's sha256 in it is not the file's): named, with the file in the sdist.
    good_sbom = sbom.read_bytes()
    listed = hashlib.sha256(b"VERSION = '1.7.0'\n").hexdigest()
    sbom.write_bytes(good_sbom.replace(listed.encode(), b"0" * 64))
    assert main(["--root", str(root), "verify", str(dist)]) == VERIFY_FAILED
    said = capsys.readouterr().err
    assert ("ember-1.7.0.tar.gz: sbom: FAILED: sboms/ember-1.7.0.tar.gz.cdx.json: sha256 differs: "
            "src/ember/__init__.py") in said, said
    sbom.write_bytes(good_sbom)
    # The sdist's bytes change after signing (one file more in it): its signed digest no longer holds.
    _tiny_sdist(sdist, {"PKG-INFO": b"Metadata-Version: 2.1\nName: ember\nVersion: 1.7.0\n",
                        "pyproject.toml": b"[project]\nname = 'ember'\nversion = '1.7.0'\n",
                        "src/ember/__init__.py": b"VERSION = '1.7.0'\n", "src/ember/extra.py": b"x = 1\n"})
    assert main(["--root", str(root), "verify", str(dist)]) == VERIFY_FAILED
    said = " ".join(capsys.readouterr().err.split())
    assert "ember-1.7.0.tar.gz: subject: FAILED: sha256 " in said and "the artifact changed after signing" in said
    assert "ember-1.7.0.tar.gz: sbom: FAILED: sboms/ember-1.7.0.tar.gz.cdx.json: not in the SBOM: src/ember/extra.py" \
        in said, said


# --- publish -------------------------------------------------------------------------------------

def test_the_sdist_reaches_pypiserver_on_test_and_pip_builds_it_from_source_but_nightly_holds_it_back(
        tmp_path: Path) -> None:
    """A nightly's wheels carry its development version, an sdist its project's own: beside
    1.7.0.dev20261206 wheels, an sdist of 1.7.0 is the newer version and pip would build it instead
    of installing the nightly. Nightly holds the sdist back and says so in one line; test sends it."""
    start = time.monotonic()
    with pypi_server(tmp_path / "server") as server:
        user, password = "u" + secrets.token_hex(4), secrets.token_urlsafe(18)
        server.add_user(user, password)
        project = PublishProject.laid_out(
            tmp_path, {"    kind: devpi\n    url: http://127.0.0.1:8081/\n":
                       f"    kind: pypi\n    url: {server.url}\n    index_url: {server.simple}\n"
                       "    channels: [nightly, test]\n"},
            {"SHIPYARD_PYPI_USERNAME": user, "SHIPYARD_PYPI_PASSWORD": password}, tries=3)
        sdist = build_sdist(_project(tmp_path), _env(), project.dist / "sdist", epoch=1603800000)
        records = [record(project.dist, sdist, component="sdcext", package_type="sdist", variant="any", tag="any",
                          tests=features())]
        write_manifest(project.dist, records, version="1.7.0.dev20261206")  # built for nightly
        code, out = project.run("publish", "--channel", "nightly", "--target", "pypi")
        assert code == 0, out
        said = [line for line in out.splitlines() if "held back" in line]
        assert said == ["held back from nightly: sdcext-1.7.0.tar.gz (nightly publishes no sdists: an sdist carries "
                        "its project's own version, not the nightly's development version; test and release publish "
                        "them)"], out
        assert "0 files published" in out and sdist.name not in server.files()
        write_manifest(project.dist, records)  # built for test: the plain version
        code, out = project.run("publish", "--channel", "test", "--target", "pypi")
        assert code == 0, out
        assert "held back" not in out and server.files()[sdist.name] == sha256_of(sdist)
        # --no-binary: pip builds the wheel from this sdist (with this Python's setuptools).
        assert pip_installed_sha(server.simple, "sdcext==1.7.0", tmp_path / "pip", "--no-binary", ":all:",
                                 "--no-build-isolation") == sha256_of(sdist)
    print(f"sdist publish and pip install from source: {time.monotonic() - start:.1f} s")


# --- shipyard build ------------------------------------------------------------------------------

RELEASE_YAML = """schema_version: 1
release: {name: sdr, version: 1.7.0}
components:
  sdcext: {path: library/sdcext, kind: python-native, import_name: sdcext, package_types: [wheel, sdist]}
variants: {cpu: {tag: cpu}}
platforms:
  linux-x86_64: {os: linux, arch: x86_64, wheel_platform_tag: manylinux_2_31_x86_64, github_runner: ubuntu-22.04}
pythons: ["%s"]
"""


@pytest.mark.slow
def test_shipyard_build_records_the_sdist_and_fails_when_a_header_leaves_it(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from shipyard.cli import main

    root = tmp_path / "release"
    shutil.copytree(FIXTURE, root / "library" / "sdcext")
    (root / "release.yaml").write_text(RELEASE_YAML % f"{sys.version_info.major}.{sys.version_info.minor}")
    (root / "feature_status.yaml").write_text(
        "schema_version: 1\nfeatures:\n  - {id: sdcext.answer, title: the answer, component: sdcext, since: 1.7.0,\n"
        "     status: beta, tests: [library/sdcext/tests]}\n")
    assert main(["--root", str(root), "build", "--variant", "cpu", "--no-tests"]) == 0
    # The summary names the sdist in a row of its own, before the wheels built from it.
    shown = capsys.readouterr().out
    rows = [line for line in shown.splitlines() if "sdcext-" in line]
    assert "sdcext-any-sdist" in rows[0] and "built" in rows[0] and "its wheels build from it" in rows[0], shown
    assert len(rows) == 2 and "-wheel" in rows[1], shown
    manifest = json.loads((root / "dist" / "manifest.json").read_text())
    [sdist] = [a for a in manifest["artifacts"] if a["package_type"] == "sdist"]
    assert (sdist["cell_id"], sdist["path"]) == ("sdcext-any-sdist", "sdist/sdcext-1.7.0.tar.gz")
    assert sdist["proven_by"] == [a["cell_id"] for a in manifest["artifacts"] if a["package_type"] == "wheel"]
    assert (root / "dist" / sdist["build"]["sbom"]).is_file()
    assert not list((root / "library" / "sdcext").rglob("*.egg-info"))  # built in a copy
    capsys.readouterr()
    # The sources change (the header leaves MANIFEST.in): the next build's sdist lacks it, and says so.
    (root / "library" / "sdcext" / "MANIFEST.in").write_text("")
    assert main(["--root", str(root), "build", "--variant", "cpu", "--no-tests"]) == 5
    said = " ".join(capsys.readouterr().err.split())
    assert "failed sdcext-any-sdist: sdcext-1.7.0.tar.gz lacks 1 source file(s) of" in said, said
    assert "sdist: sdcext-1.7.0.tar.gz lacks 1 source file(s) of" in said and ": src/sdcext/sdcext.h; add them" in said
    # release.yaml overrides the project's version: the wheels would be 1.7.1, the sdist 1.7.0. Refused.
    (root / "library" / "sdcext" / "MANIFEST.in").write_text("include src/sdcext/sdcext.h\n")
    (root / "release.yaml").write_text((root / "release.yaml").read_text().replace(
        "import_name: sdcext,", "import_name: sdcext, version: 1.7.1,"))
    assert main(["--root", str(root), "build", "--variant", "cpu", "--no-tests"]) == 5
    said = " ".join(capsys.readouterr().err.split())
    assert ("failed sdcext-any-sdist: sdcext-1.7.0.tar.gz: version 1.7.0 is its project's own, but release.yaml's "
            "components.sdcext.version 1.7.1 is its wheels'; set the version in the project") in said, said
