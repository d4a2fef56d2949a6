"""The bullseye sysroot, assembled for real from the machine's Debian mirror into a fresh cache:
its gcc 10 links bullseye's glibc 2.31 where this host's gcc links 2.34+ symbols, and a second
install reuses it."""

from __future__ import annotations

import shlex
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.sysroot_debs import deb_versions, installed_sysroot

from shipyard.host.toolchains.discover import discover
from shipyard.host.toolchains.glibc import glibc_required, glibc_tuple
from shipyard.host.toolchains.sysroot import find_installed_sysroots, install_sysroot
from shipyard.plumbing import command
from shipyard.wheel.native_core import python_header_flags

pytestmark = pytest.mark.slow

# Threads and a shared_ptr: what made the Debian 12 builder's wheels need GLIBC_2.34
# (pthread_create moved into libc) and GLIBC_2.32 (__libc_single_threaded in libstdc++'s headers).
SOURCE = """#include <png.h>
#include <pthread.h>
#include <memory>
#include <string>
static void* run(void* arg) { static_cast<std::string*>(arg)->append("x"); return nullptr; }
extern "C" int work(int n) {
  auto s = std::make_shared<std::string>(png_get_libpng_ver(nullptr));
  std::shared_ptr<std::string> copy = s;
  pthread_t thread;
  if (pthread_create(&thread, nullptr, run, copy.get()) != 0) return -1;
  pthread_join(thread, nullptr);
  return int(s->size()) + n;
}
"""


def test_bullseye_sysroot_links_glibc_2_31(tmp_path: Path) -> None:
    cache = tmp_path / "toolchains"
    steps: list[str] = []
    sysroot = install_sysroot("bullseye", cache, progress=steps.append)
    assert sysroot.root == cache / "sysroots" / "bullseye"
    assert sysroot.gcc_major == 10 and sysroot.gcc_version.startswith("10.") and sysroot.glibc == "2.31"
    assert (sysroot.tree / "lib" / "x86_64-linux-gnu" / "libc-2.31.so").is_file()
    assert any("proving" in s for s in steps), steps
    assert find_installed_sysroots(cache) == [sysroot]
    # With no dpkg database in the tree, each file's .deb is recorded for the SBOMs (supply/grafted.py).
    png = sysroot.debian_package(sysroot.tree / "usr" / "lib" / "x86_64-linux-gnu" / "libpng16.so.16")
    assert png is not None and (png.package, png.source) == ("libpng16-16", "libpng1.6"), png
    assert png.version == deb_versions(sysroot)["libpng16-16"] and png.version.startswith("1.6.37"), png

    source = tmp_path / "work.cpp"
    source.write_text(SOURCE)
    built = {}
    host = discover().compiler_at_most(None)
    assert host is not None
    for name, cxx in (("sysroot", sysroot.cxx), ("host", host.cxx)):
        library = tmp_path / f"lib{name}.so"
        command.run([cxx, "-O2", "-fPIC", "-shared", "-pthread", source, "-o", library, "-lpng"], timeout=300)
        built[name] = glibc_required(library)
    assert glibc_tuple(built["sysroot"]) <= (2, 31), built
    # The same source with this host's own gcc needs the newer glibc the sysroot exists to avoid.
    assert glibc_tuple(built["host"]) > (2, 31), built

    start = time.monotonic()
    again = install_sysroot("bullseye", cache, progress=steps.append)
    assert again == sysroot and time.monotonic() - start < 5
    assert steps[-1].startswith("sysroot bullseye is up to date")


def test_debian_pythons_split_pyconfig_compiles_with_the_sysroot_compiler(tmp_path: Path,
                                                                          glibc_sysroots: None) -> None:
    """A bookworm job container builds against Debian's python3 (ci/bootstrap.sh installs
    python3-dev): its pyconfig.h includes <x86_64-linux-gnu/python3.11/pyconfig.h> from the host's
    /usr/include, which the bullseye compiler does not search. Only that header is added."""
    python = Path("/usr/bin/python3")
    include = command.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
                          timeout=60).stdout.strip()
    assert "x86_64-linux-gnu/python3." in Path(include, "pyconfig.h").read_text(), "not Debian's split pyconfig.h"
    sysroot = installed_sysroot("bullseye")
    toolchain = SimpleNamespace(compiler=SimpleNamespace(sysroot=sysroot, searches_host_headers=False))
    source = tmp_path / "module.c"
    source.write_text("#include <Python.h>\nint answer(void) { return PY_MAJOR_VERSION + SIZEOF_VOID_P; }\n")
    compile_module = [str(sysroot.cc), "-fPIC", "-c", str(source), "-I", include, "-o", str(tmp_path / "module.o")]

    without = subprocess.run(compile_module, capture_output=True, text=True, timeout=120)
    assert without.returncode != 0 and "pyconfig.h: No such file" in without.stderr, without.stderr

    flags = python_header_flags(python, toolchain, tmp_path / "headers")  # type: ignore[arg-type]
    assert flags == f"-isystem {tmp_path / 'headers'}"
    copied = sorted(p.relative_to(tmp_path / "headers") for p in (tmp_path / "headers").rglob("*") if p.is_file())
    assert [str(p) for p in copied] == [f"x86_64-linux-gnu/{Path(include).name}/pyconfig.h"]
    command.run([*compile_module, *shlex.split(flags)], timeout=120)
    # A host compiler (no sysroot) needs nothing added.
    assert python_header_flags(python, SimpleNamespace(compiler=None), tmp_path / "none") == ""  # type: ignore[arg-type]
