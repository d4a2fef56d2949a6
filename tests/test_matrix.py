"""The matrix: deterministic, unique ids, exclusions applied, GitHub Actions shape."""

from __future__ import annotations

import json

from shipyard.cli import main
from shipyard.matrix import expand, select
from shipyard.validate import load_spec


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
    # Everything else is crossed in full: 4 Python components x 5 Pythons on linux per variant.
    assert len(select(cells, variant="cuda11", platform="linux-x86_64")) == 20


def test_github_format_is_a_strategy_matrix(repo, capsys):
    assert main(["--root", str(repo), "matrix", "--format", "github", "--variant", "cuda11"]) == 0
    matrix = json.loads(capsys.readouterr().out)
    assert set(matrix) == {"include"}
    ids = [entry["id"] for entry in matrix["include"]]
    assert len(ids) == len(set(ids)) == 35
    for entry in matrix["include"]:
        # Actions matrix values must be scalars; every entry names its runner.
        assert all(isinstance(v, str) for v in entry.values())
        assert entry["runner"] in {"ubuntu-22.04", "windows-2022"}
        assert entry["cuda"] == "11.8"


def test_table_shows_counts_per_variant_and_platform(repo, capsys):
    assert main(["--root", str(repo), "matrix"]) == 0
    out = capsys.readouterr().out
    assert "185 cells" in out
    linux = next(line for line in out.splitlines() if "linux-x86_64" in line)
    assert [int(n) for n in linux.replace("│", " ").split()[1:]] == [20, 20, 20, 20, 20, 100]
    total = next(line for line in out.splitlines() if line.strip("│ ").startswith("total"))
    assert [int(n) for n in total.replace("│", " ").split()[1:]] == [60, 20, 35, 35, 35, 185]


def test_json_format_filters(repo, capsys):
    assert main(["--root", str(repo), "matrix", "--format", "json", "--package-type", "mobile"]) == 0
    cells = json.loads(capsys.readouterr().out)
    assert sorted(c["platform"] for c in cells) == ["android-arm64-v8a", "android-armeabi-v7a", "host",
                                                    "linux-aarch64", "linux-armv7"]
    assert all(c["python"] is None for c in cells)
