"""What no route of shipyard can build is refused at validate, one line per platform naming the key,
the value, the reason and what would be needed; what builds (here or on its runner) still validates,
and doctor's fix names a value that works (release/build_routes.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from shipyard.cli import main
from shipyard.host.toolchains.discover import Compiler, Interpreter, Inventory
from shipyard.host.toolchains.resolve import Missing, resolve
from shipyard.release.matrix import expand
from shipyard.release.validate import load_spec

FIXTURE = Path(__file__).parent.parent / "fixtures" / "minirelease"
LINUX = ("  linux-x86_64:\n    os: linux\n    arch: x86_64\n    wheel_platform_tag: manylinux_2_31_x86_64\n"
         "    github_runner: ubuntu-22.04\n")


def _release_with(tmp_path: Path, platforms: str) -> Path:
    """A copy of the fixture release whose platforms section is `platforms` (YAML lines)."""
    root = tmp_path / "release"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("dist", ".shipyard", "__pycache__"))
    text = (root / "release.yaml").read_text()
    assert LINUX in text
    (root / "release.yaml").write_text(text.replace(LINUX, platforms))
    return root


def _validate(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    status = main(["--root", str(root), "validate"])
    return status, [" ".join(line.split()) for line in capsys.readouterr().err.splitlines() if line.strip()]


REFUSED = [
    ("musllinux", "  linux-x86_64:\n    wheel_platform_tag: musllinux_1_2_x86_64\n",
     "platforms.linux-x86_64.wheel_platform_tag: musllinux_1_2_x86_64 needs a musl C library, compiler and Python, "
     "and shipyard has none: its compilers target glibc and its Pythons are glibc builds; a musl toolchain and "
     "musl Pythons (an Alpine builder), which shipyard does not have; promise manylinux_2_17_x86_64 instead, or "
     "remove the platform (got 'musllinux_1_2_x86_64')"),
    ("aarch64", LINUX + "  linux-aarch64: {}\n",
     "platforms.linux-aarch64.arch: no route builds aarch64 Linux wheels: shipyard's Linux compilers are the "
     "bullseye sysroot's and zig's, x86_64 only (amd64 .debs, x86_64 targets), and it has no aarch64 sysroot for "
     "the builder container on ubuntu-22.04-arm; an aarch64 sysroot, which shipyard does not have; remove the "
     "platform (Linux wheels build for linux-x86_64, manylinux_2_17_x86_64) (got 'aarch64')"),
    # Older than manylinux2014, the oldest glibc the zig route targets: the fix names the one that builds.
    ("manylinux2010", "  linux-x86_64:\n    wheel_platform_tag: manylinux2010_x86_64\n",
     "platforms.linux-x86_64.wheel_platform_tag: manylinux2010_x86_64 promises glibc 2.12, older than any compiler "
     "shipyard has: its oldest target is manylinux2014's glibc 2.17 (zig), the oldest policy pip and PyPI's build "
     "images still serve; a compiler and Pythons for glibc 2.12, which shipyard does not have; promise "
     "manylinux_2_17_x86_64 (manylinux2014: installs on CentOS 7, RHEL 8, Debian 8, Ubuntu 14.04 and newer) "
     "(got 'manylinux2010_x86_64')"),
    ("no auditwheel policy", "  linux-x86_64:\n    wheel_platform_tag: manylinux_2_32_x86_64\n",
     "platforms.linux-x86_64.wheel_platform_tag: auditwheel, which repairs every Linux wheel to exactly its tag, has "
     "no manylinux_2_32 policy (it has manylinux_2_17, manylinux_2_24, manylinux_2_26, manylinux_2_27, "
     "manylinux_2_28, manylinux_2_31, manylinux_2_34,"),
    ("arm runner for x86_64", "  linux-x86_64:\n    github_runner: ubuntu-24.04-arm\n",
     "platforms.linux-x86_64.github_runner: ubuntu-24.04-arm is an arm64 runner: its builder container and compilers "
     "are arm64, not x86_64; an x86_64 runner; set github_runner to one (e.g. ubuntu-22.04) (got 'ubuntu-24.04-arm')"),
    ("runner of another os", LINUX + "  macos-arm64:\n    github_runner: ubuntu-22.04\n",
     "platforms.macos-arm64.github_runner: ubuntu-22.04 is a GitHub linux runner, and macos wheels build on a macos "
     "runner; a macos runner; set github_runner to one (e.g. macos-14) (got 'ubuntu-22.04')"),
]


@pytest.mark.parametrize(("platforms", "line"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_a_platform_no_route_builds_is_refused_with_the_reason_and_the_need(tmp_path, capsys, platforms, line):
    status, lines = _validate(_release_with(tmp_path, platforms), capsys)
    assert status == 2, lines
    refused = [text for text in lines if "release.yaml:" in text and ": platforms." in text]
    assert len(refused) == 1, lines
    assert refused[0].split(": ", 1)[1].startswith(line), refused[0]
    assert "Traceback" not in "\n".join(lines)


def test_each_refused_platform_has_its_own_line(tmp_path, capsys):
    status, lines = _validate(_release_with(tmp_path, "  linux-x86_64:\n    wheel_platform_tag: musllinux_1_2_x86_64\n"
                                                      "  linux-aarch64: {}\n"), capsys)
    assert status == 2
    assert sorted(text.split(": ")[1] for text in lines if ": platforms." in text) == [
        "platforms.linux-aarch64.arch", "platforms.linux-x86_64.wheel_platform_tag"]


ALLOWED = [
    ("the bullseye promise", LINUX),
    # A newer promise than the sysroot's glibc: the wheels need no newer symbol, and auditwheel has the policy.
    ("a newer glibc promise", "  linux-x86_64:\n    wheel_platform_tag: manylinux_2_35_x86_64\n"),
    # Older than any sysroot: zig's clang targets the promised glibc itself (issue #53).
    ("manylinux2014", "  linux-x86_64:\n    wheel_platform_tag: manylinux2014_x86_64\n"),
    ("manylinux_2_17", "  linux-x86_64:\n    wheel_platform_tag: manylinux_2_17_x86_64\n"),
    ("manylinux_2_28 (RHEL 8)", "  linux-x86_64:\n    wheel_platform_tag: manylinux_2_28_x86_64\n"),
    ("windows and macos on their runners", LINUX + "  windows-amd64: {}\n  windows-arm64: {}\n  macos-arm64: {}\n"
                                                   "  macos-x86_64: {}\n"),
    ("a self-hosted runner label", "  linux-x86_64:\n    github_runner: gpu-builder\n"),
]


@pytest.mark.parametrize("platforms", [a[1] for a in ALLOWED], ids=[a[0] for a in ALLOWED])
def test_what_a_route_builds_still_validates(tmp_path, capsys, platforms):
    status, lines = _validate(_release_with(tmp_path, platforms), capsys)
    assert status == 0, lines


def test_doctor_fix_for_a_tag_no_compiler_keeps_names_a_value_that_works(tmp_path, capsys):
    """Whatever reaches the doctor (a release loaded before this check, a platform built in code), its
    fix for an unbuildable promise names a tag that builds, never the user's own value back."""
    release = load_spec(_release_with(tmp_path, LINUX)).release
    older = release.model_copy(update={"platforms": {"linux-x86_64": release.platforms["linux-x86_64"].model_copy(
        update={"wheel_platform_tag": "manylinux2010_x86_64"})}})
    cell = next(c for c in expand(older) if c.id == "fixcext-cpu-linux-x86_64-cp311-wheel")
    host = Compiler(12, Path("/usr/bin/gcc-12"), Path("/usr/bin/g++-12"), "12.2.0", "2.36")
    python = Interpreter("3.11", "3.11.1", Path("/py/3.11/bin/python"), "feed")
    inventory = Inventory("linux-x86_64", (python,), (host,), (), {}, {}, None, None, None)
    missing = resolve(cell, older, inventory)
    assert isinstance(missing, Missing)
    assert "promise manylinux_2_17_x86_64" in missing.fix
    assert "manylinux2010" not in missing.fix
