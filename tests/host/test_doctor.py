"""`shipyard doctor`: ready cells name their tools; missing ones name the exact fix."""

from __future__ import annotations

import pytest

from shipyard.cli import main
from shipyard.errors import HOST_NOT_READY
from shipyard.host.doctor import diagnose
from shipyard.host.toolchains.discover import discover
from shipyard.release.validate import load_spec


def test_cpu_cells_of_this_host_are_ready_once_the_bullseye_sysroot_is_installed(repo, glibc_sysroots):
    rows = diagnose(load_spec(repo).release, discover(), "cpu")
    linux = [r for r in rows if r.cell.platform == "linux-x86_64"]
    assert len(linux) == 22  # 10 wheels; 12 conda packages (2 cores, 2 x 5 Pythons)
    assert all(r.ready for r in linux), [r.detail for r in linux if not r.ready]
    assert "python 3.11" in next(r.detail for r in linux if r.cell.python == "3.11" and r.cell.package_type == "wheel")
    # A conda package's Python comes from its channels: only the compiler is this host's.
    assert next(r.detail for r in linux if r.cell.id == "ember-cpu-linux-x86_64-cp311-conda").startswith("g++ ")
    # The pure components are one cell each, built with the oldest of the release's Pythons.
    pure = {r.cell.id: r for r in rows if r.cell.is_pure}
    assert sorted(pure) == ["ember-variant-provider-any-wheel", "emberaudio-any-conda", "emberaudio-any-wheel",
                            "emberelastic-any-conda", "emberelastic-any-wheel"]
    assert all(r.ready and r.detail.startswith("python 3.9.") for r in pure.values()), pure


def test_cuda10_2_says_no_toolkit_can_be_had_here(repo, capsys):
    # Not ready is the doctor's answer, in its status too (a script can ask before a build): the table still prints.
    assert main(["--root", str(repo), "doctor", "--variant", "cuda10.2"]) == HOST_NOT_READY
    out = " ".join(capsys.readouterr().out.split())
    # Only the pure wheels and noarch conda packages (one build for every variant) are ready.
    assert "5 of 27 cells ready" in out
    assert "no CUDA 10.2 toolkit, and none can be obtained on this machine" in out
    assert "CUDA_HOME=/usr/local/cuda-10.2" in out


def test_android_targets_name_the_ndk(repo, monkeypatch):
    monkeypatch.delenv("ANDROID_NDK_HOME", raising=False)
    discover.cache_clear()
    rows = diagnose(load_spec(repo).release, discover(), "cpu")
    android = [r for r in rows if r.cell.platform.startswith("android")]
    assert android and all(not r.ready and "ANDROID_NDK_HOME" in r.detail for r in android)
    discover.cache_clear()


@pytest.mark.slow
def test_toolchain_install_then_doctor_shows_cuda11_ready(repo, capsys):
    assert main(["--root", str(repo), "toolchain", "install", "cuda11"]) == 0
    discover.cache_clear()
    assert main(["--root", str(repo), "doctor", "--variant", "cuda11"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "27 of 27 cells ready" in out  # 13 wheels, 14 conda packages
    assert "nvcc 11.8 (shipyard cache)" in out and "host g++-11" in out
