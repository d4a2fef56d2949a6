"""Solve and install conda packages into a fresh prefix with py-rattler, in a process of its own.

`solve_and_install()` starts `python -m shipyard.conda.solve_install`, which reads an
`InstallRequest` as JSON on stdin and prints an `InstallResult`. A child process because
py-rattler's install once crashed its interpreter at exit (docs/research/conda/REPORT.md): such
a crash must fail one test cell, not the run, and a cell's verdict comes from the result the
child printed and its exit status together.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel
from rattler import Channel, Gateway, GenericVirtualPackage, PackageName, Version, VirtualPackage, install, solve
from rattler.exceptions import SolverError
from rattler.package import BuildString

from shipyard.plumbing import command
from shipyard.redaction import redact


class InstallRequest(BaseModel):
    channels: list[str]  # in priority order; a name found in one channel is taken only from it
    specs: list[str]  # MatchSpecs: "ember ==1.7.0 py311_cpu_h1234abc_0", "python 3.11.*"
    prefix: str
    cache_dir: str  # repodata and package cache of this test run: never the user's
    cuda_driver: str | None = None  # a simulated __cuda virtual package (its version), else none


class InstalledPackage(BaseModel):
    name: str
    version: str
    build: str
    sha256: str
    url: str

    @property
    def spec(self) -> str:
        return f"{self.name}={self.version}={self.build}"


class InstallResult(BaseModel):
    packages: list[InstalledPackage] = []
    unsatisfiable: str | None = None  # the solver's explanation when no environment satisfies the specs
    error: str | None = None  # any other failure (a channel that cannot be read, a broken package)

    def named(self, name: str) -> InstalledPackage | None:
        return next((p for p in self.packages if p.name == name), None)


def solve_and_install(request: InstallRequest, *, timeout: float = 900) -> InstallResult:
    """Solve `request.specs` from `request.channels` and install the result into `request.prefix`
    (which must not exist yet). Unsatisfiable specs are a result, not an exception: tests assert
    that some environments cannot be made."""
    completed = command.run([sys.executable, "-m", "shipyard.conda.solve_install"],
                            input_text=request.model_dump_json(), timeout=timeout, check=False,
                            what=f"solve and install {' '.join(request.specs)}")
    last = completed.stdout.strip().splitlines()[-1:] or [""]
    try:
        result = InstallResult.model_validate_json(last[0])
    except ValueError:
        return InstallResult(error=f"the solver process exited {completed.returncode} without a result: "
                                   f"{completed.output[-1500:]}")
    if completed.returncode != 0 and not result.error:
        result = result.model_copy(update={"error": f"the solver process exited {completed.returncode} "
                                                    f"after installing: {completed.output[-1500:]}"})
    return result


def _virtual_packages(cuda_driver: str | None) -> list[GenericVirtualPackage]:
    """This machine's virtual packages (__glibc, __linux, …) without its __cuda, plus the simulated
    driver when asked: tests decide which driver a solve sees, not the machine they run on."""
    detected = [v.into_generic() for v in VirtualPackage.detect()]
    kept = [v for v in detected if v.name.normalized != "__cuda"]
    if cuda_driver:
        kept.append(GenericVirtualPackage(PackageName("__cuda"), Version(cuda_driver), BuildString("0")))
    return kept


async def _solve_and_install(request: InstallRequest) -> InstallResult:
    cache = Path(request.cache_dir)
    channels = [Channel(url) for url in request.channels]
    try:
        records = await solve(channels, request.specs, gateway=Gateway(cache_dir=cache / "repodata"),
                              virtual_packages=_virtual_packages(request.cuda_driver))
    except SolverError as exc:
        return InstallResult(unsatisfiable=redact(str(exc).strip()))
    await install(records, target_prefix=request.prefix, cache_dir=cache / "pkgs", show_progress=False)
    return InstallResult(packages=[
        InstalledPackage(name=r.name.normalized, version=str(r.version), build=str(r.build),
                         sha256=r.sha256.hex() if r.sha256 else "", url=redact(str(r.url)))
        for r in sorted(records, key=lambda r: r.name.normalized)])


def channels_line(channels: Sequence[str]) -> str:
    """The channels searched, for messages, tokens masked."""
    return ", ".join(redact(url) for url in channels)


def main() -> int:
    request = InstallRequest.model_validate_json(sys.stdin.read())
    try:
        result = asyncio.run(_solve_and_install(request))
    except Exception as exc:  # noqa: BLE001 - reported to the parent as the cell's failure
        result = InstallResult(error=redact(f"{type(exc).__name__}: {exc}"))
    print(result.model_dump_json(), flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    # Skip interpreter finalisation: py-rattler's threads can crash it there (SIGSEGV seen in
    # CI after a complete install), and everything this process had to say is already written.
    os._exit(code)
