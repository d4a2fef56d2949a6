"""Release rules every built wheel must meet. A failure names the wheel and the rule."""

from __future__ import annotations

import configparser
import json
import re
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from elftools.elf.elffile import ELFFile
from packaging.utils import parse_wheel_filename

from shipyard.host.toolchains.resolve import Toolchain
from shipyard.release.cuda_archs import DeviceCode, expected_device_code, ptx_arch, sm_name
from shipyard.release.matrix import Cell
from shipyard.release.spec import Component, Release, Variant
from shipyard.supply.binaries import ELF_MAGIC, needed_libraries
from shipyard.wheel.limited_api import abi3_problems


@dataclass(frozen=True)
class CheckFailure:
    wheel: str
    rule: str
    detail: str

    def __str__(self) -> str:
        return f"{self.wheel}: {self.rule}: {self.detail}"


def policy_of(platform_tag: str) -> str:
    """'manylinux_2_31_x86_64' -> 'manylinux_2_31'."""
    return re.sub(r"_(x86_64|aarch64|i686|ppc64le|s390x|armv7l)$", "", platform_tag)


@cache
def manylinux_allowed_libraries(policy: str) -> frozenset[str]:
    """Libraries a manylinux policy lets a wheel link without vendoring (auditwheel's data)."""
    text = resources.files("auditwheel.policy").joinpath("manylinux-policy.json").read_text()
    for entry in json.loads(text):
        if entry["name"] == policy or policy in entry.get("aliases", []):
            return frozenset(entry["lib_whitelist"]) | {"ld-linux-x86-64.so.2"}
    raise KeyError(f"auditwheel knows no policy {policy!r}")


def labelled_platform_tags(platform_tag: str) -> frozenset[str]:
    """The platform tags auditwheel labels a wheel repaired to `platform_tag` with: the tag and its
    policy's other names (manylinux2014_x86_64 and manylinux_2_17_x86_64 are one policy, and auditwheel
    writes both, as PyPI's own manylinux2014 wheels carry them)."""
    policy = policy_of(platform_tag)
    arch = platform_tag.removeprefix(policy)
    if not platform_tag.startswith("manylinux"):
        return frozenset({platform_tag})
    text = resources.files("auditwheel.policy").joinpath("manylinux-policy.json").read_text()
    for entry in json.loads(text):
        names = (entry["name"], *entry.get("aliases", ()))
        if policy in names:
            return frozenset(f"{name}{arch}" for name in names)
    return frozenset({platform_tag})


def _elf_members(zf: zipfile.ZipFile) -> list[str]:
    return [n for n in zf.namelist() if not n.endswith("/") and zf.read(n)[:4] == b"\x7fELF"]


def _needed(path: Path) -> list[str]:
    return needed_libraries(path.read_bytes())


def _has_fatbin(path: Path) -> bool:
    with path.open("rb") as fh:
        return ELFFile(fh).get_section_by_name(".nv_fatbin") is not None


def check_platform_tag(wheel: Path, expected: set[str]) -> list[CheckFailure]:
    """The wheel's tags are exactly `expected` (e.g. {'cp311-cp311-manylinux_2_31_x86_64'})."""
    _, _, _, tags = parse_wheel_filename(wheel.name)
    got = {str(t) for t in tags}
    if got != expected:
        return [CheckFailure(wheel.name, "platform tag",
                             f"tags {', '.join(sorted(got))}; expected {', '.join(sorted(expected))}")]
    return []


def check_size(wheel: Path, budget_mb: float | None) -> list[CheckFailure]:
    """The wheel is within `budget_mb` MiB; None: no budget, nothing to check (size_budget_note says so)."""
    size = wheel.stat().st_size
    if budget_mb is not None and size > budget_mb * 1024 * 1024:
        return [CheckFailure(wheel.name, "size budget",
                             f"{size / 1048576:.1f} MiB is over the budget of {budget_mb:g} MiB (release.yaml)")]
    return []


def size_budget_note(release: Release, variant: Variant) -> str | None:
    """The one line a build of `variant` says when its wheels have no size budget to be checked against
    (neither the variant nor the release sets wheel_size_budget_mb); None when they have one."""
    if release.wheel_size_budget_mb(variant) is not None:
        return None
    return (f"wheel sizes of variant {variant.name} are not checked: release.yaml sets no wheel_size_budget_mb "
            f"(add one under release: or under the variant to check them)")


def check_shared_libraries(wheel: Path, policy: str) -> list[CheckFailure]:
    """Every DT_NEEDED is in the wheel itself or allowed by the manylinux policy."""
    allowed = manylinux_allowed_libraries(policy)
    failures = []
    with zipfile.ZipFile(wheel) as zf, tempfile.TemporaryDirectory() as tmp:
        members = _elf_members(zf)
        inside = {Path(m).name for m in members}
        for member in members:
            path = Path(zf.extract(member, tmp))
            for lib in _needed(path):
                if lib in inside or lib in allowed:
                    continue
                why = " (the CUDA driver must never be linked: load it at run time)" if "libcuda.so" in lib else ""
                failures.append(CheckFailure(wheel.name, "unexpected shared library",
                                             f"{member} needs {lib}, which is neither in the wheel nor "
                                             f"allowed by {policy}{why}"))
    return failures


def binaries_device_code(binaries: Mapping[str, bytes],
                         device_code: Callable[[Path], DeviceCode]) -> dict[str, DeviceCode]:
    """Each kernel-bearing binary of an artifact (an ELF file with a .nv_fatbin), by its path in
    the artifact -> the device code `device_code` reads out of it (cuobjdump's SASS and PTX). The
    one read behind the arch check of wheels and conda packages and the verified archs every CUDA
    artifact records (record.manifest.CudaArchs)."""
    found = {}
    with tempfile.TemporaryDirectory() as tmp:
        for number, (name, data) in enumerate(sorted(binaries.items())):
            if data[:4] != ELF_MAGIC:
                continue
            path = Path(tmp) / str(number) / Path(name).name
            path.parent.mkdir()
            path.write_bytes(data)
            if _has_fatbin(path):
                found[name] = device_code(path)
    return found


def wheel_device_code(wheel: Path, device_code: Callable[[Path], DeviceCode]) -> dict[str, DeviceCode]:
    """binaries_device_code of a wheel's ELF members."""
    with zipfile.ZipFile(wheel) as zf:
        return binaries_device_code({n: zf.read(n) for n in zf.namelist() if not n.endswith("/")}, device_code)


def check_cuda_archs(wheel: Path, archs: tuple[str, ...],
                     device_code: Callable[[Path], DeviceCode]) -> list[CheckFailure]:
    """The fatbins hold SASS for exactly the arch list, and PTX for its highest arch only."""
    return check_device_code(wheel.name, archs, wheel_device_code(wheel, device_code).values())


def check_device_code(wheel: str, archs: tuple[str, ...], binaries: Iterable[DeviceCode]) -> list[CheckFailure]:
    """The device code of `wheel`'s kernel-bearing binaries holds SASS for exactly the arch list,
    and PTX for its highest arch only.

    The PTX is PyTorch's `+PTX`: it lets a GPU newer than every listed arch JIT-compile the
    kernels. It is implicit: release.yaml lists SASS archs, the highest also ships as PTX.
    """
    expected = expected_device_code(archs)
    ptx = sm_name(ptx_arch(archs))
    found = DeviceCode()
    for code in binaries:
        found |= code
    if not found:
        return [CheckFailure(wheel, "CUDA archs", "no CUDA device code (.nv_fatbin) in any binary")]

    def listed(names: frozenset[str]) -> str:
        return ", ".join(sorted(names, key=lambda n: int(re.sub(r"\D", "", n))))

    failures = []
    if expected.sass - found.sass:
        failures.append(CheckFailure(wheel, "CUDA archs",
                                     f"missing SASS for {listed(expected.sass - found.sass)}"))
    if found.sass - expected.sass:
        failures.append(CheckFailure(wheel, "CUDA archs",
                                     f"SASS for archs not in the list: {listed(found.sass - expected.sass)}"))
    if ptx not in found.ptx:
        failures.append(CheckFailure(wheel, "CUDA +PTX",
                                     f"missing PTX for {ptx}, the highest arch of the list; embed it "
                                     f"(-gencode arch=compute_{ptx[3:]},code=compute_{ptx[3:]}) so that newer "
                                     "GPUs can JIT-compile the kernels"))
    if found.ptx - expected.ptx:
        failures.append(CheckFailure(wheel, "CUDA +PTX",
                                     f"PTX for {listed(found.ptx - expected.ptx)}: only the highest arch of the "
                                     f"list ({ptx}) ships PTX"))
    return failures


def vendored_libraries(wheel: Path) -> dict[str, str]:
    """Libraries a repair vendored into `<package>.libs/`: member -> library name, the file name
    without auditwheel's hash and the soname version ('libpng16-0a0c6ccf.so.16.39.0' -> 'libpng16')."""
    with zipfile.ZipFile(wheel) as zf:
        members = [n for n in zf.namelist() if re.fullmatch(r"[^/]+\.libs/[^/]+", n)]
    return {m: re.sub(r"(-[0-9a-f]{8})?\.(so|dylib|dll)([.\d]*)$", "", m.split("/", 1)[1]) for m in members}


def _is_library(found: str, declared: str) -> bool:
    # 'libpng' names libpng16 too: a declaration need not repeat the soname version.
    return re.fullmatch(re.escape(declared) + r"[\d.]*", found) is not None


def check_vendored_libraries(wheel: Path, declared: tuple[str, ...], *, component: str,
                             implied: tuple[str, ...] = ()) -> list[CheckFailure]:
    """The wheel vendors exactly the libraries release.yaml declares for `component`, plus
    `implied` ones (the CUDA runtime of a CUDA variant's kernels)."""
    wanted = (*declared, *implied)
    found = vendored_libraries(wheel)
    failures = []
    for member, name in sorted(found.items()):
        if not any(_is_library(name, lib) for lib in wanted):
            failures.append(CheckFailure(wheel.name, "vendored libraries",
                                         f"vendors {name} ({member}), which release.yaml does not declare; add it to "
                                         f"components.{component}.vendored_libraries or stop linking it"))
    for lib in declared:
        if not any(_is_library(name, lib) for name in found.values()):
            failures.append(CheckFailure(wheel.name, "vendored libraries",
                                         f"does not vendor {lib}, which components.{component}.vendored_libraries "
                                         f"declares; link it, or remove it from release.yaml"))
    return failures


def console_scripts(wheel: Path) -> set[str]:
    """The console scripts the wheel's entry_points.txt installs."""
    with zipfile.ZipFile(wheel) as zf:
        name = next((n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt")), None)
        if name is None:
            return set()
        parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
        parser.optionxform = str  # type: ignore[assignment,method-assign]  # script names keep their case
        parser.read_string(zf.read(name).decode("utf-8"))
    return set(parser["console_scripts"]) if parser.has_section("console_scripts") else set()


def check_console_scripts(wheel: Path, declared: tuple[str, ...], *, component: str) -> list[CheckFailure]:
    """The wheel installs exactly the console scripts release.yaml declares for `component`."""
    found = console_scripts(wheel)
    failures = []
    for script in sorted(found - set(declared)):
        failures.append(CheckFailure(wheel.name, "console scripts",
                                     f"installs {script}, which components.{component}.console_scripts does not "
                                     f"declare; declare it in release.yaml or drop it from [project.scripts]"))
    for script in sorted(set(declared) - found):
        failures.append(CheckFailure(wheel.name, "console scripts",
                                     f"does not install {script}, which components.{component}.console_scripts "
                                     f"declares; add it to [project.scripts] or remove it from release.yaml"))
    return failures


# What the import system loads as an extension module (PEP 3149 names such as
# `_c.cpython-311-x86_64-linux-gnu.so` or `_c.abi3.so`, and Windows' `.pyd`); a library a repair
# vendored (`<package>.libs/`) or a `.dylib` is not one.
EXTENSION_SUFFIXES = (".so", ".pyd")


def _importable(members: Iterable[str]) -> Iterator[str]:
    """The wheel's members as they install into site-packages: its .data folder's purelib and
    platlib members under their installed paths, its .dist-info and other .data members left out."""
    for member in members:
        first, _, rest = member.partition("/")
        if first.endswith(".dist-info") or member.endswith("/"):
            continue
        if first.endswith(".data"):
            scheme, _, installed = rest.partition("/")
            if scheme in ("purelib", "platlib") and installed:
                yield installed
            continue
        yield member


def top_level_names(members: Iterable[str]) -> set[str]:
    """What `import NAME` finds at the top of the wheel: its packages and namespace folders, its
    modules (`NAME.py`) and extension modules (`NAME.cpython-311-x86_64-linux-gnu.so`, `NAME.pyd`)."""
    names = set()
    for member in _importable(members):
        first, folder, _ = member.partition("/")
        if folder:
            if first.isidentifier():  # not `<package>.libs`
                names.add(first)
        elif first.endswith((".py", *EXTENSION_SUFFIXES)) and (stem := first.split(".")[0]).isidentifier():
            names.add(stem)
    return names


def extension_modules(members: Iterable[str]) -> list[str]:
    """The wheel's extension modules (never a library vendored into `<package>.libs/`), sorted."""
    return sorted(m for m in _importable(members)
                  if m.endswith(EXTENSION_SUFFIXES) and not m.partition("/")[0].endswith(".libs"))


def check_import_name(wheel: Path, import_name: str, *, component: str) -> list[CheckFailure]:
    """The wheel installs a top-level package or module named release.yaml's `import_name`."""
    with zipfile.ZipFile(wheel) as zf:
        names = top_level_names(zf.namelist())
    if import_name in names:
        return []
    key = f"components.{component}.import_name"
    if not names:
        return [CheckFailure(wheel.name, key, f"the wheel holds no {import_name}, nor any other package or module; "
                                              f"make the project's build include its package")]
    # The name most like the component's first (import names differ from project names by case and dashes).
    likely = sorted(names, key=lambda n: (n.lower() != component.lower().replace("-", "_"), n.lower()))
    return [CheckFailure(wheel.name, key, f"the wheel holds no {import_name}; it holds {', '.join(sorted(names))}; "
                                          f"set import_name: {likely[0]}")]


def check_kind(wheel: Path, kind: str, *, component: str) -> list[CheckFailure]:
    """A python-pure component's wheel holds no extension module and is tagged py3-none-any; a
    python-native one's holds an extension module. Release.yaml's `kind` decides the cells (one
    pure cell, or one per Python): a wrong kind would drop or multiply them without a word."""
    with zipfile.ZipFile(wheel) as zf:
        found = extension_modules(zf.namelist())
    tags = ", ".join(sorted(str(t) for t in parse_wheel_filename(wheel.name)[3]))
    key = f"components.{component}.kind"
    if kind == "python-pure" and found:
        shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
        return [CheckFailure(wheel.name, key, f"python-pure, but the wheel holds extension module"
                                              f"{'s' if len(found) > 1 else ''} {shown}; set kind: python-native")]
    if kind == "python-pure" and tags != "py3-none-any":
        return [CheckFailure(wheel.name, key, f"python-pure, but the wheel is tagged {tags}, not py3-none-any; "
                                              f"set kind: python-native, or make the project build a pure wheel")]
    if kind == "python-native" and not found:
        return [CheckFailure(wheel.name, key, f"python-native, but the wheel holds no extension module (tagged "
                                              f"{tags}); set kind: python-pure")]
    return []


def kernel_device_code(wheel: Path, component: Component, variant: Variant,
                       toolchain: Toolchain) -> dict[str, DeviceCode] | None:
    """The device code of each kernel-bearing binary of a CUDA cell's wheel (wheel_device_code),
    read with its toolkit's cuobjdump; None when the cell has no kernels to read (a CPU variant,
    a component without CUDA kernels) or the toolkit has no cuobjdump."""
    if not component.cuda_kernels:
        return None
    read = toolkit_device_code(variant, toolchain)
    return wheel_device_code(wheel, read) if read else None


def toolkit_device_code(variant: Variant, toolchain: Toolchain | None) -> Callable[[Path], DeviceCode] | None:
    """How a CUDA variant's binaries are read: its toolkit's cuobjdump (only the toolkit that
    built them reads their fatbins); None for a CPU variant or a toolkit without cuobjdump."""
    if not (variant.is_cuda and toolchain and toolchain.cuda and toolchain.cuda.cuobjdump):
        return None
    from shipyard.host.toolchains.cuobjdump import cuda_device_code

    cuobjdump = toolchain.cuda.cuobjdump
    return lambda path: cuda_device_code(path, cuobjdump)


def check_cell_wheel(wheel: Path, release: Release, cell: Cell, component: Component, variant: Variant,
                     toolchain: Toolchain, device_code: Mapping[str, DeviceCode] | None = None) -> list[CheckFailure]:
    """Every rule that applies to `cell`'s built wheel. `device_code` is what kernel_device_code
    read from its binaries (relabelling leaves them as they are), read here when not given."""
    failures = check_console_scripts(wheel, component.console_scripts, component=component.name)
    if component.import_name:
        failures += check_import_name(wheel, component.import_name, component=component.name)
    # One line for a wrong kind: the platform tag it implies is then wrong too, and says less.
    kind = check_kind(wheel, component.kind, component=component.name)
    if cell.is_pure:
        return failures + kind + check_size(wheel, release.wheel_size_budget_mb(None)) + check_vendored_libraries(
            wheel, component.vendored_libraries, component=component.name)
    platform = release.platforms[cell.platform]
    labels = labelled_platform_tags(platform.wheel_platform_tag)
    failures += kind or check_platform_tag(wheel, {f"{cell.interpreter_tags}-{tag}" for tag in labels})
    if cell.is_abi3 and not kind:
        failures += [CheckFailure(wheel.name, f"components.{component.name}.limited_api", problem)
                     for problem in abi3_problems(wheel, cell.limited_api)]
    failures += check_size(wheel, release.wheel_size_budget_mb(variant))
    if component.kind == "python-native" and platform.os == "linux":
        failures += check_shared_libraries(wheel, policy_of(platform.wheel_platform_tag))
        # A CUDA variant's kernels bring the toolkit's runtime with them (never the driver).
        cudart = ("libcudart",) if variant.is_cuda and component.cuda_kernels else ()
        failures += check_vendored_libraries(wheel, component.vendored_libraries, component=component.name,
                                             implied=cudart)
        if device_code is None:
            device_code = kernel_device_code(wheel, component, variant, toolchain)
        if device_code is not None:
            failures += check_device_code(wheel.name, variant.archs, device_code.values())
    return failures
