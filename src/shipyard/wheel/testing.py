"""Test a wheel as a user gets it: a fresh venv, `pip install` from the variant's index by
name, then the component's own tests against the installed package, reported per feature.

Gating: a failing test of a stable feature (or an unmarked test) fails the cell; beta and
prototype failures are recorded with their status and do not.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name, parse_wheel_filename

from shipyard import command
from shipyard.errors import ToolError
from shipyard.toolchains.discover import Interpreter

UNMARKED = "(unmarked)"


@dataclass(frozen=True)
class FeatureOutcome:
    id: str
    status: str  # stable / beta / prototype
    passed: int
    failed: int
    skipped: int
    skip_reasons: tuple[str, ...] = ()

    @property
    def result(self) -> str:
        if self.failed:
            return "failed"
        if self.passed:
            return "passed"
        return "skipped" if self.skipped else "not-run"

    @property
    def blocks_release(self) -> bool:
        return self.failed > 0 and self.status == "stable"


@dataclass(frozen=True)
class TestRun:
    installed: str  # the version pip resolved, e.g. 1.7.0+cu118
    features: tuple[FeatureOutcome, ...]
    seconds: float
    log_tail: str = ""
    problems: tuple[str, ...] = field(default=())  # why the cell failed, when it did

    @property
    def passed(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, object]:
        return {
            "result": "passed" if self.passed else "failed",
            "installed": self.installed,
            "seconds": round(self.seconds, 2),
            "problems": list(self.problems),
            "features": {f.id: {"status": f.status, "result": f.result, "passed": f.passed,
                                "failed": f.failed, "skipped": f.skipped,
                                "skip_reasons": list(f.skip_reasons)} for f in self.features},
        }


def requires_dist(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        lines = zf.read(name).decode("utf-8").splitlines()
    return [Requirement(line.split(":", 1)[1].strip()) for line in lines if line.startswith("Requires-Dist:")]


def ensure_wheelhouse(interpreter: Interpreter, requirements: Sequence[str], state: Path) -> Path:
    """Third-party wheels (numpy, pytest, …) for `interpreter`, downloaded once from PyPI."""
    wanted = sorted(set(requirements))
    tag = hashlib.sha256("\n".join(wanted).encode()).hexdigest()[:12]
    house = state / "wheelhouse" / f"{interpreter.version}-{tag}"
    if not (house / ".complete").exists():
        house.mkdir(parents=True, exist_ok=True)
        if wanted:
            command.run([interpreter.path, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                         "--only-binary", ":all:", "--dest", house, *wanted], timeout=1800,
                        what=f"download test dependencies for Python {interpreter.version}")
        (house / ".complete").write_text("\n".join(wanted))
    return house


def _without_pip_settings() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def _test_requirements(tests_dir: Path) -> list[str]:
    file = tests_dir / "requirements.txt"
    lines = file.read_text().splitlines() if file.is_file() else []
    reqs = [ln.split("#", 1)[0].strip() for ln in lines]
    return ["pytest>=7"] + [r for r in reqs if r]


def run_component_tests(*, wheel: Path, variant_index: Path, interpreter: Interpreter, tests_dir: Path,
                        gating: Mapping[str, str], other_features: Sequence[str] = (), source_dir: Path,
                        state: Path, work: Path,
                        local_projects: set[NormalizedName], timeout: float = 1800) -> TestRun:
    """Install the wheel's project by name from `variant_index` into a fresh venv of
    `interpreter` and run `tests_dir` against it. `gating` maps feature id -> status."""
    import time

    start = time.monotonic()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    name, version, _, _ = parse_wheel_filename(wheel.name)
    expected = str(version)
    runtime_deps = [str(r) for r in requires_dist(wheel)
                    if canonicalize_name(r.name) not in local_projects
                    and (r.marker is None or "extra" not in str(r.marker))]
    house = ensure_wheelhouse(interpreter, runtime_deps + _test_requirements(tests_dir), state)
    venv = work / "venv"
    python = venv / "bin" / "python"
    command.run([interpreter.path, "-m", "venv", venv], what=f"test venv for Python {interpreter.version}")
    pip = [python, "-m", "pip", "--disable-pip-version-check", "install", "--quiet"]
    # Only the variant index and the local wheelhouse: no pip.conf indexes, find-links or constraints.
    isolated = _without_pip_settings()
    command.run([*pip, "--no-index", "--find-links", house, *_test_requirements(tests_dir)], timeout=900,
                env=isolated, what="install test requirements")
    # The project by name from the variant index: resolution is what a user gets.
    command.run([*pip, "--index-url", variant_index.resolve().as_uri(), "--find-links", house, str(name)],
                timeout=900, env=isolated, what=f"pip install {name} from {variant_index}")
    installed = command.run([python, "-c", f"import importlib.metadata as m; print(m.version({str(name)!r}))"]
                            ).stdout.strip()
    problems: list[str] = []
    if installed != expected:
        problems.append(f"pip resolved {name} {installed} from {variant_index}, expected {expected}: "
                        f"the wrong variant would reach users")
    copied = work / "tests"
    shutil.copytree(tests_dir, copied, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    report = work / "feature-report.json"
    plugin_dir = resources.files("shipyard.resources").joinpath("pytest_plugin")
    env = {"PYTHONPATH": str(plugin_dir), "SHIPYARD_FEATURE_REPORT": str(report), "PYTHONDONTWRITEBYTECODE": "1",
           "SHIPYARD_OTHER_FEATURES": ",".join(sorted(other_features)),
           # For tests that build native code from sources (e.g. Windows executables under wine).
           "SHIPYARD_COMPONENT_SOURCE": str(source_dir)}
    try:
        result = command.run([python, "-m", "pytest", copied, "-p", "shipyard_feature_report",
                              "--import-mode=importlib", "-q", "-rs", "-p", "no:cacheprovider"],
                             cwd=work, extra_env=env, timeout=timeout, check=False, what="component tests")
        log_tail = "\n".join(result.output.splitlines()[-30:])
    except ToolError as exc:
        log_tail = str(exc)
    if not report.is_file():
        problems.append(f"the tests did not run to completion: {log_tail[-1500:]}")
        return TestRun(installed, (), time.monotonic() - start, log_tail, tuple(problems))
    outcomes = _feature_outcomes(json.loads(report.read_text()), gating)
    for outcome in outcomes:
        if outcome.blocks_release:
            label = "tests without a feature marker" if outcome.id == UNMARKED else f"stable feature {outcome.id}"
            problems.append(f"{label} failed ({outcome.failed} test{'s' if outcome.failed > 1 else ''})")
    return TestRun(installed, outcomes, time.monotonic() - start, log_tail, tuple(problems))


def _feature_outcomes(report: dict, gating: Mapping[str, str]) -> tuple[FeatureOutcome, ...]:
    status_of = dict(gating)
    tally: dict[str, dict[str, int]] = {fid: {"passed": 0, "failed": 0, "skipped": 0} for fid in status_of}
    reasons: dict[str, list[str]] = {}
    for entry in report["tests"].values():
        outcome = "failed" if entry["outcome"] in ("failed", "error") else entry["outcome"]
        for fid in entry.get("features") or [UNMARKED]:
            tally.setdefault(fid, {"passed": 0, "failed": 0, "skipped": 0})[outcome] += 1
            if outcome == "skipped" and entry.get("reason"):
                reasons.setdefault(fid, []).append(entry["reason"])
    # Unknown or unmarked feature ids gate like stable ones: nobody declared them lesser.
    return tuple(FeatureOutcome(fid, status_of.get(fid, "stable"), t["passed"], t["failed"], t["skipped"],
                                tuple(sorted(set(reasons.get(fid, [])))))
                 for fid, t in tally.items())


def console_script_problems(venv: Path, scripts: Sequence[str], timeout: float = 120) -> list[str]:
    """Each declared console script is installed in `venv` and `<script> --help` exits 0; what
    is wrong otherwise, one line per script."""
    problems = []
    for script in scripts:
        exe = venv / "bin" / script
        if not exe.is_file():
            problems.append(f"console script {script} is not installed (release.yaml declares it)")
            continue
        result = command.run([exe, "--help"], check=False, timeout=timeout, what=f"{script} --help")
        if result.returncode != 0:
            tail = "\n".join(result.output.strip().splitlines()[-5:])
            problems.append(f"console script {script}: `{script} --help` exited {result.returncode}: {tail}")
    return problems
