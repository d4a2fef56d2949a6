"""manylinux2014 wheels built here (issue #53): a release that promises glibc 2.17 builds a C extension
(setuptools) and a threaded C++ one (scikit-build-core, CMake) with zig's clang through `shipyard build`,
and each wheel is checked and tested as every other; auditwheel's own verdict and the symbol versions
the extensions need are printed (-s or -rA shows them) and held to the promise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from support.minirelease import GIT_ENV

from shipyard.cli import main
from shipyard.host.toolchains.glibc import glibc_required, glibc_tuple, symbol_version_required
from shipyard.plumbing import command
from shipyard.wheel.checks import check_platform_tag, labelled_platform_tags
from shipyard.wheel.repair import AUDITWHEEL

FIXTURE = Path(__file__).parent.parent / "fixtures" / "oldglibc"
COMPONENTS = ("zigc", "zigcxx")


def test_a_manylinux2014_wheel_carries_both_names_of_its_policy() -> None:
    """auditwheel labels a manylinux2014 wheel with the policy's PEP 600 name too; the check takes both,
    and still refuses another policy's tag."""
    assert labelled_platform_tags("manylinux2014_x86_64") == {"manylinux2014_x86_64", "manylinux_2_17_x86_64"}
    assert labelled_platform_tags("manylinux_2_31_x86_64") == {"manylinux_2_31_x86_64"}
    expected = {f"cp311-cp311-{tag}" for tag in labelled_platform_tags("manylinux2014_x86_64")}
    labelled = Path("zigc-0.1.0+cpu-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl")
    assert check_platform_tag(labelled, expected) == []
    assert check_platform_tag(Path("zigc-0.1.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"), expected) != []


def test_a_zig_route_wheels_glibc_verdict_is_one_line_held_to_the_promise() -> None:
    """What `shipyard build` prints for each wheel of a manylinux2014 platform (no sysroot was proved
    for that promise): auditwheel's verdict and each binary's symbol versions, on one line; a wheel
    that needs a newer glibc than promised fails its checks, saying so."""
    from shipyard.wheel.glibc_verdict import BinaryNeeds, GlibcVerdict

    wheel = "ember-1.7.0+cpu-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
    kept = GlibcVerdict(wheel, "manylinux_2_17_x86_64", (BinaryNeeds("ember/_C.so", "2.3", ""),
                                                        BinaryNeeds("ember/lib/libember.so", "2.14", "")))
    assert kept.line() == (f"{wheel}: auditwheel: consistent with manylinux_2_17_x86_64; needs ember/_C.so "
                           "GLIBC_2.3 GLIBCXX_-, ember/lib/libember.so GLIBC_2.14 GLIBCXX_-")
    assert kept.problem("2.17") is None
    newer = GlibcVerdict(wheel, "manylinux_2_31_x86_64", (BinaryNeeds("ember/lib/libember.so", "2.29", "3.4.22"),))
    assert str(newer.problem("2.17")).startswith(f"{wheel}: glibc promise: the platform promises glibc 2.17, and "
                                                 "the wheel needs more")
    unread = GlibcVerdict(wheel, "", ())  # auditwheel named no policy: not a verdict that keeps the promise
    assert unread.problem("2.17") is not None


def _checkout(dest: Path) -> Path:
    shutil.copytree(FIXTURE, dest)
    env = {**os.environ, **GIT_ENV}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "fixture"]):
        subprocess.run(["git", *args], cwd=dest, env=env, check=True)
    return dest


@pytest.mark.slow
def test_manylinux2014_c_and_cpp_wheels_build_check_and_test_with_zig(tmp_path: Path, suite_state: Path) -> None:
    root = _checkout(tmp_path / "oldglibc")
    dist = tmp_path / "dist"
    # --install-toolchain writes zig's wrappers for glibc 2.17 when they are not there, as nox -s build-cpu does.
    code = main(["--root", str(root), "build", "--variant", "cpu", "--install-toolchain", "--dist", str(dist),
                 "--state", str(suite_state)])
    assert code == 0  # built, checked (platform tag, shared libraries of the policy) and tested
    for component in COMPONENTS:
        wheels = sorted((dist / "whl" / "cpu" / component).glob("*.whl"))
        assert [w.name for w in wheels] == [
            f"{component}-0.1.0+cpu-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"], wheels
        verdict = command.run([*AUDITWHEEL, "show", wheels[0]], timeout=120, what="auditwheel show").stdout
        print(f"\n--- auditwheel show {wheels[0].name}\n{verdict}")
        # auditwheel names the oldest policy the wheel fits: manylinux_2_17 or older keeps the promise.
        consistent = " ".join(verdict.split()).split("consistent with the following platform tag: ", 1)[1]
        policy = consistent.split('"')[1]
        assert glibc_tuple(policy.removeprefix("manylinux_").removesuffix("_x86_64").replace("_", ".")) <= (2, 17), \
            verdict
        unpacked = tmp_path / component
        with zipfile.ZipFile(wheels[0]) as zf:
            zf.extractall(unpacked)
        for extension in sorted(unpacked.rglob("*.so")):
            glibc = glibc_required(extension)
            glibcxx = symbol_version_required(extension, "GLIBCXX")
            print(f"{extension.relative_to(unpacked)}: needs GLIBC_{glibc or '-'}, GLIBCXX_{glibcxx or '-'}")
            assert glibc and glibc_tuple(glibc) <= (2, 17), extension
            # zig's libc++ is linked statically with hidden symbols: no libstdc++ and no GLIBCXX_ at all
            assert glibcxx == "", extension
