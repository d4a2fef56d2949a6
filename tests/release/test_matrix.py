"""The matrix: deterministic, unique ids, exclusions applied, GitHub Actions shape."""

from __future__ import annotations

import json

import pytest

from shipyard.cli import main
from shipyard.release.matrix import GITHUB_MATRIX_LIMIT, expand, select
from shipyard.release.validate import load_spec


def test_cell_ids_are_unique_and_stable(repo):
    release = load_spec(repo).release
    first, second = expand(release), expand(release)
    assert [c.id for c in first] == [c.id for c in second]
    assert len({c.id for c in first}) == len(first)
    assert "ember-cu118-linux-x86_64-cp311-wheel" in {c.id for c in first}
    assert "ember-lite-cpu-linux-aarch64-mobile" in {c.id for c in first}


def test_exclusions_remove_cells(repo):
    cells = expand(load_spec(repo).release)
    assert not [c for c in cells if c.platform == "macos-arm64" and c.variant != "cpu"]
    assert not [c for c in cells if c.component == "emberelastic" and c.platform == "windows-amd64"]
    assert not [c for c in cells if c.component == "ember-lite" and c.variant != "cpu"]
    # Everything else is crossed in full: 2 native Python components x 5 Pythons on linux per
    # variant, plus the one cell of each pure component (emberaudio, emberelastic, ember-variant-provider), for wheels;
    # for conda the same plus each native component's core package (libember, libembervision).
    assert len(select(cells, variant="cuda11", platform="linux-x86_64", package_type="wheel")) == 13
    assert len(select(cells, variant="cuda11", platform="linux-x86_64", package_type="conda")) == 14
    assert len(select(cells, variant="cuda11", platform="linux-x86_64")) == 27


def test_github_format_is_a_strategy_matrix(repo, capsys):
    assert main(["--root", str(repo), "matrix", "--format", "github", "--variant", "cuda11"]) == 0
    matrix = json.loads(capsys.readouterr().out)
    assert set(matrix) == {"include"}
    ids = [entry["id"] for entry in matrix["include"]]
    assert len(ids) == len(set(ids)) == 49  # 23 wheel cells, 26 conda cells
    for entry in matrix["include"]:
        # Actions matrix values must be scalars; every entry names its runner.
        assert all(isinstance(v, str) for v in entry.values())
        assert entry["runner"] in {"ubuntu-22.04", "windows-2022"}
        assert entry["cuda"] == ("" if entry["platform"] == "any" else "11.8")


def test_table_shows_counts_per_variant_and_platform(repo, capsys):
    assert main(["--root", str(repo), "matrix"]) == 0
    out = capsys.readouterr().out
    # Wheels: 10 per linux variant; conda: 12 more (libember, libembervision and 5 Pythons each). 235: the
    # 5 CPU wheels of ember for linux-x86_64-manylinux2014 (its only cells; release.yaml's exclusions).
    assert "235 cells" in out
    linux = next(line for line in out.splitlines() if "linux-x86_64" in line)
    assert [int(n) for n in linux.replace("│", " ").split()[1:]] == [22, 22, 22, 22, 22, 0, 110]
    pure = next(line for line in out.splitlines() if line.strip("│ ").startswith("any"))
    assert [int(n) for n in pure.replace("│", " ").split()[1:]] == [0, 0, 0, 0, 0, 5, 5]
    total = next(line for line in out.splitlines() if line.strip("│ ").startswith("total"))
    assert [int(n) for n in total.replace("│", " ").split()[1:]] == [76, 22, 44, 44, 44, 5, 235]
    older = next(line for line in out.splitlines() if "linux-x86_64-manylinux2014" in line)
    assert [int(n) for n in older.replace("│", " ").split()[1:]] == [5, 0, 0, 0, 0, 0, 5]


def test_json_format_filters(repo, capsys):
    assert main(["--root", str(repo), "matrix", "--format", "json", "--package-type", "mobile"]) == 0
    cells = json.loads(capsys.readouterr().out)
    assert sorted(c["platform"] for c in cells) == ["android-arm64-v8a", "android-armeabi-v7a", "host",
                                                    "linux-aarch64", "linux-armv7"]
    assert all(c["python"] is None for c in cells)


@pytest.mark.parametrize(("argv", "wrong", "hint"), [
    (["matrix", "--variant", "cuda111"], "--variant cuda111", "cuda11"),
    (["matrix", "--variant", "cu11"], "--variant cu11", None),
    (["matrix", "--platform", "linux-x86-64"], "--platform linux-x86-64", "linux-x86_64"),
    (["matrix", "--package-type", "wheels"], "--package-type wheels", "wheel"),
    (["matrix", "--component", "embervison"], "--component embervison", "embervision"),
    (["doctor", "--variant", "cuda1"], "--variant cuda1", None),
    (["build", "--variant", "cpuu"], "--variant cpuu", "cpu"),
    (["build", "--variant", "cpu", "--python", "3.99"], "--python 3.99", None),
    (["build", "--variant", "cpu", "--python", "3.11", "--python", "3.1"], "--python 3.1", None),
    (["build", "--variant", "cpu", "--component", "ember-vision"], "--component ember-vision", "embervision"),
    (["build", "--variant", "cpu", "--test-python", "3.1"], "--test-python 3.1", None),
    (["build-mobile", "--target", "android-arm64"], "--target android-arm64", "android-arm64-v8a"),
    (["toolchain", "install", "cuda111"], "'cuda111'", "cuda11"),
])
def test_an_unknown_filter_value_is_an_error_naming_the_nearest(repo, capsys, argv, wrong, hint):
    # Before, these printed 0 cells (or built nothing) and exited 0.
    assert main(["--root", str(repo), *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ") and wrong in captured.err
    if hint:
        assert f"did you mean {hint!r}?" in captured.err
    assert "Traceback" not in captured.err


@pytest.mark.parametrize(("argv", "message"), [
    (["--python", "3.11", "--test-python", "3.12"],
     "error: --test-python 3.12: not a Python this build selects (--python 3.11); add --python 3.12, or test one "
     "of those"),
    (["--test-python", "3.11", "--no-tests"], "error: --test-python 3.11: --no-tests runs no tests at all; drop one "
                                              "of the two"),
])
def test_test_python_outside_the_build_is_an_error(repo, capsys, argv, message):
    """--test-python tests some of the Pythons a build builds: one it does not build, or a build
    that tests nothing, would test nothing while the option says otherwise."""
    assert main(["--root", str(repo), "build", "--variant", "cpu", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and " ".join(captured.err.split()) == message, captured.err


def test_filters_accept_names_and_tags(repo, capsys):
    assert main(["--root", str(repo), "matrix", "--format", "json", "--variant", "cu118",
                 "--platform", "windows-amd64", "--component", "ember"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 11  # 5 wheels; libember and 5 ember conda packages


def test_github_format_refuses_more_jobs_than_one_matrix_may_hold(spec_copy, capsys):
    # Two more platforms (built on their own runners) push the whole matrix past GitHub's 256 jobs per matrix.
    spec_copy.edit("release.yaml", "  windows-amd64:\n", "  windows-arm64: {}\n  macos-x86_64: {}\n  windows-amd64:\n")
    cells = expand(load_spec(spec_copy.root).release)
    assert len(cells) > GITHUB_MATRIX_LIMIT
    assert main(["--root", str(spec_copy.root), "matrix", "--format", "github"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert (f"error: the matrix has {len(cells)} cells but GitHub Actions runs at most 256 jobs per matrix; "
            f"generate one matrix per --variant") in captured.err
    # One variant at a time fits, and is what the message tells the user to do.
    assert main(["--root", str(spec_copy.root), "matrix", "--format", "github", "--variant", "cuda11"]) == 0
    assert len(json.loads(capsys.readouterr().out)["include"]) == len(select(cells, variant="cuda11"))
    # The table and JSON formats are not GitHub's business.
    assert main(["--root", str(spec_copy.root), "matrix", "--format", "json"]) == 0
def test_a_pure_component_is_one_job_for_the_whole_release(repo, capsys):
    assert main(["--root", str(repo), "matrix", "--format", "github"]) == 0
    include = json.loads(capsys.readouterr().out)["include"]
    for component in ("emberaudio", "emberelastic"):
        # One job, platform- and Python-neutral, on the Linux runner release.yaml names; no
        # per-platform, per-variant or per-Python jobs.
        # The same for its one noarch conda package.
        assert [e for e in include if e["component"] == component] == [{
            "id": f"{component}-any-{kind}", "component": component, "variant": "any", "variant_tag": "any",
            "cuda": "", "platform": "any", "os": "linux", "runner": "ubuntu-22.04", "python": "",
            "package_type": kind, "test_pythons": ""} for kind in ("wheel", "conda")]
    cells = {c.id: c for c in expand(load_spec(repo).release)}
    # The pure cell stands for every variant, and for the platforms the exclusions leave it.
    assert cells["emberaudio-any-wheel"].variant_tags == ("cpu", "cu102", "cu118", "cu124", "cu130")
    # ember's manylinux2014 twin of linux-x86_64 (glibc 2.17) is one of them: the pure wheel installs there too.
    assert cells["emberaudio-any-wheel"].platforms == ("linux-x86_64", "linux-x86_64-manylinux2014", "windows-amd64",
                                                        "macos-arm64")
    assert cells["emberelastic-any-wheel"].platforms == ("linux-x86_64", "linux-x86_64-manylinux2014", "macos-arm64")


def test_runner_names_come_from_release_yaml(spec_copy, capsys):
    spec_copy.edit("release.yaml", "github_runner: ubuntu-22.04", "github_runner: ubuntu-24.04")
    spec_copy.edit("release.yaml", "github_runner: windows-2022", "github_runner: windows-2025")
    assert main(["--root", str(spec_copy.root), "matrix", "--format", "github"]) == 0
    include = json.loads(capsys.readouterr().out)["include"]
    runners = {(e["platform"], e["runner"]) for e in include}
    # Linux wheels, pure wheels and the mobile targets (cross-built on Linux) all follow the edit.
    assert {r for p, r in runners if p in ("linux-x86_64", "any", "host", "linux-aarch64")} == {"ubuntu-24.04"}
    assert {r for p, r in runners if p == "windows-amd64"} == {"windows-2025"}
    from shipyard.host.toolchains.discover import Inventory
    from shipyard.host.toolchains.resolve import resolve

    release = load_spec(spec_copy.root).release
    cell = next(c for c in expand(release) if c.platform == "windows-amd64")
    host = Inventory("linux-x86_64", (), (), (), {}, {}, None, None, None)
    assert "they build on GitHub's windows-2025 runners" in str(resolve(cell, release, host))
