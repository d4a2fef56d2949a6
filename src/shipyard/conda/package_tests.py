"""Test a conda package as a user gets it: a real solver (py-rattler) makes a fresh prefix from
the served channels, asking for the exact build, and the component's own tests then run with
that prefix's Python, judged per feature by the same gate as wheels (testing/verdict.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement

from shipyard.conda.names import conda_name
from shipyard.conda.solve_install import InstallRequest, InstallResult, channels_line, solve_and_install
from shipyard.release.pytest_selection import PytestSelection
from shipyard.testing.runner import Installed, component_test_requirements, run_installed_tests
from shipyard.testing.verdict import FeatureGate, TestRun


@dataclass(frozen=True)
class BuiltPackage:
    """A package file as the build wrote it; what a solve must install, byte for byte."""

    name: str
    version: str
    build: str
    sha256: str

    @property
    def exact_spec(self) -> str:
        return f"{self.name} =={self.version} {self.build}"


def conda_specs(requirements: Sequence[str]) -> list[str]:
    """PEP 508 requirements (a tests folder's requirements.txt) as conda MatchSpecs: the
    bootstrap channel names its repacks as conda-forge does (conda/names.py)."""
    specs = []
    for text in requirements:
        req = Requirement(text)
        specs.append(f"{conda_name(req.name)} {req.specifier}".strip())
    return specs


def run_conda_package_tests(package: BuiltPackage, *, python: str, channels: Sequence[str], tests_dir: Path,
                       gate: FeatureGate, other_features: Sequence[str] = (), source_dir: Path, state: Path,
                       work: Path, ports: range | None = None, timeout: float = 1800,
                       selection: PytestSelection | None = None) -> TestRun:
    """Install `package` (exactly that build) with Python `python` and the tests' requirements into a
    fresh prefix under `work`, solved from `channels`, then run `tests_dir` with the prefix's Python."""
    request = InstallRequest(channels=list(channels), prefix=str(work / "prefix"),
                             specs=[package.exact_spec, f"python {python}.*",
                                    *conda_specs(component_test_requirements(tests_dir))],
                             cache_dir=str(state / "conda-test-cache"))

    def install() -> Installed:
        result = solve_and_install(request)
        problem = install_problem(package, request, result)
        if problem:
            return Installed(None, "", (problem,))
        installed = result.named(package.name)
        assert installed is not None
        return Installed(work / "prefix" / "bin" / "python", f"{installed.version} {installed.build}")

    return run_installed_tests(install, "rattler", tests_dir=tests_dir, gate=gate, other_features=other_features,
                               source_dir=source_dir, state=state, work=work, ports=ports, timeout=timeout,
                               selection=selection)


def install_problem(package: BuiltPackage, request: InstallRequest, result: InstallResult) -> str | None:
    """Why the solve did not give a user exactly the tested bytes, or None."""
    searched = channels_line(request.channels)
    if result.unsatisfiable:
        return f"cannot install {' '.join(request.specs)} from {searched}: {result.unsatisfiable}"
    if result.error:
        return f"installing from {searched} failed: {result.error}"
    installed = result.named(package.name)
    if installed is None:
        return f"the solver did not install {package.name} from {searched}"
    if installed.build != package.build or installed.sha256 != package.sha256:
        return (f"the solver installed {installed.spec} (sha256 {installed.sha256[:12]}) from {searched}, "
                f"expected {package.name}={package.version}={package.build} (sha256 {package.sha256[:12]}): "
                f"users would not get the tested bytes")
    return None
