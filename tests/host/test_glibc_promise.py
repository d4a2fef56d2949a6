"""The platform tag's glibc promise decides the compiler: release.yaml's manylinux_2_31 builds with
the bullseye sysroot's gcc, never this host's, manylinux2014 and manylinux_2_28 with zig's clang for
exactly that glibc, and what cannot keep a promise says why and the fix."""

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
from shipyard.host.toolchains.zig import ZigCompiler, find_zig
from shipyard.release.build_routes import ZigTarget, recipe_for_glibc, route_for_glibc, sysroot_recipes
from shipyard.release.matrix import expand
from shipyard.release.spec import Platform
from shipyard.release.validate import load_spec

REPO = Path(__file__).resolve().parents[2]
BULLSEYE = Sysroot("bullseye", Path("/cache/sysroots/bullseye"), "2.31", 10, "10.2.1", "0123456789abcdef")
HOST_12 = Compiler(12, Path("/usr/bin/gcc-12"), Path("/usr/bin/g++-12"), "12.2.0", "2.36")
HOST_11 = Compiler(11, Path("/usr/bin/gcc-11"), Path("/usr/bin/g++-11"), "11.3.0", "2.36")
SYSROOT_10 = Compiler(10, BULLSEYE.cc, BULLSEYE.cxx, "10.2.1", "2.31", BULLSEYE)
ZIG_2_17 = ZigCompiler(Path("/cache/zig/0.17.1-glibc2.17"), "0.17.1", "22.1.8", "2.17", "0123456789abcdef")
ZIG_217 = Compiler(22, ZIG_2_17.cc, ZIG_2_17.cxx, "0.17.1", "2.17", zig=ZIG_2_17)


def _inventory(*, sysroots: tuple[Compiler, ...] = (SYSROOT_10,), toolkits: tuple[CudaToolkit, ...] = (),
               zig: tuple[Compiler, ...] = ()) -> Inventory:
    pythons = tuple(Interpreter(v, f"{v}.1", Path(f"/py/{v}/bin/python"), "feed") for v in ("3.9", "3.11"))
    return Inventory("linux-x86_64", pythons, (HOST_11, HOST_12), toolkits, {}, {}, None, None, None,
                     sysroot_compilers=sysroots, zig_compilers=zig)


def _promising(tag: str):  # noqa: ANN202
    """ember's release with its Linux platform promising `tag`."""
    release = _release()
    return release.model_copy(update={"platforms": {**release.platforms, "linux-x86_64": release.platforms[
        "linux-x86_64"].model_copy(update={"wheel_platform_tag": tag})}})


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


def test_the_route_of_each_glibc_promise() -> None:
    """One place maps a promise to what builds it: bullseye's gcc for what it keeps, zig for exactly the
    promised glibc down to manylinux2014's, nothing older."""
    assert recipe_for_glibc("2.28") is None and recipe_for_glibc("2.31") == sysroot_recipes()[0]
    assert route_for_glibc("2.31") == route_for_glibc("2.35") == sysroot_recipes()[0]
    assert route_for_glibc("2.28") == ZigTarget("2.28") and route_for_glibc("2.17") == ZigTarget("2.17")
    assert ZigTarget("2.17").triple == "x86_64-linux-gnu.2.17" and ZigTarget("2.17").name == "zig-2.17"
    assert route_for_glibc("2.12") is None


def test_manylinux2014_wheels_build_with_zig_for_glibc_2_17() -> None:
    cell = _cell("ember-cpu-linux-x86_64-cp311-wheel")
    chosen = resolve(cell, _promising("manylinux2014_x86_64"), _inventory(zig=(ZIG_217,)))
    assert isinstance(chosen, Toolchain) and chosen.compiler == ZIG_217
    # what the doctor's row says: the toolchain the target uses, by name
    assert describe(chosen) == "python 3.11.1, zig 0.17.1 for glibc 2.17 (clang 22.1.8)"
    # the bullseye promise stays on the sysroot's gcc with zig installed
    same = resolve(cell, _release(), _inventory(zig=(ZIG_217,)))
    assert isinstance(same, Toolchain) and same.compiler == SYSROOT_10
    # zig and its glibc target are part of the cache key
    other = replace(ZIG_217, zig=replace(ZIG_2_17, glibc="2.28"))
    assert len({Toolchain(None, c, None, None).identity for c in (ZIG_217, other, SYSROOT_10)}) == 3


def test_without_zig_for_the_promise_the_fix_is_to_install_it() -> None:
    """zig for glibc 2.17 does not serve a 2.28 promise (each target is its own), and the fix names the
    value that works, not the user's tag back."""
    zig = find_zig()
    assert zig is not None, "the ziglang package (a dependency of shipyard) is not installed"
    missing = resolve(_cell("ember-cpu-linux-x86_64-cp311-wheel"), _promising("manylinux_2_28_x86_64"),
                      _inventory(zig=(ZIG_217,)))
    assert str(missing) == (
        "no compiler targets glibc 2.28's symbol versions, as manylinux_2_28_x86_64 promises. Fix: shipyard "
        f"toolchain install zig-2.28   (zig {zig.version}'s clang from the ziglang package, targeting "
        "x86_64-linux-gnu.2.28; no download)")


def test_what_zig_cannot_build_says_the_promise_that_can() -> None:
    older = _promising("manylinux2014_x86_64")
    # nvcc takes gcc as its host compiler, not zig's clang
    cuda = resolve(_cell("ember-cu118-linux-x86_64-cp311-wheel"), older,
                   _inventory(zig=(ZIG_217,), toolkits=(CudaToolkit("11.8", Path("/cuda"), Path("/cuda/bin/nvcc"),
                                                                    Path("/cuda/bin/cuobjdump"), "cache", "id"),)))
    assert isinstance(cuda, Missing) and "zig 0.17.1 for glibc 2.17, which nvcc does not take" in cuda.what
    assert "promise manylinux_2_31_x86_64" in cuda.fix
    # zig carries no libpng of that glibc's age; the host's needs the host's glibc
    vendoring = resolve(_cell("embervision-cpu-linux-x86_64-cp311-wheel"), older, _inventory(zig=(ZIG_217,)))
    assert isinstance(vendoring, Missing)
    assert vendoring.what == ("embervision links and vendors libpng, libjpeg, and zig 0.17.1 for glibc 2.17 has no "
                              "build of them for that glibc")
    assert vendoring.fix.startswith("promise manylinux_2_31_x86_64 for linux-x86_64")


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


def test_toolchain_install_refuses_a_glibc_the_zig_route_does_not_target(capsys: pytest.CaptureFixture[str]) -> None:
    from shipyard.cli import main

    assert main(["--root", str(REPO), "toolchain", "install", "zig-2.12"]) == 2
    captured = capsys.readouterr()
    assert " ".join(captured.err.split()) == (
        "error: 'zig-2.12' names no glibc the zig route targets: zig-<glibc> with a glibc from 2.17 up to the "
        "oldest sysroot's (e.g. zig-2.17); newer promises build with a sysroot (bullseye)")


def test_a_second_linux_platform_of_this_host_builds_here_with_its_promises_compiler() -> None:
    """ember's linux-x86_64-manylinux2014 (issue #53): this host's OS and architecture with an older glibc
    promise. Its cells build here with zig for glibc 2.17, beside linux-x86_64's with the bullseye sysroot,
    and the doctor lists both; another OS's platform still builds on its runner."""
    from shipyard.host.doctor import diagnose

    release = _release()
    inventory = _inventory(zig=(ZIG_217,))
    assert inventory.platforms_built_here(release) == ("linux-x86_64", "linux-x86_64-manylinux2014")
    older = resolve(_cell("ember-cpu-linux-x86_64-manylinux2014-cp311-wheel"), release, inventory)
    assert isinstance(older, Toolchain) and older.compiler == ZIG_217
    own = resolve(_cell("ember-cpu-linux-x86_64-cp311-wheel"), release, inventory)
    assert isinstance(own, Toolchain) and own.compiler == SYSROOT_10
    rows = {row.cell.id: row for row in diagnose(release, inventory, "cpu")}
    assert rows["ember-cpu-linux-x86_64-manylinux2014-cp311-wheel"].detail == (
        "python 3.11.1, zig 0.17.1 for glibc 2.17 (clang 22.1.8)")
    assert not any(cell_id.startswith(("embervision-cpu-linux-x86_64-manylinux2014", "libember-cpu-linux-x86_64-"
                                       "manylinux2014")) for cell_id in rows)  # release.yaml's exclusions
    windows = resolve(_cell("ember-cpu-windows-amd64-cp311-wheel"), release, inventory)
    assert isinstance(windows, Missing) and windows.what == "windows-amd64 cells do not build on this linux-x86_64 host"
    # Without zig's wrappers the fix writes them; the platform is not sent to a runner.
    missing = resolve(_cell("ember-cpu-linux-x86_64-manylinux2014-cp311-wheel"), release, _inventory())
    assert isinstance(missing, Missing) and missing.fix.startswith("shipyard toolchain install zig-2.17")


def test_a_build_selects_every_platform_of_this_host_unless_told_one(capsys: pytest.CaptureFixture[str]) -> None:
    """`shipyard build` builds the cells of every platform this host builds (nox -s build-cpu builds the
    manylinux2014 wheels too); `--platform` narrows it (what a CI job passes), and names only a platform
    of release.yaml."""
    from shipyard.cli import main
    from shipyard.wheel.build_request import BuildRequest
    from shipyard.wheel.cell_selection import selected_cells

    spec = load_spec(REPO)
    inventory = _inventory(zig=(ZIG_217,))
    everything, _ = selected_cells(spec, BuildRequest("cpu", pythons=("3.11",)), inventory)
    assert [c.id for c in everything if not c.is_pure] == [
        "ember-cpu-linux-x86_64-cp311-wheel", "ember-cpu-linux-x86_64-manylinux2014-cp311-wheel",
        "embervision-cpu-linux-x86_64-cp311-wheel"]
    own, _ = selected_cells(spec, BuildRequest("cpu", pythons=("3.11",), platforms=("linux-x86_64",)), inventory)
    assert [c.id for c in own] == [c.id for c in everything if "manylinux2014" not in c.id]
    older, _ = selected_cells(spec, BuildRequest("cpu", platforms=("linux-x86_64-manylinux2014",)), inventory)
    # the pure wheels stand for every platform, this one too
    assert {c.id for c in older if not c.is_pure} == {
        f"ember-cpu-linux-x86_64-manylinux2014-cp3{m}-wheel" for m in range(9, 14)}
    assert main(["--root", str(REPO), "build", "--variant", "cpu", "--platform", "linux-x86_64-manylinux2010"]) == 2
    assert capsys.readouterr().err.startswith("error: --platform linux-x86_64-manylinux2010: not a platform or "
                                              "mobile target of release.yaml")
