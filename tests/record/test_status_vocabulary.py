"""feature_status.yaml's own status vocabulary (PyTorch 2.8's API-Stable / API-Unstable in place of
stable / beta / prototype): the gate, the notes, the image labels and the test verdict follow it,
and a status outside it is bad input. The release is the real one, its statuses renamed; the
dist is report_release's stand-in (no build runs)."""

from __future__ import annotations

import re

from support.release_copy import declare_api_statuses
from support.report_release import FAILED, host_without_tools, write_release_dist

from shipyard.cli import main
from shipyard.image.plan import image_labels, image_plans
from shipyard.release.validate import load_spec
from shipyard.report.document import build_report
from shipyard.report.notes import release_notes
from shipyard.testing.verdict import FeatureOutcome

F = "feature_status.yaml"


def test_a_declared_vocabulary_drives_the_gate_the_notes_and_the_labels(spec_copy, tmp_path, capsys):
    declare_api_statuses(spec_copy)
    spec = load_spec(spec_copy.root)
    assert spec.statuses.names == ("API-Stable", "API-Unstable") and spec.statuses.blocking == {"API-Stable"}
    dist = tmp_path / "dist"
    write_release_dist(spec, dist)  # vision.transforms (API-Stable) fails in FAILED, ember.fft (API-Unstable) too

    # The gate: a failing API-Stable feature blocks a `gate: block` channel; API-Unstable never does.
    capsys.readouterr()
    assert main(["--root", str(spec_copy.root), "manifest", "gate", "--channel", "release", "--dist", str(dist)]) == 9
    err = " ".join(capsys.readouterr().err.split())
    assert "refuses artifacts with a API-Stable feature not proven by its tests" in err, err
    assert "vision.transforms (API-Stable)" in err and "ember.fft" not in err, err
    assert main(["--root", str(spec_copy.root), "manifest", "gate", "--channel", "nightly", "--dist", str(dist)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "marked: " in out and "vision.transforms (API-Stable)" in out, out
    assert "API-Unstable failure: " in out and "ember.fft (API-Unstable)" in out, out
    # The cp312 wheel was built and never tested: not proven either (report_release's stand-in).
    assert "ember-1.7.0+cpu-cp312-cp312-manylinux_2_35_x86_64.whl: its tests did not run" in out, out
    assert "2 of them not proven for API-Stable, marked" in out, out

    # The notes: a section per status of the vocabulary, in its order; the blockers are API-Stable's.
    notes = release_notes(build_report(spec, dist / "manifest.json", host_without_tools()), spec.features)
    headings = re.findall(r"^## (.+) features$", notes, flags=re.MULTILINE)
    assert headings == ["API-Stable", "API-Unstable"], headings
    assert re.search(r"- \d+ features: \d+ API-Stable, \d+ API-Unstable \(", notes), notes
    blockers = notes.split("## Release blockers\n", 1)[1].split("\n## ", 1)[0]
    assert "A API-Stable feature failed its tests" in blockers
    assert "`vision.transforms`, API-Stable): failed on linux-x86_64" in blockers and FAILED in blockers
    assert "ember.fft" not in blockers

    # The image labels list the features per status of the vocabulary (label keys are lowercase).
    (plan,) = image_plans(spec, "cpu", targets=["runtime"])
    labels = image_labels(plan, revision="abc", created_epoch=1700000000, source="https://x.example/y",
                          licenses="BSD-3-Clause")
    assert "elastic.launcher" in labels["org.shipyard.image.features.api-stable"].split(",")
    assert "ember.fft" in labels["org.shipyard.image.features.api-unstable"].split(",")
    assert not [k for k in labels if k.endswith((".stable", ".beta", ".prototype"))]

    # The test verdict: what blocks a cell is what the vocabulary says blocks.
    blocking = spec.statuses.blocking
    assert FeatureOutcome("vision.transforms", "API-Stable", 3, 1, 0, blocking=blocking).blocks_release
    assert not FeatureOutcome("ember.fft", "API-Unstable", 3, 1, 0, blocking=blocking).blocks_release


def test_a_status_outside_the_declared_vocabulary_is_bad_input(spec_copy, capsys):
    declare_api_statuses(spec_copy, keep="status: stable")  # ember.kernels keeps the old word
    capsys.readouterr()
    assert main(["--root", str(spec_copy.root), "validate"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    line = next(n for n, text in enumerate((spec_copy.root / F).read_text().splitlines(), 1)
                if text == "    status: stable")
    assert err == ["error: 1 problem in the release description:",
                   f"  {spec_copy.root / F}:{line}: features.0.status.*: must be one of API-Stable, API-Unstable; "
                   "use a status of the file's vocabulary (got 'stable'); did you mean 'API-Stable'?"], err


def test_a_status_declared_twice_is_bad_input(spec_copy, capsys):
    declare_api_statuses(spec_copy)
    spec_copy.edit(F, "  - {name: API-Unstable}\n", "  - {name: API-Unstable}\n  - {name: API-Stable}\n")
    capsys.readouterr()
    assert main(["--root", str(spec_copy.root), "validate"]) == 2
    err = capsys.readouterr().err
    assert "vocabulary.2.name: the status is declared twice; declare each once (got 'API-Stable')" in err, err
