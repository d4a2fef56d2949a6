"""The RPATH of ember's and embervision's binaries on macOS: dyld reads `$ORIGIN` literally, so an
extension linked with `$ORIGIN/lib` finds no libember there and delocate cannot place it. Each
project spells the binary's folder once (core/cmake/*Origin.cmake): `@loader_path` on macOS,
`$ORIGIN` elsewhere.

What can run here: CMake itself evaluates the module with APPLE set and unset (`cmake -P`); no
macOS link is possible on this machine (no Apple SDK or ld64), so the macOS binaries' load
commands are checked by delocate in the wheel-macos job only.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# project folder -> (its module, the variable it sets)
ORIGIN_MODULES = {
    REPO / "library" / "ember": (REPO / "library" / "ember" / "core" / "cmake" / "EmberOrigin.cmake", "EMBER_ORIGIN"),
    REPO / "library" / "embervision": (REPO / "library" / "embervision" / "core" / "cmake" /
                                       "EmbervisionOrigin.cmake", "EMBERVISION_ORIGIN"),
}
# CUDA never builds on macOS (release.yaml's exclusions): its runtime's RPATH stays Linux's.
LINUX_ONLY = {"EmberCuda.cmake", "EmbervisionCuda.cmake"}


@pytest.mark.parametrize("apple, expected", [(True, "@loader_path"), (False, "$ORIGIN")])
@pytest.mark.parametrize("project", sorted(ORIGIN_MODULES), ids=lambda p: p.name)
def test_the_origin_module_gives_the_loader_path_on_macos_and_origin_elsewhere(
        tmp_path: Path, project: Path, apple: bool, expected: str) -> None:
    cmake = shutil.which("cmake")
    assert cmake, "cmake is one of ci/bootstrap.sh's packages"
    module, variable = ORIGIN_MODULES[project]
    script = tmp_path / "print.cmake"
    script.write_text(f'include("{module}")\nmessage(STATUS "origin=${{{variable}}}")\n')
    done = subprocess.run([cmake, *(["-DAPPLE=1"] if apple else []), "-P", str(script)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"origin={expected}" in done.stdout + done.stderr, done.stdout + done.stderr


@pytest.mark.parametrize("project", sorted(ORIGIN_MODULES), ids=lambda p: p.name)
def test_no_rpath_of_a_macos_build_spells_origin_itself(project: Path) -> None:
    module, variable = ORIGIN_MODULES[project]
    for path in sorted([*project.rglob("CMakeLists.txt"), *project.rglob("*.cmake")]):
        if path == module or path.name in LINUX_ONLY:
            continue
        code = "\n".join(line.split("#", 1)[0] for line in path.read_text().splitlines())
        assert "$ORIGIN" not in code, f"{path}: an RPATH spells $ORIGIN, which dyld does not read; use ${{{variable}}}"
