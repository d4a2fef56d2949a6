"""Release rules every built wheel must meet. A failure names the wheel and the rule."""

from __future__ import annotations

import json
import re
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from packaging.utils import parse_wheel_filename

from shipyard.cuda_archs import DeviceCode, expected_device_code, ptx_arch, sm_name


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


def _elf_members(zf: zipfile.ZipFile) -> list[str]:
    return [n for n in zf.namelist() if not n.endswith("/") and zf.read(n)[:4] == b"\x7fELF"]


def _needed(path: Path) -> list[str]:
    with path.open("rb") as fh:
        elf = ELFFile(fh)
        out = []
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                out += [t.needed for t in section.iter_tags() if t.entry.d_tag == "DT_NEEDED"]  # type: ignore[attr-defined]
        return out


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


def check_size(wheel: Path, budget_mb: float) -> list[CheckFailure]:
    size = wheel.stat().st_size
    if size > budget_mb * 1024 * 1024:
        return [CheckFailure(wheel.name, "size budget",
                             f"{size / 1048576:.1f} MiB is over the budget of {budget_mb:g} MiB (release.yaml)")]
    return []


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


def check_cuda_archs(wheel: Path, archs: tuple[str, ...],
                     device_code: Callable[[Path], DeviceCode]) -> list[CheckFailure]:
    """The fatbins hold SASS for exactly the arch list, and PTX for its highest arch only.

    The PTX is PyTorch's `+PTX`: it lets a GPU newer than every listed arch JIT-compile the
    kernels. It is implicit: release.yaml lists SASS archs, the highest also ships as PTX.
    """
    expected = expected_device_code(archs)
    ptx = sm_name(ptx_arch(archs))
    found = DeviceCode()
    with zipfile.ZipFile(wheel) as zf, tempfile.TemporaryDirectory() as tmp:
        for member in _elf_members(zf):
            path = Path(zf.extract(member, tmp))
            if _has_fatbin(path):
                found |= device_code(path)
    if not found:
        return [CheckFailure(wheel.name, "CUDA archs", "no CUDA device code (.nv_fatbin) in any binary")]

    def listed(names: frozenset[str]) -> str:
        return ", ".join(sorted(names, key=lambda n: int(re.sub(r"\D", "", n))))

    failures = []
    if expected.sass - found.sass:
        failures.append(CheckFailure(wheel.name, "CUDA archs",
                                     f"missing SASS for {listed(expected.sass - found.sass)}"))
    if found.sass - expected.sass:
        failures.append(CheckFailure(wheel.name, "CUDA archs",
                                     f"SASS for archs not in the list: {listed(found.sass - expected.sass)}"))
    if ptx not in found.ptx:
        failures.append(CheckFailure(wheel.name, "CUDA +PTX",
                                     f"missing PTX for {ptx}, the highest arch of the list; embed it "
                                     f"(-gencode arch=compute_{ptx[3:]},code=compute_{ptx[3:]}) so that newer "
                                     "GPUs can JIT-compile the kernels"))
    if found.ptx - expected.ptx:
        failures.append(CheckFailure(wheel.name, "CUDA +PTX",
                                     f"PTX for {listed(found.ptx - expected.ptx)}: only the highest arch of the "
                                     f"list ({ptx}) ships PTX"))
    return failures
