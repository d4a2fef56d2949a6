"""`shipyard ci run`: the committed workflows under act, on bare runners built here.

Fast tests read what a run hands act (its command line, its 0600 files, the host's share) and
the job table made from a recorded act log; one slow test sends artifacts through act's server.
Whole workflows run for real in test_pipeline_ember.py and test_pipeline_fixture.py.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from shipyard.ci.actions import PINNED
from shipyard.cli import main
from shipyard.errors import ToolError
from shipyard.local_ci import act_run
from shipyard.local_ci.act_host import (
    CONTAINER_CA,
    CONTAINER_HOST_DIR,
    CONTAINER_PIP_CONF,
    CONTAINER_PYTHONS,
    stage_share,
)
from shipyard.local_ci.act_report import (
    NOT_RUNNABLE,
    NOT_STARTED,
    ActLog,
    expected_jobs,
    job_table,
    needed_jobs,
    read_log,
    render_table,
)
from shipyard.local_ci.workflow_run import not_runnable_here
from shipyard.release.validate import load_spec

RECORDED = Path(__file__).parent.parent / "fixtures" / "act" / "nightly-wheel-linux.jsonl"
SECRET = 'pass$word "with" quotes\\\n-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEI\n'


def _nightly(repo: Path) -> dict:
    return yaml.safe_load((repo / ".github" / "workflows" / "nightly.yml").read_text())


@pytest.fixture
def host(tmp_path: Path) -> dict:
    """A host's trust store and pip settings, as files in tmp: a CA bundle, a pip.conf naming a
    local index and a constraints file, and the environment that points at them."""
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n")
    (tmp_path / "wheels").mkdir()
    (tmp_path / "constraints.txt").write_text("pip<99\n")
    (tmp_path / "pip.conf").write_text(f"[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n"
                                       f"find-links = {tmp_path / 'wheels'}\n"
                                       f"constraint = {tmp_path / 'constraints.txt'}\n"
                                       f"extra-index-url = file://{tmp_path / 'missing'}/simple\n")
    return {"SSL_CERT_FILE": str(tmp_path / "ca.crt"), "PIP_DEFAULT_TIMEOUT": "60",
            "SHIPYARD_SIGNING_KEY": SECRET, "HOME": str(tmp_path)}


def _setup(tmp_path: Path, host: dict, repo: Path) -> act_run.ActSetup:
    folder = act_run.RunFolder(tmp_path / "run")
    share = stage_share(folder.host, host, pip_files=(tmp_path / "pip.conf",))
    act_run.write_env_file(share, folder)
    text = act_run.committed_workflow_text(repo, "nightly")
    workflow = folder.workflow_dir / "nightly.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text(text)
    act_run.write_secret_file(folder, act_run.workflow_secrets(text), host)
    return act_run.ActSetup(act=Path("/opt/act/bin/act"), repo=repo, workflow_file=workflow, folder=folder,
                            runner_image="shipyard/act-runner:test", runner_labels=("ubuntu-22.04",), share=share,
                            pythons=(str(tmp_path / "versions"), CONTAINER_PYTHONS),
                            stand_ins=act_run.stage_stand_ins(folder), inputs={"variant": "cpu", "python": "3.11"},
                            job="wheel-linux")


def test_act_command_line_names_files_and_never_a_secret(tmp_path, host, repo):
    setup = _setup(tmp_path, host, repo)
    argv = act_run.act_command(setup)
    joined = "\n".join(argv)
    for piece in (SECRET, "pass$word", "MC4CAQAwBQYDK2VwBCIEI"):
        assert piece not in joined
    pairs = list(zip(argv, argv[1:], strict=False))
    assert ("--secret-file", str(setup.folder.secret_file)) in pairs
    assert ("--env-file", str(setup.folder.env_file)) in pairs
    assert ("-P", "ubuntu-22.04=shipyard/act-runner:test") in pairs
    assert ("-j", "wheel-linux") in pairs
    assert ("--input", "variant=cpu") in pairs and ("--input", "python=3.11") in pairs
    assert "--pull=false" in argv and "--rm" in argv and argv[1] == "workflow_dispatch"
    # every pinned action but checkout is replaced by a staged stand-in; act's own local checkout
    # copies the run's clean clone (-C) into each workspace
    replaced = {value.split("=", 1)[0]: Path(value.split("=", 1)[1]) for flag, value in pairs
                if flag == "--local-repository"}
    assert set(replaced) == {f"{action}@{sha}" for action, (sha, _) in PINNED.items() if action != "actions/checkout"}
    for folder in replaced.values():
        assert (folder / "action.yml").is_file() and folder.is_relative_to(setup.folder.root)
    assert (replaced[f"actions/upload-artifact@{PINNED['actions/upload-artifact'][0]}"] / "artifacts.py").is_file()
    assert "--no-skip-checkout" not in argv
    # the one mount: the host's Pythons, read-only
    assert ("--container-options", f"-v {tmp_path / 'versions'}:{CONTAINER_PYTHONS}:ro") in pairs


def test_the_folders_static_and_conda_targets_publish_into_are_mounted_where_the_server_reads(tmp_path, host, repo):
    """An absolute `path` is the folder a web server on this host serves: the publish job (a runner
    container) gets it read-write at the same path. A relative one lives in the job's workspace
    and ends with the job, which the run says."""
    from shipyard.local_ci.workflow_run import served_folders

    release = load_spec(repo, targets_file=repo / "local-targets.yaml").release
    targets = dict(release.publish)
    targets["wheels-tree"] = targets["wheels-tree"].model_copy(update={"path": str(tmp_path / "served" / "whl")})
    folders, notes = served_folders(release.model_copy(update={"publish": targets}))
    assert folders == (tmp_path / "served" / "whl",) and folders[0].is_dir()
    assert notes == [f"publish.conda-channel.path dist/site/conda is inside the publish job's workspace, which "
                     f"ends with the job; to publish where {targets['conda-channel'].url} is served, "
                     f"make path absolute (the folder that server serves: a local run mounts it)"]
    argv = act_run.act_command(replace(_setup(tmp_path, host, repo), served_folders=folders))
    pairs = list(zip(argv, argv[1:], strict=False))
    assert ("--container-options", f"-v {tmp_path / 'versions'}:{CONTAINER_PYTHONS}:ro "
                                   f"-v {folders[0]}:{folders[0]}") in pairs


def test_secret_and_env_files_are_0600_and_hold_the_values(tmp_path, host, repo):
    setup = _setup(tmp_path, host, repo)
    for path in (setup.folder.secret_file, setup.folder.env_file):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    secrets = setup.folder.secret_file.read_text()
    assert secrets.startswith('SHIPYARD_SIGNING_KEY="') and "\\$word" in secrets and "\\n" in secrets
    assert secrets.count("\n") == 1  # one line: the key's newlines are escaped, not written
    env = dict(line.split("=", 1) for line in setup.folder.env_file.read_text().splitlines())
    assert env["SSL_CERT_FILE"] == env["PIP_CERT"] == env["REQUESTS_CA_BUNDLE"] == f'"{CONTAINER_CA}"'
    assert env["PIP_CONFIG_FILE"] == f'"{CONTAINER_PIP_CONF}"' and env["PIP_DEFAULT_TIMEOUT"] == '"60"'
    assert "SHIPYARD_SIGNING_KEY" not in env and "HOME" not in env
    assert "PIP_FIND_LINKS" not in env  # the host's folders stay out


def test_the_host_share_holds_the_trust_store_and_pip_settings_only(tmp_path, host):
    """What the images get of the host: its CA bundle, its pip settings with `cert` pointing at the
    image's copy and constraint files copied in; local folders are left out and said so; an index
    URL with a password goes to the 0600 env file, never into an image layer."""
    host = {**host, "PIP_FIND_LINKS": str(tmp_path / "wheels"), "UV_INDEX_URL": "https://mirror.example/simple"}
    with (tmp_path / "pip.conf").open("a") as conf:
        conf.write("index-url = https://user:pa55@mirror.example/simple\n")
    share = stage_share(tmp_path / "host", host, pip_files=(tmp_path / "pip.conf",))
    assert sorted(p.name for p in share.staged.iterdir()) == ["ca-certificates.crt", "constraint-constraints.txt",
                                                              "pip.conf"]
    assert (share.staged / "ca-certificates.crt").read_text() == (tmp_path / "ca.crt").read_text()
    pip_conf = (share.staged / "pip.conf").read_text()
    assert f"cert = {CONTAINER_CA}" in pip_conf and "/etc/ssl/certs" not in pip_conf
    assert f"constraint = {CONTAINER_HOST_DIR}/constraint-constraints.txt" in pip_conf
    assert str(tmp_path) not in pip_conf and "pa55" not in pip_conf
    assert share.env["PIP_INDEX_URL"] == "https://user:pa55@mirror.example/simple"
    assert share.env["UV_INDEX_URL"] == "https://mirror.example/simple" and "PIP_FIND_LINKS" not in share.env
    assert share.env["SSL_CERT_FILE"] == share.env["PIP_CERT"] == CONTAINER_CA
    assert share.env["PIP_CONFIG_FILE"] == CONTAINER_PIP_CONF
    assert any(str(tmp_path / "wheels") in item for item in share.left_out)
    assert any("PIP_FIND_LINKS" in item for item in share.left_out)


def test_a_secret_file_others_can_read_is_refused(tmp_path, repo, capsys):
    loose = tmp_path / "secrets.env"
    loose.write_text("SHIPYARD_SIGNING_KEY=Wq4nRt8Ly\n")
    loose.chmod(0o644)
    status = main(["--root", str(repo), "ci", "run", "--job", "plan", "--secret-file", str(loose)])
    err = capsys.readouterr().err
    assert status == 2
    assert f"{loose}: secret file: readable or writable by others; chmod 600 {loose} (got 0644)" in err
    assert "Wq4nRt8Ly" not in err and "Traceback" not in err


def test_a_given_secret_file_is_passed_as_it_is(tmp_path):
    given = tmp_path / "mine.env"
    given.write_text("# publish\nDEVPI_PASSWORD=s3cret\n")
    given.chmod(0o600)
    folder = act_run.RunFolder(tmp_path / "run")
    names = act_run.write_secret_file(folder, ["SHIPYARD_SIGNING_KEY"], {"SHIPYARD_SIGNING_KEY": "x"}, given)
    assert names == ["DEVPI_PASSWORD"]
    assert folder.secret_file.read_text() == given.read_text()
    assert stat.S_IMODE(folder.secret_file.stat().st_mode) == 0o600


def test_job_table_from_a_recorded_act_log(repo):
    """A recorded `shipyard ci run --job wheel-linux --variant cpu --python 3.11`: the plan ran
    green in the runner image; both wheel-linux jobs ran in debian:bookworm and stopped at the
    build, which builds every Python of the release while the plan gave the job 3.11 only."""
    workflow = _nightly(repo)
    log = read_log(RECORDED)
    expected = expected_jobs(workflow, log.outputs["plan"], needed_jobs(workflow, "wheel-linux"))
    rows = job_table(log, expected, not_runnable_here(load_spec(repo).release, workflow, {}))
    by_name = {row.name: row for row in rows}
    assert list(by_name) == ["plan", "wheel-linux wheel-ember-cpu-linux-x86_64",
                             "wheel-linux wheel-embervision-cpu-linux-x86_64"]
    plan = by_name["plan"]
    assert plan.result == "success" and plan.container.startswith("shipyard/act-runner:") and plan.seconds > 10
    for name in list(by_name)[1:]:
        row = by_name[name]
        assert row.container == "debian:bookworm" and row.seconds > 1000 and row.counts_as_failure
        # where it stopped, and why, in the words of the step's own first error line
        assert row.reason.startswith("step 'Build and test every Python' failed: error: cannot build these cells")
        assert "no Python 3.9 interpreter" in row.reason
    table = render_table(rows)
    assert table.splitlines()[0].split() == ["job", "container", "seconds", "result"]
    assert "plan  " in table and "debian:bookworm" in table


def test_jobs_that_cannot_run_here_are_listed_with_why(repo):
    """The whole nightly narrowed to cpu/3.11: every Windows and macOS job of the plan's matrices
    is a row saying why it cannot run here; nothing is dropped, and none counts as a failure."""
    workflow = _nightly(repo)
    log = read_log(RECORDED)
    outputs = {k: v for k, v in log.outputs["plan"].items() if k in workflow["jobs"]["plan"]["outputs"]}
    expected = expected_jobs(workflow, outputs, needed_jobs(workflow, None))
    rows = job_table(log, expected, not_runnable_here(load_spec(repo).release, workflow, {}))
    entries = sum(len(json.loads(value)["include"]) for value in outputs.values())
    assert len(rows) == entries + 3  # plan, manifest, publish
    foreign = [row for row in rows if "-windows-" in row.name or "-macos-" in row.name]
    assert foreign and all(row.result == NOT_RUNNABLE for row in foreign)
    assert any("runs on windows-2022, a windows runner; act runs jobs in Linux containers only" == row.reason
               for row in foreign)
    assert any(row.reason.startswith("runs on macos-") for row in foreign)
    assert not any(row.counts_as_failure for row in foreign)
    # the Linux jobs the recorded run did not reach are there too, saying so
    assert {row.result for row in rows if row.name.startswith("conda-linux ")} == {NOT_STARTED}
    assert "not runnable here: runs on windows-2022" in render_table(rows)


def test_a_local_run_plans_the_linux_jobs_and_lists_the_others_as_not_runnable(repo, capsys):
    """A local run narrows the plan to the platforms act runs (the plan job's `platform` input),
    so that its manifest job expects only fragments that can be made here; the jobs left out are
    still rows, saying why."""
    from shipyard.ci.jobs import PlanFilter, plan_outputs
    from shipyard.local_ci.act_run import RunRequest
    from shipyard.local_ci.workflow_run import left_out_here

    workflow = _nightly(repo)
    release = load_spec(repo).release
    narrowed = _plan_outputs(repo, capsys, "--variant", "cpu", "--python", "3.11", "--platform", "linux-x86_64")
    entries = [e for lane in narrowed.values() for e in lane]
    assert entries and {e["builder"] for e in entries} == {"linux-x86_64"}
    assert narrowed["wheel_windows"] == [] and narrowed["conda_macos"] == []
    request = RunRequest("nightly", variants=("cpu",), pythons=("3.11",), platforms=("linux-x86_64",))
    outputs = plan_outputs(release, PlanFilter(("cpu",), ("3.11",), ("linux-x86_64",)))
    selected = needed_jobs(workflow, None)
    expected = expected_jobs(workflow, outputs, selected)
    why_not = not_runnable_here(release, workflow, {})
    left = left_out_here(release, workflow, request, selected, expected, why_not)
    assert left and {job.job_id for job in left} == {"wheel-windows", "wheel-macos", "conda-windows", "conda-macos"}
    rows = job_table(ActLog(), expected + left, why_not)
    foreign = [row for row in rows if row.job_id in {job.job_id for job in left}]
    assert len(foreign) == len(left) and all(row.result == NOT_RUNNABLE for row in foreign)
    assert all(row.reason.endswith("(left out of the plan: --platform linux-x86_64)") for row in foreign)
    assert request.inputs({"variant": {}, "python": {}, "platform": {}})["platform"] == "linux-x86_64"
    # a package type narrows too: the mobile lane empties, the others stay
    typed = _plan_outputs(repo, capsys, "--variant", "cpu", "--package-type", "wheel,conda,docker")
    assert typed["mobile"] == [] and typed["wheel_linux"] and typed["conda_pure"] and typed["docker"]
    assert main(["--root", str(repo), "ci", "plan", "--channel", "nightly", "--package-type", "wheels"]) == 2


def test_cuda_image_lanes_are_not_runnable_while_the_image_is_missing(repo):
    workflow = _nightly(repo)
    reasons = not_runnable_here(load_spec(repo).release, workflow, {"debian:bookworm": "cannot be made"})
    assert "shipyard/cuda-builder:10.2-" in reasons["wheel-linux-cuda-image"]
    assert "NVIDIA's archived installer" in reasons["wheel-linux-cuda-image"]
    assert reasons["wheel-linux"] == "cannot be made"


def test_a_local_run_leaves_the_cuda_builder_variants_out_of_the_plan_and_lists_their_jobs(repo, monkeypatch):
    """Without --variant, `ci run` plans every variant but those whose CUDA builds in a builder image
    the engine lacks (CUDA 10.2): a plan holding them would make the manifest job refuse a release
    missing their cells. Their jobs are rows of the table, not runnable, saying why."""
    from shipyard.ci.jobs import PlanFilter, plan_outputs
    from shipyard.local_ci import workflow_run
    from shipyard.local_ci.act_run import RunRequest

    monkeypatch.setattr(workflow_run.docker_base, "image_labels", lambda tag: None)  # an engine without it
    release = load_spec(repo).release
    left_out = workflow_run.variants_without_builder(release)
    assert left_out == ("cuda10.2",)
    workflow = _nightly(repo)
    variants = tuple(name for name in release.variants if name not in left_out)
    request = RunRequest("nightly", variants=variants, pythons=("3.11",), left_out_variants=left_out)
    outputs = plan_outputs(release, PlanFilter(variants, ("3.11",)))
    assert json.loads(outputs["wheel_linux_cuda_image"]) == {"include": []}
    selected = needed_jobs(workflow, None)
    expected = expected_jobs(workflow, outputs, selected)
    why_not = workflow_run.not_runnable_here(release, workflow, {})
    left = workflow_run.left_out_here(release, workflow, request, selected, expected, why_not)
    assert {job.job_id for job in left} == {"wheel-linux-cuda-image", "conda-linux-cuda-image"}
    assert {job.matrix_id for job in left} == {f"{kind}-{c}-cu102-linux-x86_64" for kind in ("wheel", "conda")
                                               for c in ("ember", "embervision")}
    rows = job_table(ActLog(), expected + left, why_not)
    listed = [row for row in rows if row.job_id.endswith("-cuda-image")]
    assert len(listed) == 4 and all(row.result == NOT_RUNNABLE for row in listed)
    assert all("NVIDIA's archived installer" in row.reason
               and row.reason.endswith("(left out of the plan: variants cuda10.2)") for row in listed)
    # a run asked for variants keeps them as asked: nothing is left out for it
    assert workflow_run.left_out_here(release, workflow, RunRequest("nightly", variants=("cpu",)), selected,
                                      expected, dict(why_not)) == []


def test_run_refuses_a_job_and_an_input_the_workflow_lacks(repo, capsys):
    assert main(["--root", str(repo), "ci", "run", "--job", "wheel-linx"]) == 2
    assert "no job 'wheel-linx'" in capsys.readouterr().err
    assert main(["--root", str(repo), "ci", "run", "--channel", "test"]) == 2
    assert "use --workflow release for another channel" in capsys.readouterr().err


def _plan_outputs(repo: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, list[dict]]:
    assert main(["--root", str(repo), "ci", "plan", "--channel", "nightly", *extra]) == 0
    lines = capsys.readouterr().out.splitlines()
    return {name: json.loads(value)["include"] for name, value in (line.split("=", 1) for line in lines)}


def test_the_plan_job_narrows_the_fan_out_to_the_dispatch_inputs(repo, capsys):
    whole = _plan_outputs(repo, capsys)
    narrowed = _plan_outputs(repo, capsys, "--variant", "cpu", "--python", "3.11")
    assert set(narrowed) == set(whole)  # every output the workflow reads still exists
    assert narrowed["wheel_linux_cuda_image"] == [] and whole["wheel_linux_cuda_image"]
    entries = [e for lane in narrowed.values() for e in lane]
    assert entries and {e["variant"] for e in entries} == {"cpu"}
    native = [e for e in entries if e["platform"] not in ("any", "mobile")]
    assert native and {e["pythons"] for e in native} == {"3.11"}
    # a pure job (one wheel per pure component) is still built, and tested on the kept Python
    # only: its job container has that one (a bare runner cannot be given the others here)
    pure = [e for e in entries if e["platform"] == "any"]
    assert pure and {e["pythons"] for e in pure} == {"3.11"}
    assert all(e["cells"] == str(len(e["components"].split())) for e in pure), pure
    whole_pure = [e for lane in whole.values() for e in lane if e["platform"] == "any"]
    assert {e["pythons"] for e in whole_pure} == {"3.9 3.10 3.11 3.12 3.13"}
    assert {e["id"] for e in native} < {e["id"] for lane in whole.values() for e in lane}
    # an empty input is the whole release, as on a schedule or a tag push
    assert _plan_outputs(repo, capsys, "--variant", "", "--python", "") == whole
    assert main(["--root", str(repo), "ci", "plan", "--channel", "nightly", "--variant", "cpux"]) == 2
    assert "--variant cpux: not a variant name or tag of release.yaml" in capsys.readouterr().err


def test_the_workflows_take_the_narrowing_inputs_in_the_plan_job_only(repo):
    for name in ("nightly", "release"):
        workflow = yaml.safe_load((repo / ".github" / "workflows" / f"{name}.yml").read_text())
        inputs = workflow[True]["workflow_dispatch"]["inputs"]
        assert {"variant", "python", "platform", "package_type"} <= set(inputs) and inputs["variant"]["default"] == ""
        text = (repo / ".github" / "workflows" / f"{name}.yml").read_text()
        assert text.count("inputs.variant") == 1 and text.count("inputs.python") == 1
        assert text.count("inputs.platform") == 1 and text.count("inputs.package_type") == 1
        plan_step = next(s for s in workflow["jobs"]["plan"]["steps"] if s.get("id") == "plan")
        assert plan_step["env"] == {"ONLY_VARIANTS": "${{ inputs.variant }}", "ONLY_PYTHONS": "${{ inputs.python }}",
                                    "ONLY_PLATFORMS": "${{ inputs.platform }}",
                                    "ONLY_PACKAGE_TYPES": "${{ inputs.package_type }}"}
        assert ('--variant "$ONLY_VARIANTS" --python "$ONLY_PYTHONS" --platform "$ONLY_PLATFORMS" '
                '--package-type "$ONLY_PACKAGE_TYPES"') in plan_step["run"]


def test_upload_artifacts_stand_in_follows_a_linked_folder_and_leaves_out_hidden_files(tmp_path, monkeypatch):
    """dist/conda is a link to the channel's live generation, a hidden folder beside it
    (plumbing/generations.py): the fragment holds the files through the link, as upload-artifact's
    globber follows links, and not the hidden generation itself."""
    import importlib.util

    from shipyard.local_ci.act_run import stage_stand_ins

    folder = act_run.RunFolder(tmp_path / "run")
    staged = stage_stand_ins(folder)
    source = next(p for p in staged.values() if (p / "artifacts.py").is_file()) / "artifacts.py"
    spec = importlib.util.spec_from_file_location("artifacts_stand_in", source)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    dist = tmp_path / "dist"
    (dist / ".conda-gen-3" / "linux-64").mkdir(parents=True)
    (dist / ".conda-gen-3" / "linux-64" / "ember.conda").write_text("package")
    (dist / "conda").symlink_to(".conda-gen-3")
    (dist / "manifest.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    root, files = module._files(["dist/"], False)
    assert root == str(dist)
    assert sorted(os.path.relpath(f, root) for f in files) == ["conda/linux-64/ember.conda", "manifest.json"]


ROUND_TRIP = """\
name: artifacts
on: workflow_dispatch
jobs:
  up:
    runs-on: ubuntu-22.04
    steps:
    - uses: actions/setup-python@{setup_python}
      with: {{python-version: '3.11'}}
    - run: mkdir -p dist/sub && echo one > dist/a.txt && echo two > dist/sub/b.txt && echo hidden > dist/.h
    - uses: actions/upload-artifact@{upload}
      with: {{name: fragment-a, path: dist/, if-no-files-found: error}}
    - uses: actions/upload-artifact@{upload}
      with: {{name: fragment-b, path: dist/a.txt, if-no-files-found: error}}
  down:
    needs: up
    runs-on: ubuntu-22.04
    steps:
    - uses: actions/setup-python@{setup_python}
      with: {{python-version: '3.11'}}
    - uses: actions/download-artifact@{download}
      with: {{pattern: fragment-*, path: fragments}}
    - run: find fragments -type f | sort > listing.txt && cat listing.txt fragments/fragment-a/sub/b.txt
"""


@pytest.mark.slow
@pytest.mark.docker
def test_artifact_stand_ins_round_trip_through_acts_server(docker_engine, tmp_path):
    """upload-artifact's stand-in in one job, download-artifact's in the next, through act's own
    artifact server: the files arrive under fragments/<name>/, hidden files left out."""
    from shipyard.local_ci.act_host import pythons_mount
    from shipyard.local_ci.act_images import runner_image
    from shipyard.plumbing.port_ranges import claimed_port_range

    repo = tmp_path / "repo"
    (repo / ".github" / "workflows").mkdir(parents=True)
    sha = {name.split("/")[1]: value for name, (value, _) in PINNED.items()}
    (repo / ".github" / "workflows" / "a.yml").write_text(ROUND_TRIP.format(
        setup_python=sha["setup-python"], upload=sha["upload-artifact"], download=sha["download-artifact"]))
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "a"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    folder = act_run.RunFolder(tmp_path / "run")
    share = stage_share(folder.host)
    act_run.write_env_file(share, folder)
    act_run.write_secret_file(folder, [], {})
    act_run.write_event(folder, {}, None)
    setup = act_run.ActSetup(act=act_run.find_act(), repo=repo, workflow_file=repo / ".github" / "workflows" / "a.yml",
                             folder=folder, runner_image=runner_image(share), runner_labels=("ubuntu-22.04",),
                             share=share, pythons=pythons_mount(), stand_ins=act_run.stage_stand_ins(folder))
    log = ActLog()
    said: list[str] = []

    def record(item: dict) -> None:
        log.feed(item)
        if item.get("raw_output"):
            said.append(str(item.get("msg", "")))

    with claimed_port_range() as ports:
        status = act_run.run_act(replace(setup, server_ports=(ports[0], ports[1])), record)
    assert status == 0, "".join(said)[-3000:]
    assert {row.job_id: row.result for row in log.rows.values()} == {"up": "success", "down": "success"}
    listing = [line for text in said for line in text.splitlines() if line.startswith("fragments/")]
    assert listing == ["fragments/fragment-a/a.txt", "fragments/fragment-a/sub/b.txt", "fragments/fragment-b/a.txt"]
    assert any(text.strip() == "two" for text in said)
    assert sorted(p.name for p in folder.artifacts.rglob("*.zip")) == ["fragment-a.zip", "fragment-b.zip"]


def test_a_failed_composite_action_is_named_by_its_workflow_step():
    """act reports a stand-in's inner script step too; the row names the workflow's step and the
    error line the action printed."""
    from shipyard.local_ci.act_report import ActLog

    log = ActLog()
    job = {"job": "nightly/plan", "jobID": "plan", "matrix": {}}
    records = [
        {**job, "time": "2026-12-02T03:00:00Z", "msg": "⭐ Run Set up job"},
        {**job, "msg": "  🚀  Start image=shipyard/act-runner:x"},
        {**job, "msg": "Installing\n", "raw_output": True, "stage": "Main", "stepID": ["0"]},
        {**job, "msg": "  ✅  Success - Main Check out", "stage": "Main", "stepID": ["0"], "stepResult": "success"},
        {**job, "msg": "::error::setup-python (local stand-in): no Python 3.14\n", "raw_output": True,
         "stage": "Main", "stepID": ["1", "pick"]},
        {**job, "msg": "  ❌  Failure - Main set -euo pipefail", "stage": "Main", "stepID": ["1", "pick"],
         "stepResult": "failure", "step": "set -euo pipefail\nroot=…"},
        {**job, "msg": "  ❌  Failure - Main Python for shipyard", "stage": "Main", "stepID": ["1"],
         "stepResult": "failure", "step": "Python for shipyard"},
        {**job, "time": "2026-12-02T03:00:42Z", "msg": "🏁  Job failed", "jobResult": "failure"},
    ]
    finished = [row for row in map(log.feed, records) if row is not None]
    assert len(finished) == 1
    row = finished[0]
    assert (row.name, row.container, row.seconds, row.result) == ("plan", "shipyard/act-runner:x", 42.0, "failure")
    assert row.reason == ("step 'Python for shipyard' failed: ::error::setup-python (local stand-in): "
                          "no Python 3.14")


@pytest.mark.slow
@pytest.mark.docker
def test_a_run_removes_the_job_containers_a_killed_run_of_its_workflow_left(docker_engine, tmp_path):
    """act names a job's container after the workflow and the job only: a container a killed run
    left would meet the next run's job of the same name. The run, once it holds the machine's lock
    (one_run_per_engine; not taken here, so that this test never waits behind a pipeline test),
    removes those of its own workflow, and no other."""
    from shipyard.host import docker_base
    from shipyard.local_ci.workflow_run import _remove_stale_containers

    base = docker_base.bootstrap_base_image()
    tag = tmp_path.name.lower().replace("_", "-")
    names = {"mine": f"act-nightly-{tag}-plan-0123", "other": f"act-release-{tag}-plan-0123"}
    for name in names.values():
        subprocess.run(["docker", "create", "--name", name, base, "true"], check=True, capture_output=True)
    said: list[str] = []
    try:
        _remove_stale_containers(f"nightly {tag}", said.append)
        left = subprocess.run(["docker", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True,
                              check=True).stdout.split()
        assert names["mine"] not in left and names["other"] in left
        assert any(names["mine"] in line for line in said), said
    finally:
        subprocess.run(["docker", "rm", "-f", *names.values()], capture_output=True)


def test_the_repository_variables_a_workflow_reads_come_from_the_environment_or_var(tmp_path, repo):
    text = (repo / ".github" / "workflows" / "nightly.yml").read_text()
    environ = {"SHIPYARD_INDEX_URL": "http://127.0.0.1:9/simple/", "SHIPYARD_WHEEL_URL": "", "UNREAD": "x"}
    # set and read: passed; set empty or not read by the workflow: not
    assert act_run.workflow_variables(text, environ, {}) == {"SHIPYARD_INDEX_URL": "http://127.0.0.1:9/simple/"}
    assert act_run.workflow_variables(text, environ, {"SHIPYARD_INDEX_URL": "http://other/"}) == {
        "SHIPYARD_INDEX_URL": "http://other/"}
    setup = replace(_setup(tmp_path, {}, repo), variables={"SHIPYARD_INDEX_URL": "http://x/"})
    folder = setup.folder
    with pytest.raises(ToolError):  # no act here: what matters is the vars file written before it starts
        act_run.run_act(replace(setup, act=tmp_path / "no-act"), lambda record: None)
    assert (folder.root / "act.vars").read_text() == 'SHIPYARD_INDEX_URL="http://x/"\n'
    assert main(["--root", str(repo), "ci", "run", "--var", "not a name=1"]) == 2


def test_a_local_targets_file_reaches_the_publish_step_through_the_env_file_and_one_read_only_mount(
        tmp_path, host, repo, capsys):
    """`ci run --targets FILE`: the committed workflow stays as it is (its publish step runs a plain
    `shipyard publish` with the real targets' secrets); the run copies the file into its folder,
    mounts it read-only at that path, and the 0600 env file every step reads names it in
    SHIPYARD_TARGETS beside the stand-ins' credentials from this environment."""
    from shipyard.local_ci.publish_stand_ins import stage_stand_in_targets

    targets = repo / "local-targets.yaml"
    release = load_spec(repo, targets_file=targets).release
    environ = {**host, "SHIPYARD_PYPI_USERNAME": "ci", "SHIPYARD_PYPI_PASSWORD": "pw-devpi-1e4b",
               "SHIPYARD_CONDA_TOKEN": "tok-5c9d"}
    setup = _setup(tmp_path, host, repo)
    stand_ins = stage_stand_in_targets(targets, setup.folder, release, environ)
    assert stand_ins.file == setup.folder.root / "local-targets.yaml"
    assert stand_ins.file.read_text() == targets.read_text()
    assert stand_ins.unset == ("SHIPYARD_TESTPYPI_USERNAME", "SHIPYARD_TESTPYPI_PASSWORD",
                               "SHIPYARD_REGISTRY_USERNAME", "SHIPYARD_REGISTRY_PASSWORD")
    act_run.write_env_file(setup.share, setup.folder, stand_ins.env)
    env_text = setup.folder.env_file.read_text()
    assert stat.S_IMODE(setup.folder.env_file.stat().st_mode) == 0o600
    assert f'SHIPYARD_TARGETS="{stand_ins.file}"\n' in env_text
    assert 'SHIPYARD_PYPI_PASSWORD="pw-devpi-1e4b"\n' in env_text and 'SHIPYARD_CONDA_TOKEN="tok-5c9d"\n' in env_text
    argv = act_run.act_command(replace(setup, read_only_files=(stand_ins.file,)))
    assert "pw-devpi-1e4b" not in "\n".join(argv)
    options = argv[argv.index("--container-options") + 1]
    assert f"-v {stand_ins.file}:{stand_ins.file}:ro" in options
    # The publish step it reaches: `shipyard publish` with only the real targets' secrets, which name
    # none of the stand-ins' variables; nothing in the workflow sets SHIPYARD_TARGETS.
    text = (repo / ".github" / "workflows" / "nightly.yml").read_text()
    publish = yaml.safe_load(text)["jobs"]["publish"]
    step = next(s for s in publish["steps"] if "shipyard publish" in s.get("run", ""))
    assert step["run"].strip() == 'shipyard publish --channel "$SHIPYARD_CHANNEL"'
    assert not set(step["env"]) & set(stand_ins.env) and "SHIPYARD_TARGETS" not in text
    # The command takes --targets (generate and check still refuse it): a bad job is refused as without it.
    assert main(["--root", str(repo), "--targets", str(targets), "ci", "run", "--job", "wheel-linx"]) == 2
    assert "no job 'wheel-linx'" in capsys.readouterr().err
    assert main(["--root", str(repo), "--targets", str(targets), "ci", "check"]) == 2
    assert "drop --targets" in capsys.readouterr().err
