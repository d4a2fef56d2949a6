"""What a Linux wheel needs of glibc, in one line per wheel: auditwheel's own verdict (`auditwheel show`:
the policy the wheel is consistent with) and the newest GLIBC_ and GLIBCXX_ symbol versions each of its
binaries needs. The build prints it for every wheel of a zig-route platform (manylinux2014,
docs/glibc.md), whose promise no sysroot was proved for, and refuses a wheel auditwheel finds newer than
its promise (the repair's `--only-plat` should already have)."""

from __future__ import annotations

import re
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from shipyard.errors import ToolError
from shipyard.host.toolchains.glibc import glibc_required, glibc_tuple, symbol_version_required
from shipyard.plumbing import command
from shipyard.wheel.auditwheel_worker import AuditwheelWorkers
from shipyard.wheel.checks import CheckFailure
from shipyard.wheel.repair import AUDITWHEEL

_CONSISTENT = re.compile(r'consistent with the following platform tag:\s*"([^"]+)"')
_POLICY_GLIBC = re.compile(r"^manylinux_(\d+)_(\d+)_")


@dataclass(frozen=True)
class BinaryNeeds:
    """The newest symbol versions one binary of a wheel needs ('' for none)."""

    member: str  # its path in the wheel
    glibc: str
    glibcxx: str


@dataclass(frozen=True)
class GlibcVerdict:
    wheel: str
    policy: str  # auditwheel's: manylinux_2_17_x86_64 ('' when its output named none)
    binaries: tuple[BinaryNeeds, ...]

    @property
    def policy_glibc(self) -> str:
        """The glibc auditwheel's policy stands for ('2.17'), '' when unknown."""
        match = _POLICY_GLIBC.match(self.policy)
        return f"{match.group(1)}.{match.group(2)}" if match else ""

    def line(self) -> str:
        needs = ", ".join(f"{b.member} GLIBC_{b.glibc or '-'} GLIBCXX_{b.glibcxx or '-'}" for b in self.binaries)
        return f"{self.wheel}: auditwheel: consistent with {self.policy or '?'}; needs {needs or 'no binary'}"

    def problem(self, promised_glibc: str) -> CheckFailure | None:
        """A failure when auditwheel or a binary needs a newer glibc than the platform promises."""
        newest = [v for v in (self.policy_glibc, *(b.glibc for b in self.binaries)) if v]
        if not self.policy or any(glibc_tuple(v) > glibc_tuple(promised_glibc) for v in newest):
            return CheckFailure(self.wheel, "glibc promise", f"the platform promises glibc {promised_glibc}, "
                                f"and the wheel needs more ({self.line()})")
        return None


def glibc_verdict(wheel: Path, auditwheel: AuditwheelWorkers | None = None) -> GlibcVerdict:
    """`auditwheel show`'s verdict on `wheel` (through the build's auditwheel processes when given)
    and the symbol versions each of its ELF members needs."""
    argv: list[object] = ["show", wheel]
    try:
        shown = auditwheel.run(argv, extra_env={}, timeout=300, what=f"auditwheel show {wheel.name}") if auditwheel \
            else command.run([*AUDITWHEEL, *argv], timeout=300, what=f"auditwheel show {wheel.name}").stdout
    except ToolError as exc:
        shown = exc.output or ""
    match = _CONSISTENT.search(" ".join(shown.split()))
    binaries = []
    with zipfile.ZipFile(wheel) as zf, tempfile.TemporaryDirectory() as tmp:
        for member in sorted(n for n in zf.namelist() if not n.endswith("/") and zf.read(n)[:4] == b"\x7fELF"):
            path = Path(zf.extract(member, tmp))
            binaries.append(BinaryNeeds(member, glibc_required(path), symbol_version_required(path, "GLIBCXX")))
    return GlibcVerdict(wheel.name, match.group(1) if match else "", tuple(binaries))
