"""What the pipeline's end-to-end tests share: a clone of this checkout's HEAD with a fixture
commit on top (the release pointed at the servers a test starts), one `shipyard ci run` of it,
and what the run left: its job table and the artifacts its jobs uploaded."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import docker
from support.publish_servers import Registry, Site, docker_registry, publish_site, static_server
from support.shipyard_index import shipyard_index
from support.shipyard_process import run_shipyard, without_shipyard_settings

from shipyard.host import docker_base
from shipyard.image.bases import local_python_image
from shipyard.local_ci.act_run import dotenv_line

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "pipeline"  # the small release: one pure package, wheels only
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "fixture", "GIT_AUTHOR_EMAIL": "fixture@example.invalid",
                "GIT_COMMITTER_NAME": "fixture", "GIT_COMMITTER_EMAIL": "fixture@example.invalid"}
# The jobs of a Linux-only local run that act cannot start here, whatever the release.
NOT_RUNNABLE = "not runnable here"


def clone_checkout(dest: Path) -> Path:
    """A clone of this checkout's HEAD: what `shipyard ci run` runs is a commit, never the work tree."""
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(dest)], check=True, timeout=300)
    return dest


def fresh_repository(dest: Path) -> Path:
    """An empty git repository, as a user's project starts: no shipyard source in it."""
    dest.mkdir(parents=True)
    subprocess.run(["git", "init", "--quiet", "--initial-branch", "main", str(dest)], check=True, timeout=60)
    return dest


def commit(repo: Path, message: str, when: str) -> str:
    """Commit everything in `repo` at `when` (ISO 8601, UTC): a nightly's version is its commit's date."""
    env = {**os.environ, **GIT_IDENTITY, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    subprocess.run(["git", "add", "-A"], cwd=repo, env=env, check=True, timeout=60)
    subprocess.run(["git", "commit", "--quiet", "--allow-empty", "-m", message], cwd=repo, env=env, check=True,
                   timeout=60)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True,
                          timeout=60).stdout.strip()


def regenerate_workflows(repo: Path) -> None:
    """`shipyard ci generate` in `repo`: its plan job runs `ci check` against the committed release."""
    run_shipyard("--root", repo, "ci", "generate", check=True)


def lay_fixture_release(repo: Path, *, broken: bool) -> None:
    """The small fixture release (tests/fixtures/pipeline) in `repo`, as committed: its target is the
    project's own devpi, off this machine (fixture_stand_in_targets maps it to one here); `broken`:
    the stable feature's test fails."""
    for name in ("release.yaml", "feature_status.yaml"):
        shutil.copy(FIXTURE / name, repo / name)
    shutil.rmtree(repo / "library" / "fixpipe", ignore_errors=True)
    shutil.copytree(FIXTURE / "library" / "fixpipe", repo / "library" / "fixpipe")
    if broken:
        test = repo / "library" / "fixpipe" / "tests" / "test_fixpipe.py"
        test.write_text(test.read_text().replace("== 42", "== 43"))
    regenerate_workflows(repo)


def fixture_stand_in_targets(dest: Path, devpi_url: str) -> Path:
    """A local targets file (the shape of release.yaml's `publish:`) mapping the fixture release's
    target to the devpi at `devpi_url`, under the same credential variables."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("publish:\n  wheels-staging:\n    kind: devpi\n"
                    f"    url: {devpi_url}/\n"
                    "    username_env: SHIPYARD_PYPI_USERNAME\n    password_env: SHIPYARD_PYPI_PASSWORD\n"
                    "    default_variant: cpu\n")
    return dest


@dataclass
class PipelineRun:
    """One `shipyard ci run`: its exit status, what it printed, its job table (jobs.json) and folder."""

    returncode: int
    output: str
    jobs: list[dict]
    folder: Path

    def results(self) -> dict[str, str]:
        """{job name: result} of every job of the table."""
        return {row["name"]: row["result"] for row in self.jobs}

    def ran(self) -> dict[str, str]:
        """{job name: result} of the jobs that can run here."""
        return {row["name"]: row["result"] for row in self.jobs if row["result"] != NOT_RUNNABLE}

    def table(self) -> str:
        return "\n".join(f"{r['name']}  {r['container']}  {r['seconds']}  {r['result']} {r['reason']}"
                         for r in self.jobs)

    def printed(self) -> Iterator[tuple[str, str, str]]:
        """(job name, step, line) of every line the jobs' steps printed, from act's log."""
        for line in (self.folder / "act.log.jsonl").read_text().splitlines():
            record = json.loads(line) if line.startswith("{") else {}
            if record.get("raw_output"):
                yield (str(record.get("job", "")).split("/", 1)[-1].strip(), str(record.get("step", "")),
                       str(record.get("msg", "")).rstrip("\n"))

    def step_output(self, job: str, step: str) -> str:
        """What step `step` of the job named `job` printed."""
        return "\n".join(line for name, printed_by, line in self.printed() if (name, printed_by) == (job, step))

    def failed_jobs_log(self, lines: int = 60) -> str:
        """The last `lines` lines each failed job printed, each after its step: for a failure
        message, since act's log goes with the run folder (a suite on a tmpfs drops it)."""
        failed = {row["name"] for row in self.jobs if row["result"] == "failure"}
        printed: dict[str, list[str]] = {}
        for name, step, line in self.printed():
            if name in failed:
                printed.setdefault(name, []).append(f"[{step}] {line}")
        return "".join(f"\n--- {name}, its last {lines} lines:\n" + "\n".join(out[-lines:])
                       for name, out in printed.items())

    def steps_printing(self, text: str) -> list[tuple[str, str]]:
        """(job, step) of every step that printed `text`."""
        return [(name, step) for name, step, line in self.printed() if text in line]

    def artifact(self, name: str, dest: Path) -> Path:
        """The artifact `name` a job uploaded to act's artifact server, unpacked into `dest`."""
        [archive] = [p for p in (self.folder / "artifacts").rglob(f"{name}.zip")]
        with zipfile.ZipFile(archive) as zipped:
            zipped.extractall(dest)
        return dest


def run_pipeline(repo: Path, work: Path, secrets: dict[str, str], *args: str, timeout: float = 3600,
                 targets: Path | None = None) -> PipelineRun:
    """`shipyard ci run ARGS` in `repo`, its secrets from a 0600 file (never the environment or
    the command line), its run folder `work`, shipyard for its jobs from a loopback index holding
    the wheel of this checkout; `targets`: a local targets file, whose stand-ins the publish job
    publishes to (`shipyard --targets FILE ci run`)."""
    work.parent.mkdir(parents=True, exist_ok=True)
    secret_file = work.parent / f"{work.name}.secrets"
    secret_file.touch(mode=0o600)
    # act's dotenv format: a PEM key's newlines and a password's `$` escaped inside quotes
    secret_file.write_text("".join(dotenv_line(name, value) for name, value in secrets.items()))
    # Every job installs shipyard from an index, as in a user's repository; this one holds the
    # wheel of the checkout the run is of.
    with shipyard_index(REPO, work.parent / "shipyard-index") as index:
        done = run_shipyard(*(("--targets", targets) if targets else ()), "ci", "run", "--work", work,
                            "--secret-file", secret_file, "--var", f"SHIPYARD_INDEX_URL={index}", *args,
                            cwd=repo, env=without_shipyard_settings(), timeout=timeout)
    output = done.stdout + done.stderr
    for name, value in secrets.items():
        if not name.endswith("_USERNAME"):  # a user name is no secret (and may be a common word)
            assert value not in output, f"the value of {name} was printed"
    table = work / "jobs.json"
    jobs = json.loads(table.read_text()) if table.is_file() else []
    return PipelineRun(done.returncode, output, jobs, work)


@dataclass
class EmberPipeline:
    """ember's release on a clone of this checkout, its fixture commit pointing release.yaml at
    servers started here: `repo` to run, the `secrets` its publish job needs, the servers."""

    repo: Path
    secrets: dict[str, str]
    site: Site
    registry: Registry
    conda_forge_stand_in: str  # the bootstrap channel's URL, in conda.channels
    repository: str  # images.repository of this run: its images, built in this machine's engine
    revision: str  # the fixture commit the run builds (its images' OCI revision label)


# images.repository of the ember pipeline's runs (the docker job's name says it: docker-ember-e2e-…)
PIPELINE_IMAGES = "ember-e2e"


@contextmanager
def ember_pipeline(base: Path, bootstrap_channel: Path, when: str) -> Iterator[EmberPipeline]:
    """Start devpi, the static tree, the conda channel server, a registry and a web server over
    the bootstrap channel in `base`; clone this checkout and commit, at `when`, its release.yaml
    pointed at them: the targets, conda.channels (the bootstrap channel standing in for
    conda-forge) and the images' bases (stand-ins made here under names of this run, which the
    docker job's pull step finds in the engine, as a hosted runner pulls Docker Hub's; the
    suite's other image builds never see them), and the images' repository renamed to one of this
    run (`repository`): the docker job builds in this machine's engine, where the suite's own ember
    images hold the tags `ember:1.7.0-cpu-runtime` and `ember:nightly-cpu-runtime`, and a build of
    the same tags here moved them away from the suite's image while its tests read them.
    Everything is stopped and removed after, the run's images too."""
    client = docker.from_env(timeout=600)
    bases = stand_in_bases(client, base.name)
    repository = PIPELINE_IMAGES
    try:
        # The registry's user is a secret of the run, and every secret's value must be absent from
        # what `ci run` prints: the default user, "shipyard", is in every line that names a command.
        with publish_site(base) as site, docker_registry(base / "registry", user="e2e-pusher") as registry, \
                static_server(bootstrap_channel) as conda_forge_stand_in:
            password = site.devpi.add_user("ember")
            repo = clone_checkout(base / "repo")
            site.release_yaml(repo, registry=registry.address)
            release = repo / "release.yaml"
            text = release.read_text()
            for old, new in (("channels: [conda-forge]", f"channels: [{conda_forge_stand_in}]"),
                             ("base_image: debian:bookworm-slim\n", f"base_image: {bases[0]}\n"),
                             ("python_image: python:3.11-slim-bookworm\n", f"python_image: {bases[1]}\n"),
                             ("  repository: ember\n", f"  repository: {repository}\n")):
                assert old in text, f"release.yaml no longer holds {old!r}"
                text = text.replace(old, new)
            release.write_text(text)
            regenerate_workflows(repo)
            revision = commit(
                repo, "fixture: publish to this run's servers; the bootstrap channel stands in for conda-forge", when)
            secrets = {"SHIPYARD_PYPI_USERNAME": "ember", "SHIPYARD_PYPI_PASSWORD": password,
                       "SHIPYARD_CONDA_TOKEN": site.token, "SHIPYARD_REGISTRY_USERNAME": registry.user,
                       "SHIPYARD_REGISTRY_PASSWORD": registry.password}
            yield EmberPipeline(repo, secrets, site, registry, conda_forge_stand_in, repository, revision)
    finally:
        for tag in bases:
            client.images.remove(tag, noprune=True)
        for image in client.images.list(name=repository):
            for tag in image.tags:  # its tags only: an image other tags name stays theirs
                client.images.remove(tag, noprune=not all(t.startswith(f"{repository}:") for t in image.tags))


def stand_in_bases(client: docker.DockerClient, name: str) -> tuple[str, str]:
    """What images.base_image and python_image stand for, made here under names of this run: the
    debootstrapped bookworm, and an image holding this host's Python 3.11 at /usr/local (where the
    official python image has it, and where release.yaml's python_prefix says it is)."""
    suffix = "".join(c if c.isalnum() else "-" for c in name.lower())
    base = f"shipyard-e2e/debian:bookworm-slim-{suffix}"
    client.images.get(docker_base.bootstrap_base_image()).tag(base)
    python = local_python_image("3.11", prefix="/usr/local", tag=f"shipyard-e2e/python:3.11-slim-bookworm-{suffix}")
    return base, python
