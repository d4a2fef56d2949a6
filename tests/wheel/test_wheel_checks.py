"""Release rules on wheels made here in a few milliseconds: vendored libraries and console scripts."""

from __future__ import annotations

import zipfile
from pathlib import Path

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
