"""The platform tag's glibc promise decides the compiler: release.yaml's manylinux_2_31 builds with
the bullseye sysroot's gcc, never this host's, and what cannot keep a promise says why and the fix."""

from __future__ import annotations

import shutil
import sys
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest

from shipyard.host.doctor import describe
from shipyard.host.toolchains.discover import Compiler, CudaToolkit, Interpreter, Inventory
from shipyard.host.toolchains.glibc import glibc_required, glibc_tuple, toolkit_glibc
from shipyard.host.toolchains.resolve import Missing, Toolchain, resolve
from shipyard.host.toolchains.sysroot import Sysroot
from shipyard.release.build_routes import recipe_for_glibc, sysroot_recipes
from shipyard.release.matrix import expand
from shipyard.release.spec import Platform
from shipyard.release.validate import load_spec

REPO = Path(__file__).resolve().parents[2]
BULLSEYE = Sysroot("bullseye", Path("/cache/sysroots/bullseye"), "2.31", 10, "10.2.1", "0123456789abcdef")
HOST_12 = Compiler(12, Path("/usr/bin/gcc-12"), Path("/usr/bin/g++-12"), "12.2.0", "2.36")
HOST_11 = Compiler(11, Path("/usr/bin/gcc-11"), Path("/usr/bin/g++-11"), "11.3.0", "2.36")
SYSROOT_10 = Compiler(10, BULLSEYE.cc, BULLSEYE.cxx, "10.2.1", "2.31", BULLSEYE)


def _inventory(*, sysroots: tuple[Compiler, ...] = (SYSROOT_10,), toolkits: tuple[CudaToolkit, ...] = ()) -> Inventory:
    pythons = tuple(Interpreter(v, f"{v}.1", Path(f"/py/{v}/bin/python"), "feed") for v in ("3.9", "3.11"))
    return Inventory("linux-x86_64", pythons, (HOST_11, HOST_12), toolkits, {}, {}, None, None, None,
                     sysroot_compilers=sysroots)


@cache
def _release():  # noqa: ANN202
    return load_spec(REPO).release


def _cell(cell_id: str):  # noqa: ANN202
    return next(c for c in expand(_release()) if c.id == cell_id)


@pytest.mark.parametrize(("tag", "glibc"), [
    ("manylinux_2_31_x86_64", "2.31"), ("manylinux_2_28_aarch64", "2.28"), ("manylinux2014_x86_64", "2.17"),
    ("manylinux1_x86_64", "2.5"), ("win_amd64", None), ("macosx_11_0_arm64", None)])
def test_a_platform_tag_names_the_glibc_it_promises(tag: str, glibc: str | None) -> None:
    platform = Platform(name="p", os="linux", arch="x86_64", wheel_platform_tag=tag, github_runner="r")
    assert platform.promised_glibc == glibc


def test_release_wheels_build_with_the_sysroot_compiler_and_conda_with_the_hosts() -> None:
    release = _release()
    assert release.platforms["linux-x86_64"].wheel_platform_tag == "manylinux_2_31_x86_64"
    wheel = resolve(_cell("embervision-cpu-linux-x86_64-cp311-wheel"), release, _inventory())
    assert isinstance(wheel, Toolchain) and wheel.compiler == SYSROOT_10
    assert describe(wheel) == "python 3.11.1, g++ 10.2.1 (bullseye sysroot, glibc 2.31)"
    # conda packages get their glibc from the channel's sysroot package, not the wheel tag
    conda = resolve(_cell("libember-cpu-linux-x86_64-conda"), release, _inventory())
    assert isinstance(conda, Toolchain) and conda.compiler == HOST_12
    # the sysroot is part of the cache key: another sysroot build is another toolchain
    other = replace(SYSROOT_10, sysroot=replace(BULLSEYE, identity="fedcba9876543210"))
    assert Toolchain(None, other, None, None).identity != Toolchain(None, SYSROOT_10, None, None).identity


def test_without_the_sysroot_the_fix_is_to_install_it() -> None:
    missing = resolve(_cell("ember-cpu-linux-x86_64-cp39-wheel"), _release(), _inventory(sysroots=()))
    assert isinstance(missing, Missing)
    assert str(missing) == (
        "no C++ compiler links against glibc 2.31 or older, as manylinux_2_31_x86_64 promises (this host's gcc "
        "links its glibc 2.36). Fix: shipyard toolchain install bullseye   (Debian bullseye's gcc 10 and glibc "
        "2.31 as a sysroot, from this machine's mirror)")


def test_an_older_promise_than_any_sysroot_names_the_promise_that_builds() -> None:
    release = _release()
    older = release.model_copy(update={"platforms": {**release.platforms, "linux-x86_64": release.platforms[
        "linux-x86_64"].model_copy(update={"wheel_platform_tag": "manylinux_2_28_x86_64"})}})
    assert recipe_for_glibc("2.28") is None and recipe_for_glibc("2.31") == sysroot_recipes()[0]
    missing = resolve(_cell("ember-cpu-linux-x86_64-cp311-wheel"), older, _inventory())
    assert isinstance(missing, Missing)
    assert "promises glibc 2.28, older than any compiler shipyard has" in missing.what
    # validate refuses the same promise; the fix is a value that builds, never the user's own
    assert missing.fix.endswith("promise manylinux_2_31_x86_64 (installs on Debian 11, Ubuntu 20.04, RHEL 9 and newer)")


def _toolkit(root: Path, version: str, runtime: Path | None) -> CudaToolkit:
    (root / "bin").mkdir(parents=True)
    (root / "lib64").mkdir()
    if runtime is not None:
        shutil.copyfile(runtime, root / "lib64" / f"libcudart.so.{version.split('.')[0]}")
    return CudaToolkit(version, root, root / "bin" / "nvcc", root / "bin" / "cuobjdump", "shipyard cache", "id")


def test_cuda_host_compiler_keeps_the_promise_and_gcc_max(tmp_path: Path) -> None:
    release = _release()
    toolkit = _toolkit(tmp_path / "cuda-11.8", "11.8", None)
    chosen = resolve(_cell("ember-cu118-linux-x86_64-cp311-wheel"), release, _inventory(toolkits=(toolkit,)))
    # host_gcc_max 11 would allow the host's g++-11, but only the sysroot's gcc 10 keeps glibc 2.31
    assert isinstance(chosen, Toolchain) and chosen.cuda_host_compiler == SYSROOT_10


def test_a_toolkit_whose_runtime_needs_a_newer_glibc_cannot_keep_the_promise(tmp_path: Path) -> None:
    # A real ELF that needs a glibc newer than 2.31: this host's own Python (built against glibc 2.36).
    newer = Path(sys.executable).resolve()
    needed = glibc_required(newer)
    assert glibc_tuple(needed) > (2, 31), needed
    toolkit = _toolkit(tmp_path / "cuda-12.4", "12.4", newer)
    assert toolkit_glibc(toolkit.root).runtime == needed
    missing = resolve(_cell("ember-cu124-linux-x86_64-cp311-wheel"), _release(),
                      _inventory(toolkits=(toolkit,)))
    assert isinstance(missing, Missing)
    assert missing.what == (f"CUDA 12.4's runtime libcudart.so.12 needs GLIBC_{needed}, newer than the promised "
                            "glibc 2.31: its wheels cannot run there")


def test_a_runtime_replaced_in_place_is_read_again(tmp_path: Path) -> None:
    """Each ELF file is read once per process (the report resolves every CUDA cell against one
    toolkit), but a toolkit reinstalled in place is read anew, not answered from memory."""
    toolkit = _toolkit(tmp_path / "cuda-12.4", "12.4", None)
    runtime = toolkit.root / "lib64" / "libcudart.so.12"
    runtime.write_text("#!/bin/sh\n")  # not an ELF file: needs no glibc
    assert toolkit_glibc(toolkit.root).runtime == ""
    newer = Path(sys.executable).resolve()
    shutil.copyfile(newer, runtime)
    assert toolkit_glibc(toolkit.root).runtime == glibc_required(newer) != ""
