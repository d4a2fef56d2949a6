"""The Linux job image's name and recipe (ci/linux_job_image.py): what decides that a run builds a
new one, and what the plan job's outputs hold beside the lanes. The build itself runs in every
pipeline test under act (tests/end_to_end/test_pipeline_*.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from shipyard.ci import linux_job_image
from shipyard.ci.fragments import read_plan_jobs
from shipyard.ci.linux_job_image import default_repository, dockerfile, image_key, installed_shipyard
from shipyard.cli import main
from shipyard.errors import UsageError
from shipyard.release.validate import load_spec

RECORD = ("shipyard/__init__.py,sha256=abc,10\n"
          "shipyard-0.1.0.dist-info/METADATA,sha256=def,20\n"
          "shipyard-0.1.0.dist-info/RECORD,,\n")


def _installed(monkeypatch: pytest.MonkeyPatch, record: str) -> str:
    monkeypatch.setattr(linux_job_image.importlib.metadata, "distribution",
                        lambda name: SimpleNamespace(read_text=lambda file: record))
    return installed_shipyard()


def test_two_installs_of_one_wheel_name_one_image_and_a_changed_file_another(monkeypatch):
    # what each install writes of its own (the script naming its venv, uv's cache note) is left out
    first = _installed(monkeypatch, "../../../bin/shipyard,sha256=one,300\n" + RECORD
                       + "shipyard-0.1.0.dist-info/uv_cache.json,sha256=x1,127\n")
    second = _installed(monkeypatch, "../../../bin/shipyard,sha256=two,300\n" + RECORD
                        + "shipyard-0.1.0.dist-info/uv_cache.json,sha256=x2,126\n")
    assert first == second and "METADATA" in first and "bin/shipyard" not in first
    changed = _installed(monkeypatch, RECORD.replace("sha256=abc", "sha256=abd"))
    assert image_key("FROM x\n", first) == image_key("FROM x\n", second)
    assert image_key("FROM x\n", first) != image_key("FROM x\n", changed)
    assert image_key("FROM x\n", first) != image_key("FROM y\n", first)
    assert len(image_key("FROM x\n", first)) == 16


def test_the_dockerfile_is_release_yamls_and_copies_nothing_in(repo):
    spec = load_spec(repo)
    text = dockerfile(spec)
    assert text == dockerfile(load_spec(repo))  # the same release, the same recipe (and tag)
    assert text.startswith("# shipyard's Linux job image") and "\nFROM debian:bookworm\n" in text
    assert "COPY" not in text and "ADD " not in text
    # shipyard and what `toolchain install` writes live outside $HOME (GitHub's /github/home)
    assert "SHIPYARD_CACHE=/opt/shipyard/cache" in text and "/opt/shipyard/venv/bin:$PATH" in text


def test_the_registry_repository_is_ghcrs_lower_cased_or_a_clear_error(monkeypatch, repo, capsys):
    assert default_repository("Ember-Org/Ember") == "ghcr.io/ember-org/ember/shipyard-job"
    with pytest.raises(UsageError, match="set the repository variable SHIPYARD_JOB_IMAGE_REPOSITORY"):
        default_repository("")
    monkeypatch.delenv("GITHUB_REPOSITORY", raising=False)
    assert main(["--root", str(repo), "ci", "linux-job-image", "--repository", ""]) == 2
    assert "GITHUB_REPOSITORY is not owner/name" in capsys.readouterr().err


def test_the_fragments_check_reads_the_lanes_of_the_plan_outputs_and_not_the_job_image(tmp_path):
    lane = {"include": [{"id": "wheel-pure-cpu-linux-x86_64-any", "components": "a b", "pythons": "3.11"}]}
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"wheel_pure": json.dumps(lane), "linux_job_image": "ghcr.io/o/r/shipyard-job@sha256:"
                                + "0" * 64}))
    [job] = read_plan_jobs(plan)
    assert (job.id, job.components, job.pythons) == ("wheel-pure-cpu-linux-x86_64-any", ("a", "b"), ("3.11",))
