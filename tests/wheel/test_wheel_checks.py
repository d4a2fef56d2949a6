"""Release rules on wheels made here in a few milliseconds: vendored libraries, console scripts and the
size budget."""

from __future__ import annotations

import zipfile
from pathlib import Path

import yaml

from shipyard.release.matrix import ANY, Cell
from shipyard.release.spec import Release
from shipyard.wheel import checks


def _wheel(folder: Path, name: str, members: dict[str, str]) -> Path:
    path = folder / name
    with zipfile.ZipFile(path, "w") as zf:
        for member, text in members.items():
            zf.writestr(member, text)
    return path


def test_a_wheel_vendors_exactly_the_declared_libraries(tmp_path):
    wheel = _wheel(tmp_path, "fixcext-0.3.0+cpu-cp311-cp311-manylinux_2_31_x86_64.whl", {
        "fixcext/__init__.py": "", "fixcext.libs/libpng16-0a0c6ccf.so.16.39.0": "",
        "fixcext.libs/libz-4a1c2b3d.so.1.2.13": ""})
    assert checks.vendored_libraries(wheel) == {"fixcext.libs/libpng16-0a0c6ccf.so.16.39.0": "libpng16",
                                                "fixcext.libs/libz-4a1c2b3d.so.1.2.13": "libz"}
    assert checks.check_vendored_libraries(wheel, ("libpng", "libz"), component="fixcext") == []
    failures = [str(f) for f in checks.check_vendored_libraries(wheel, ("libpng", "libjpeg"), component="fixcext")]
    assert failures == [
        f"{wheel.name}: vendored libraries: vendors libz (fixcext.libs/libz-4a1c2b3d.so.1.2.13), which release.yaml "
        f"does not declare; add it to components.fixcext.vendored_libraries or stop linking it",
        f"{wheel.name}: vendored libraries: does not vendor libjpeg, which components.fixcext.vendored_libraries "
        f"declares; link it, or remove it from release.yaml"]
    # The CUDA runtime of a CUDA variant's kernels is allowed without a declaration; 'libpng'
    # never stands for another library that merely starts with the same letters.
    cuda = _wheel(tmp_path, "fixcuda-0.3.0+cu118-cp311-cp311-manylinux_2_31_x86_64.whl", {
        "fixcuda.libs/libcudart-d0da41ae.so.11.0": "", "fixcuda.libs/libpng16-0a0c6ccf.so.16": "",
        "fixcuda.libs/libpngx-12345678.so.1": ""})
    [failure] = checks.check_vendored_libraries(cuda, ("libpng",), component="fixcuda", implied=("libcudart",))
    assert "vendors libpngx" in str(failure)


def test_a_wheel_installs_exactly_the_declared_console_scripts(tmp_path):
    wheel = _wheel(tmp_path, "emberelastic-1.7.0-py3-none-any.whl", {
        "emberelastic-1.7.0.dist-info/entry_points.txt":
            "[console_scripts]\nember-run = emberelastic.run:main\nEmber-Debug = emberelastic.debug:main\n"})
    assert checks.console_scripts(wheel) == {"ember-run", "Ember-Debug"}
    assert checks.check_console_scripts(wheel, ("ember-run", "Ember-Debug"), component="emberelastic") == []
    failures = [str(f) for f in checks.check_console_scripts(wheel, ("ember-run", "ember-agent"),
                                                             component="emberelastic")]
    assert failures == [
        f"{wheel.name}: console scripts: installs Ember-Debug, which components.emberelastic.console_scripts does "
        f"not declare; declare it in release.yaml or drop it from [project.scripts]",
        f"{wheel.name}: console scripts: does not install ember-agent, which components.emberelastic.console_scripts "
        f"declares; add it to [project.scripts] or remove it from release.yaml"]
    bare = _wheel(tmp_path, "bare-1.0-py3-none-any.whl", {"bare/__init__.py": ""})
    assert checks.check_console_scripts(bare, (), component="bare") == []


def _release(budget: str) -> Release:
    return Release.model_validate(yaml.safe_load(f"""
schema_version: 1
release: {{name: sized, version: 1.0.0{budget}}}
components:
  sized: {{path: sized, kind: python-pure, import_name: sized, package_types: [wheel]}}
variants:
  cpu: {{tag: cpu}}
platforms:
  linux-x86_64: {{}}
pythons: ["3.12"]
"""))


def test_a_release_without_a_size_budget_checks_no_wheel_size_and_says_so_once(tmp_path):
    wheel = _wheel(tmp_path, "sized-1.0-py3-none-any.whl", {"sized/big.bin": "x" * (2 * 1024 * 1024)})
    cell = Cell("sized", "cpu", "cpu", ANY, None, "wheel", variants=("cpu",), variant_tags=("cpu",),
                platforms=("linux-x86_64",))
    unbudgeted = _release("")
    assert unbudgeted.release.wheel_size_budget_mb is None
    variant, component = unbudgeted.variants["cpu"], unbudgeted.components["sized"]
    assert checks.check_cell_wheel(wheel, unbudgeted, cell, component, variant, None) == []  # type: ignore[arg-type]
    assert checks.size_budget_note(unbudgeted, variant) == (
        "wheel sizes of variant cpu are not checked: release.yaml sets no wheel_size_budget_mb (add one under "
        "release: or under the variant to check them)")
    # With a budget, the same wheel fails it, and nothing is said about skipping.
    budgeted = _release(", wheel_size_budget_mb: 1")
    assert checks.size_budget_note(budgeted, budgeted.variants["cpu"]) is None
    [failure] = checks.check_cell_wheel(wheel, budgeted, cell, component, budgeted.variants["cpu"], None)  # type: ignore[arg-type]
    assert "size budget" in str(failure) and "over the budget of 1 MiB" in str(failure)
