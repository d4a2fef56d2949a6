"""Run one job of a generated workflow on this machine, its `run:` steps exactly as written.

What GitHub would do around the scripts is done here as GitHub documents it: each script runs as
`bash --noprofile --norc -eo pipefail <file>` (the workflows' `defaults.run.shell: bash`) in the
workspace, with the job's and the step's `env:`, the GITHUB_* variables, and GITHUB_ENV,
GITHUB_PATH and GITHUB_OUTPUT read back after each step. `${{ }}` expressions are substituted
from the matrix entry, the step outputs, the given contexts and secrets (a secret not given is
empty, as on GitHub); an expression this runner does
not know fails the run rather than being guessed.

`uses:` steps fetch from outside, so each has its documented local equivalent:
- actions/checkout: the workspace is a copy of the repository (made by the caller);
- actions/upload-artifact: `path` copied to `<artifacts>/<name>/`;
- actions/download-artifact: every `<artifacts>/<name>/` whose name matches `pattern` (or equals
  `name`) copied to `<path>/<name>/` (one artifact by name: into `<path>/`);
- actions/cache: a miss (nothing restored, nothing saved): the job must work from cold;
- actions/setup-python: this machine's Python of that version put first on PATH.
A failing `run:` step fails the job as on GitHub: its outputs are read, later steps are skipped.
A job `container:` (debian:bookworm) is this machine itself, a Debian 12 host.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shipyard.host.toolchains.discover import discover

_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


@dataclass
class StepResult:
    name: str
    seconds: float
    kind: str  # run | uses


@dataclass
class JobRun:
    steps: list[StepResult] = field(default_factory=list)
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    failed: tuple[str, int] | None = None  # the step that failed the job and its exit status
    output: str = ""  # stdout and stderr of every `run:` step, in order


class JobRunner:
    def __init__(self, workspace: Path, artifacts: Path, matrix: dict[str, str], contexts: dict[str, str],
                 workflow_env: dict[str, str], github: dict[str, str],
                 secrets: dict[str, str] | None = None) -> None:
        self.workspace = workspace
        self.artifacts = artifacts
        self.matrix = matrix
        self.contexts = contexts  # e.g. {"needs.plan.outputs.wheel_pure": "..."}
        self.workflow_env = workflow_env  # already evaluated: the workflow's env for this event
        self.github = github
        self.secrets = secrets or {}
        self.step_outputs: dict[str, dict[str, str]] = {}
        self.extra_env: dict[str, str] = {}
        self.extra_path: list[str] = []

    # --- expressions -------------------------------------------------------------------------
    def _value(self, expr: str) -> str:
        if expr.startswith("matrix."):
            return self.matrix[expr.removeprefix("matrix.")]
        match = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expr)
        if match:
            return self.step_outputs.get(match.group(1), {}).get(match.group(2), "")
        if expr in self.contexts:
            return self.contexts[expr]
        if re.fullmatch(r"secrets\.\w+", expr):
            return self.secrets.get(expr.removeprefix("secrets."), "")
        raise AssertionError(f"the local runner does not evaluate ${{{{ {expr} }}}}")

    def substitute(self, text: Any) -> str:
        return _EXPR.sub(lambda m: self._value(m.group(1)), str(text))

    def condition(self, expr: str) -> bool:
        match = re.fullmatch(r"((?:matrix|steps)\.[\w.-]+)\s*(==|!=)\s*'([^']*)'", expr.strip())
        if not match:
            raise AssertionError(f"the local runner does not evaluate if: {expr}")
        value = self._value(match.group(1))
        return (value == match.group(3)) == (match.group(2) == "==")

    # --- steps -------------------------------------------------------------------------------
    def run_job(self, job: dict[str, Any], *, skip: Collection[str] = (), check: bool = True) -> JobRun:
        """Run the job's steps in order. `skip` names steps the caller stands in for (say, shipyard
        installed in this test's environment). As on GitHub, a failing step fails the job and the
        later steps (whose `if:` asks for success, the default) do not run; with `check` a failure
        raises instead."""
        result = JobRun()
        assert job.get("container", {}).get("image", "debian:bookworm").startswith("debian:bookworm"), \
            "only jobs whose container is Debian 12 (this machine) run here"
        job_env = {k: self.substitute(v) for k, v in (job.get("env") or {}).items()}
        for step in job["steps"]:
            name = step.get("name", step.get("uses", "run"))
            if name in skip or result.failed is not None:
                continue
            if "if" in step and not self.condition(step["if"]):
                continue
            start = time.monotonic()
            if "uses" in step:
                self._uses(step)
                kind = "uses"
            else:
                code, output = self._run(step, job_env)
                result.output += output
                if code != 0:
                    assert not check, f"step {name!r} failed ({code}):\n{output[-8000:]}"
                    result.failed = (name, code)
                kind = "run"
            result.steps.append(StepResult(name, time.monotonic() - start, kind))
        result.outputs = self.step_outputs
        return result

    def _uses(self, step: dict[str, Any]) -> None:
        action = step["uses"].split("@")[0]
        args = {k: self.substitute(v) for k, v in (step.get("with") or {}).items()}
        if action == "actions/checkout":
            assert (self.workspace / "release.yaml").is_file()  # the caller's copy of the repository
        elif action == "actions/upload-artifact":
            # One path per line; the artifact's root is their deepest common folder, as GitHub's.
            sources = [self.workspace / line.strip() for line in args["path"].splitlines() if line.strip()]
            for source in sources:
                assert source.exists(), f"upload-artifact: {source} does not exist"
            target = self.artifacts / args["name"]
            assert not target.exists(), f"artifact {args['name']} uploaded twice"
            if len(sources) == 1 and sources[0].is_dir():
                shutil.copytree(sources[0], target, symlinks=False)
            else:
                root = Path(os.path.commonpath([s if s.is_dir() and len(sources) > 1 else s.parent for s in sources]))
                for source in sources:
                    dest = target / source.relative_to(root)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    if source.is_dir():
                        shutil.copytree(source, dest, symlinks=False, dirs_exist_ok=True)
                    else:
                        shutil.copy2(source, dest)
        elif action == "actions/download-artifact":
            base = self.workspace / args.get("path", ".")
            if "name" in args:
                shutil.copytree(self.artifacts / args["name"], base, dirs_exist_ok=True)
            else:
                names = sorted(p.name for p in self.artifacts.iterdir() if fnmatch.fnmatchcase(p.name, args["pattern"]))
                assert names, f"download-artifact: no artifact matches {args['pattern']}"
                for name in names:
                    shutil.copytree(self.artifacts / name, base / name)
        elif action == "actions/cache":
            pass  # a miss: nothing restored; the post-job save is not run
        elif action == "actions/setup-python":
            interpreter = discover().interpreter(args["python-version"])
            assert interpreter is not None, f"no Python {args['python-version']} on this machine"
            self.extra_path.insert(0, str(Path(interpreter.path).parent))
        else:
            raise AssertionError(f"no local equivalent for {action}")

    def _run(self, step: dict[str, Any], job_env: dict[str, str]) -> tuple[int, str]:
        runner_temp = self.workspace.parent / "runner-temp"
        runner_temp.mkdir(exist_ok=True)
        files = {name: runner_temp / f"{name.lower()}-{len(self.step_outputs)}-{time.monotonic_ns()}"
                 for name in ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT")}
        for path in files.values():
            path.write_text("")
        script = runner_temp / "step.sh"
        script.write_text(self.substitute(step["run"]))
        env = {**os.environ, **self.workflow_env, **self.github, **job_env, **self.extra_env,
               **{k: self.substitute(v) for k, v in (step.get("env") or {}).items()},
               **{k: str(v) for k, v in files.items()}, "RUNNER_TEMP": str(runner_temp)}
        env.pop("VIRTUAL_ENV", None)
        env["PATH"] = os.pathsep.join([*self.extra_path, env["PATH"]])
        shell = step.get("shell", "bash")
        assert shell == "bash", f"step {step.get('name')}: only bash steps run here (got {shell})"
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=self.workspace,
                              env=env, capture_output=True, text=True, timeout=1200)
        for line in files["GITHUB_PATH"].read_text().splitlines():
            if line.strip():
                self.extra_path.insert(0, line.strip())
        for line in files["GITHUB_ENV"].read_text().splitlines():
            if "=" in line:
                key, value = line.split("=", 1)
                self.extra_env[key] = value
        if "id" in step:  # a failing step's outputs count too, as on GitHub
            outputs = self.step_outputs.setdefault(step["id"], {})
            for line in files["GITHUB_OUTPUT"].read_text().splitlines():
                if "=" in line:
                    key, value = line.split("=", 1)
                    outputs[key] = value
        return done.returncode, done.stdout + done.stderr


def copy_repository(repo: Path, target: Path) -> Path:
    """What actions/checkout leaves: the repository's files, without local build state."""
    ignored = shutil.ignore_patterns(".venv", "dist", ".shipyard", ".nox", "__pycache__", "*.egg-info", ".git",
                                     "build", ".pytest_cache", ".mypy_cache", ".ruff_cache")
    shutil.copytree(repo, target, ignore=ignored, symlinks=True)
    return target
