"""A CUDA toolkit on a Windows runner (#51 item 1): NVIDIA's installer puts `bin/nvcc.exe` under
CUDA_HOME (the workflow's CUDA step sets it). Checked here with a stand-in nvcc.exe (a shell script
printing nvcc's version line) and `sys.platform` set to win32: no Windows runner runs here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from shipyard.host.toolchains.cuda_recipes import toolkit_program
from shipyard.host.toolchains.discover import find_cuda_toolkits


def _toolkit(home: Path, name: str) -> Path:
    (home / "bin").mkdir(parents=True)
    nvcc = home / "bin" / name
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 11.8, V11.8.89'\n")
    nvcc.chmod(0o755)
    return nvcc


@pytest.mark.parametrize(("platform", "program"), [("win32", "nvcc.exe"), ("linux", "nvcc")])
def test_cuda_home_is_found_by_the_nvcc_of_its_platform(tmp_path, monkeypatch, platform, program):
    """Fails on the code before for win32: it looked for bin/nvcc only, so a Windows CUDA_HOME held
    no toolkit and every Windows CUDA cell was `missing`."""
    home = tmp_path / "CUDA" / "v11.8"
    nvcc = _toolkit(home, program)
    monkeypatch.setattr(sys, "platform", platform)
    monkeypatch.setenv("CUDA_HOME", str(home))
    monkeypatch.setenv("SHIPYARD_CACHE", str(tmp_path / "cache"))  # no installed toolkits
    found = [t for t in find_cuda_toolkits() if t.root == home]
    assert [(t.version, t.nvcc) for t in found] == [("11.8", nvcc)]
    assert toolkit_program(home / "bin", "cuobjdump").name == ("cuobjdump.exe" if platform == "win32" else "cuobjdump")


def test_a_python_the_windows_launcher_knows_is_found(tmp_path, monkeypatch):
    """actions/setup-python on Windows: python.exe in a folder per version, registered with the `py`
    launcher, no python3.X on PATH. A stand-in `py` knows 3.12 (this machine's pyenv build) and no
    other. Fails on the code before: no Python was found, and `shipyard ci pythons` installed them all."""
    from shipyard.host.toolchains.discover import find_interpreters

    real = sorted(Path.home().glob(".pyenv/versions/3.12.*/bin/python3"))
    if not real:
        pytest.skip("this machine has no pyenv build of Python 3.12 to stand behind the launcher")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "py.EXE"  # shutil.which under win32 looks for a PATHEXT ending
    launcher.write_text(f'#!/bin/sh\n[ "$1" = "-3.12" ] || exit 103\nshift\nexec {real[-1]} "$@"\n')
    launcher.chmod(0o755)
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("PATHEXT", ".EXE")
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    found = find_interpreters()
    assert [(i.version, i.path) for i in found] == [("3.12", real[-1])]
