"""Release rules on wheels made here in a few milliseconds: vendored libraries, console scripts, the
import name and the kind (pure or native) release.yaml declares, and the size budget."""

from __future__ import annotations

import zipfile
from pathlib import Path

import yaml
from support.minirelease import FIXTURE

from shipyard.host.toolchains.resolve import Toolchain
from shipyard.release.matrix import ANY, Cell, expand
from shipyard.release.spec import Release
from shipyard.release.validate import load_spec
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


def _cell_failures(wheel: Path, component: str) -> list[str]:
    """What the cell of the fixture release's `component` (its cp311 cell, or its one pure cell)
    fails on for `wheel`."""
    release = load_spec(FIXTURE).release
    chosen = release.components[component]
    cell = next(c for c in expand(release) if c.component == component and c.package_type == "wheel"
                and (c.is_pure or (c.variant == "cpu" and c.python == "3.11")))
    return [str(f) for f in checks.check_cell_wheel(wheel, release, cell, chosen, release.variants["cpu"],
                                                    Toolchain(None, None, None, None))]


def test_a_wheel_without_its_import_name_fails_its_cell_with_what_it_holds(tmp_path):
    name = "fixpure-0.3.0-py3-none-any.whl"
    scripts = {"fixpure-0.3.0.dist-info/entry_points.txt": "[console_scripts]\nfixpure-norm = fixpure.cli:main\n"}
    good = _wheel(tmp_path, name, {"fixpure/__init__.py": "", **scripts})
    assert _cell_failures(good, "fixpure") == []
    (tmp_path / "wrong").mkdir()
    wrong = _wheel(tmp_path / "wrong", name, {"fix_pure/__init__.py": "", "fixtools.py": "", **scripts})
    assert _cell_failures(wrong, "fixpure") == [
        f"{name}: components.fixpure.import_name: the wheel holds no fixpure; it holds fix_pure, fixtools; "
        f"set import_name: fix_pure"]
    # A module, an extension module, a namespace folder and a .data folder's purelib all import.
    assert checks.top_level_names(["solo.py", "fast.cpython-311-x86_64-linux-gnu.so", "win.pyd", "ns/sub/x.py",
                                   "p-1.0.data/purelib/inside/__init__.py", "p-1.0.data/scripts/tool",
                                   "p.libs/libz-12345678.so.1", "p-1.0.dist-info/METADATA"]) == {
        "solo", "fast", "win", "ns", "inside"}


def test_a_pure_component_whose_wheel_holds_an_extension_module_fails_in_one_line(tmp_path):
    # kind: python-pure on a C extension: one pure cell instead of one per Python, unless the cell fails.
    name = "fixpure-0.3.0-cp311-cp311-linux_x86_64.whl"
    native = _wheel(tmp_path, name, {"fixpure/__init__.py": "", "fixpure/_speedups.cpython-311-x86_64-linux-gnu.so": "",
                                     "fixpure-0.3.0.dist-info/entry_points.txt":
                                         "[console_scripts]\nfixpure-norm = fixpure.cli:main\n"})
    assert _cell_failures(native, "fixpure") == [
        f"{name}: components.fixpure.kind: python-pure, but the wheel holds extension module "
        f"fixpure/_speedups.cpython-311-x86_64-linux-gnu.so; set kind: python-native"]
    (tmp_path / "tagged").mkdir()
    tagged = _wheel(tmp_path / "tagged", "fixpure-0.3.0-py311-none-any.whl", {"fixpure/__init__.py": ""})
    assert checks.check_kind(tagged, "python-pure", component="fixpure")[0].detail == (
        "python-pure, but the wheel is tagged py311-none-any, not py3-none-any; set kind: python-native, or make "
        "the project build a pure wheel")


def test_a_native_component_whose_wheel_holds_no_extension_module_fails_in_one_line(tmp_path):
    name = "fixcext-0.3.0-py3-none-any.whl"
    pure = _wheel(tmp_path, name, {"fixcext/__init__.py": "", "fixcext.libs/libpng16-0a0c6ccf.so.16": ""})
    assert _cell_failures(pure, "fixcext") == [
        f"{name}: components.fixcext.kind: python-native, but the wheel holds no extension module (tagged "
        f"py3-none-any); set kind: python-pure"]
    (tmp_path / "native").mkdir()
    native = _wheel(tmp_path / "native", "fixcext-0.3.0+cpu-cp311-cp311-manylinux_2_31_x86_64.whl", {
        "fixcext/__init__.py": "", "fixcext/_fixcext.cpython-311-x86_64-linux-gnu.so": "",
        "fixcext.libs/libpng16-0a0c6ccf.so.16": ""})
    assert _cell_failures(native, "fixcext") == []

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
