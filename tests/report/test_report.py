"""`shipyard report` and `shipyard notes` on a partial manifest, an empty one and a broken one:
the page's cells and what they say, the terminal grid, the notes' sections, the CI log lines."""

from __future__ import annotations

import html
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from rich.console import Console
from support.report_release import (
    CACHED,
    FAILED,
    FAILED_LOG,
    PASSED,
    UNTESTED,
    expected_cell_count,
    host_without_tools,
    write_release_dist,
)

from shipyard.cli import main
from shipyard.cli.build_report import live_progress
from shipyard.errors import ShipyardError
from shipyard.plumbing.progress import running
from shipyard.record.manifest import NotApplicableRecord, merge_artifacts, read_manifest
from shipyard.release.spec import Spec
from shipyard.release.validate import load_spec
from shipyard.report.document import build_report
from shipyard.report.html import write_html
from shipyard.report.notes import release_notes
from shipyard.report.previous import load_previous
from shipyard.testing.verdict import FeatureOutcome
from shipyard.wheel.build_request import untested_detail

REPO = Path(__file__).resolve().parents[2]


class _Cells(HTMLParser):
    """The grid cells of a page (elements with data-cell), their state, and the text inside each."""

    def __init__(self) -> None:
        super().__init__()
        self.state: dict[str, str] = {}
        self.build: dict[str, str] = {}  # fresh or cache, for cells with an artifact
        self.text: dict[str, str] = {}
        self.links: list[str] = []
        self._open: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        cell = found.get("data-cell")
        if cell:
            self.state[cell] = found["data-state"] or ""
            if found.get("data-build"):
                self.build[cell] = found["data-build"] or ""
            self.text[cell] = ""
        if tag == "a" and found.get("href"):
            self.links.append(found["href"] or "")
        if tag == "details":
            self._open.append((tag, cell))

    def handle_endtag(self, tag: str) -> None:
        if tag == "details" and self._open:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        for _, cell in self._open:
            if cell:
                self.text[cell] += data


@pytest.fixture(scope="module")
def spec() -> Spec:
    return load_spec(REPO)


def _page(spec: Spec, dist: Path) -> tuple[_Cells, Path]:
    report = build_report(spec, dist / "manifest.json", host_without_tools())
    out = write_html(report, dist / "report" / "index.html", dist)
    parser = _Cells()
    parser.feed(out.read_text())
    return parser, out


def test_partial_manifest_page(spec: Spec, tmp_path: Path) -> None:
    manifest = write_release_dist(spec, tmp_path)
    page, out = _page(spec, tmp_path)
    assert len(page.state) == expected_cell_count(spec, manifest)
    assert {cell: page.state[cell] for cell in (PASSED, FAILED, CACHED, UNTESTED)} == {
        PASSED: "passed", FAILED: "failed", CACHED: "passed", UNTESTED: "skipped"}
    assert page.build == {PASSED: "fresh", FAILED: "fresh", CACHED: "cache", UNTESTED: "fresh"}
    # The failed cell opens to its tests per feature and the tail of its log.
    assert "vision.transforms" in page.text[FAILED] and "failed (1 of 1)" in page.text[FAILED]
    assert FAILED_LOG.splitlines()[1] in page.text[FAILED]
    # Cells not built here say why: a missing interpreter, an exclusion, the runner that builds them.
    assert page.state["ember-cpu-linux-x86_64-cp39-wheel"] == "unavailable"
    assert "Python 3.9" in page.text["ember-cpu-linux-x86_64-cp39-wheel"]
    assert page.state["ember-cpu-windows-amd64-cp311-wheel"] == "elsewhere"
    assert "builds on windows-2022" in page.text["ember-cpu-windows-amd64-cp311-wheel"]
    assert page.state["ember-cu118-macos-arm64-cp311-wheel"] == "excluded"
    assert "no CUDA on macOS" in page.text["ember-cu118-macos-arm64-cp311-wheel"]
    # Every artifact link opens its file, relative to the page.
    assert len(page.links) == 4
    assert all((out.parent / link).resolve().is_file() for link in page.links), page.links
    html = out.read_text()
    assert "passed, 4 of 6 skipped" not in html  # ember.cuda: 4 passed, 2 skipped of 6 in one cell
    assert "passed, 2 of 6 skipped in 1 cell" in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html), "the page must not load anything from outside"


def _text(fragment: str) -> str:
    """What a reader sees of an HTML fragment: its text, blanks collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def test_the_report_leads_with_what_ran_here_its_blockers_and_artifacts_then_the_active_columns(
        spec: Spec, tmp_path: Path) -> None:
    """Opened after a run, the page first says what ran here (counted from the manifest), what
    blocks the release and the artifacts; the grid shows the columns where something was built,
    and the rest sit in a closed <details>; a cell says its test result and, apart, whether its
    build (and verdict) came from the cache."""
    write_release_dist(spec, tmp_path)
    data = json.loads((tmp_path / "manifest.json").read_text())
    passed = next(a for a in data["artifacts"] if a["cell_id"] == PASSED)
    passed["build"]["cached"] = True  # a cached build whose tests ran in this run
    (tmp_path / "manifest.json").write_text(json.dumps(data))
    page, out = _page(spec, tmp_path)
    text = out.read_text()
    # Order: the answer first, then the grid.
    order = [text.index(f'<section id="{name}">') for name in ("summary", "blockers", "artifacts", "grid")]
    assert order == sorted(order), order
    # The counts, against the manifest's own records.
    records = data["artifacts"]
    verdict = [a for a in records if a["tests"] and a["build"]["result"] != "not tested"]
    expected = {
        "built": len(records), "tested": len(verdict),
        "passed": sum(a["tests"]["result"] == "passed" for a in verdict),
        "failed": sum((a["tests"] or {}).get("result") == "failed" or a["build"]["result"] == "failed"
                      for a in records),
        "not-tested": len(records) - len(verdict),
        "cached-build-fresh-tests": sum(a["build"]["cached"] and a["build"]["result"] != "cached" for a in verdict),
        "cached-verdict": sum(a["build"]["result"] == "cached" for a in verdict)}
    shown = {key: int(n) for key, n in re.findall(
        r'<li data-count="([a-z-]+)"><strong class="number">(\d+)</strong>', text)}
    assert shown == expected == {"built": 4, "tested": 3, "passed": 2, "failed": 1, "not-tested": 1,
                                 "cached-build-fresh-tests": 1, "cached-verdict": 1}
    summary = _text(text[order[0]:order[1]])
    assert "4 built here" in summary and "1 cached build, tests run now" in summary, summary
    assert f"{FAILED}: stable feature vision.transforms failed" in _text(text[order[1]:order[2]])
    # The grid: the columns with something built, then the others behind one click, no script.
    grid = text[order[3]:text.index("</section>", order[3])]
    first, _, quiet = grid.partition('<details class="quiet-columns"')
    assert re.findall(r'<th scope="col">([^<]+)</th>', first) == [
        "component · Python", "cpu · linux-x86_64", "any variant · any platform"]
    hidden = re.findall(r'<th scope="col">([^<]+)</th>', quiet)
    assert {"cpu · windows-amd64", "cuda11 · linux-x86_64", "cuda11 · macos-arm64"} <= set(hidden), hidden
    assert "cpu · linux-x86_64" not in hidden and " open" not in quiet.split(">", 1)[0] and "<script" not in text
    assert len(page.state) == expected_cell_count(spec, read_manifest(tmp_path / "manifest.json"))
    # Each built cell: its test result, and apart from it where its build came from.
    summaries = {cell: _text(s) for cell, s in re.findall(
        r'data-cell="([^"]+)"[^>]*>\s*<summary[^>]*>(.*?)</summary>', text, re.S)}
    assert summaries[CACHED] == "✓ passed wheel ↻ build and verdict from cache"  # result, type, build
    assert summaries[PASSED].startswith("✓ passed") and summaries[PASSED].endswith("↻ build from cache")
    assert "cache" not in summaries[FAILED] and summaries[FAILED].startswith("✗ failed")
    assert (page.state[CACHED], page.build[CACHED], page.state[PASSED], page.build[PASSED]) == (
        "passed", "cache", "passed", "cache")
    assert "Tests: not run again; the verdict of these same bytes was reused." in _text(page.text[CACHED])
    assert "Build: from shipyard's build cache" in _text(page.text[PASSED])
    assert "Tests: run in this run." in _text(page.text[PASSED])


def test_a_cell_left_out_by_test_python_reads_built_not_tested_even_when_its_build_was_cached(
        spec: Spec, tmp_path: Path) -> None:
    """`shipyard build --test-python 3.11` builds and checks every Python, tests one: the others
    record no verdict, and a cached build must not make them look cached (tested before)."""
    write_release_dist(spec, tmp_path)
    data = json.loads((tmp_path / "manifest.json").read_text())
    record = next(a for a in data["artifacts"] if a["cell_id"] == UNTESTED)
    record["build"] |= {"result": "not tested", "cached": True, "detail": untested_detail(("3.11",))}
    (tmp_path / "manifest.json").write_text(json.dumps(data))
    page, _ = _page(spec, tmp_path)
    assert page.state[UNTESTED] == "skipped"
    text = " ".join(page.text[UNTESTED].split())
    assert "built, not tested" in text and "not tested (--test-python 3.11): built and checked" in text, text
    assert page.state[UNTESTED] == "skipped" and page.build[UNTESTED] == "cache"
    assert page.state[CACHED] == "passed" and page.build[CACHED] == "cache"  # a tested cached cell stays what it is


def test_empty_manifest_page(spec: Spec, tmp_path: Path) -> None:
    page, out = _page(spec, tmp_path)  # no manifest.json at all
    assert len(page.state) == expected_cell_count(spec, None)
    assert set(page.state.values()) <= {"unavailable", "elsewhere", "excluded", "pending"}
    assert {"unavailable", "elsewhere", "excluded"} <= set(page.state.values())
    assert "No artifacts in the manifest." in out.read_text()


def test_cli_report_text_and_html(spec: Spec, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_release_dist(spec, tmp_path)
    assert main(["--root", str(REPO), "report", "--format", "text", "--dist", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "1 failed" in out and "2 passed" in out and "↻ 1 built from the cache" in " ".join(out.split())
    row = next(line for line in out.splitlines() if "embervision · py3.11" in line)
    assert "✗" in row  # the failed wheel, in its row, with its reason below the grid
    assert f"✗ failed {FAILED}: stable feature vision.transforms failed" in out
    assert main(["--root", str(REPO), "report", "--dist", str(tmp_path)]) == 0
    assert f"wrote {tmp_path / 'report' / 'index.html'}" in capsys.readouterr().out


def test_not_applicable_cells_are_shown_as_such_with_their_reason(spec_copy, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """embervision's requires-python rules out 3.9 and 3.10: those cells are neither failed nor
    missing, on every platform and package type, whether the build recorded them or not yet."""
    spec_copy.edit("release.yaml", "    import_name: embervision\n",
                   "    import_name: embervision\n    requires_python: \">=3.11\"\n")
    spec = load_spec(spec_copy.root)
    dist = tmp_path / "dist"
    write_release_dist(spec, dist)
    recorded = "embervision-cpu-linux-x86_64-cp39-wheel"  # as `shipyard build` records it
    merge_artifacts(dist / "manifest.json", release="ember", version="1.7.0", records=[], not_applicable=[
        NotApplicableRecord(cell_id=recorded, component="embervision", package_type="wheel", variant="cpu",
                            variant_tag="cpu", platform="linux-x86_64", python="3.9",
                            reason="requires-python >=3.11")])
    page, out = _page(spec, dist)
    ruled_out = {c for c, state in page.state.items() if state == "not-applicable"}
    assert recorded in ruled_out
    assert {"embervision-cu118-windows-amd64-cp310-wheel", "embervision-cpu-linux-x86_64-cp39-conda"} <= ruled_out
    # Every embervision cell of 3.9 and 3.10 is not applicable, but where an exclusion removed it first.
    assert {page.state[c] for c in page.state if c.startswith("embervision-") and ("-cp39-" in c or "-cp310-" in c)
            and c not in ruled_out} == {"excluded"}
    assert {c for c in ruled_out if not c.startswith("embervision-") or not ("-cp39-" in c or "-cp310-" in c)} == set()
    for cell in ruled_out:
        assert "not applicable: requires-python >=3.11" in page.text[cell]
    assert "rules out Python 3.10; never built, never a failure" in page.text[
        "embervision-cpu-linux-x86_64-cp310-wheel"]
    assert page.state["embervision-cpu-linux-x86_64-cp311-wheel"] == "failed"  # the Pythons it admits: as before
    assert page.state["ember-cpu-linux-x86_64-cp39-wheel"] == "unavailable"  # ember admits 3.9
    html = out.read_text()
    assert f"{len(ruled_out)} not applicable (requires-python)</li>" in " ".join(html.split())

    assert main(["--root", str(spec_copy.root), "report", "--format", "text", "--dist", str(dist)]) == 0
    text = capsys.readouterr().out
    assert f"⊖ {len(ruled_out)} not applicable (requires-python)" in " ".join(text.split())
    for python in ("3.9", "3.10"):
        row = next(line for line in text.splitlines() if f"embervision · py{python} " in line)
        assert "⊖" in row and not {"✗", "⊘", "…"} & set(row), row
    assert (f"⊖ embervision · Python 3.9, 3.10 ({len(ruled_out)} cells): not applicable: requires-python >=3.11; "
            f"never built, never a failure") in " ".join(text.split())
    assert "✗ failed embervision-cpu-linux-x86_64-cp39" not in text


def test_an_sdist_is_a_row_of_its_own_that_names_the_wheels_built_from_it(spec_copy, tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """ember (native) and emberaudio (pure) make sdists: each sits in a row of its own, `<component> ·
    sdist`, never in the pure wheel's slot, with the wheels built from it; exclusions of some variants
    and platforms leave the one sdist whole."""
    from shipyard.record.manifest import ArtifactRecord

    spec_copy.edit("release.yaml", "    import_name: ember\n    package_types: [wheel, conda]\n",
                   "    import_name: ember\n    package_types: [wheel, conda, sdist]\n")
    spec_copy.edit("release.yaml", "    import_name: emberaudio\n    package_types: [wheel, conda]\n",
                   "    import_name: emberaudio\n    package_types: [wheel, conda, sdist]\n")
    spec = load_spec(spec_copy.root)
    dist = tmp_path / "dist"
    write_release_dist(spec, dist)

    def sdist(component: str, proven_by: tuple[str, ...]) -> ArtifactRecord:
        (dist / "sdist").mkdir(exist_ok=True)
        path = dist / "sdist" / f"{component}-1.7.0.tar.gz"
        path.write_bytes(b"sdist")
        return ArtifactRecord(name=path.name, path=f"sdist/{path.name}", sha256="0" * 64, size=5,
                              cell_id=f"{component}-any-sdist", component=component, package_type="sdist",
                              variant="any", variant_tag="any", platform="any", python=None, version="1.7.0",
                              features=(), tests=None, build={"result": "built", "seconds": 1.5},
                              proven_by=proven_by)

    merge_artifacts(dist / "manifest.json", release="ember", version="1.7.0",
                    records=[sdist("ember", (PASSED, UNTESTED)), sdist("emberaudio", (CACHED,))])
    page, out = _page(spec, dist)
    assert {c: s for c, s in page.state.items() if c.endswith("-sdist")} == {
        "ember-any-sdist": "skipped", "emberaudio-any-sdist": "skipped"}  # no excluded sdist of a variant
    assert f"the wheels built from it prove it: {PASSED}, {UNTESTED}" in " ".join(page.text["ember-any-sdist"].split())
    rows = re.findall(r'<th scope="row">([^<]+)</th>', out.read_text())
    assert "ember · sdist" in rows and "emberaudio · sdist" in rows
    assert main(["--root", str(spec_copy.root), "report", "--format", "text", "--dist", str(dist)]) == 0
    text = capsys.readouterr().out
    assert "d docker, s sdist; columns of excluded cells only are left out" in " ".join(text.split())  # the legend
    audio = next(line for line in text.splitlines() if "emberaudio · no Python" in line)
    assert "w✓" in audio and "s" not in audio.split("│")[-2], audio  # the pure wheel's slot holds no sdist
    row = next(line for line in text.splitlines() if "emberaudio · sdist" in line)
    assert row.split("│")[-2].strip() == "s–", row  # built, not tested: its wheels are its tests


def test_broken_manifest_names_the_file(spec: Spec, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "manifest.json").write_text('{"release": "ember", "version": "1.7.0", "artifacts": [{"name": 1}]}')
    assert main(["--root", str(REPO), "report", "--dist", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    # The first bad key in the record's field order: the cell identity (manifest.CellRecord) comes first.
    assert f"{tmp_path / 'manifest.json'}: artifacts.0.cell_id: Field required; a shipyard manifest is written by " \
           f"a build" in " ".join(err.split())


def _section(notes: str, heading: str) -> str:
    """The text under `heading` up to the next heading of the same or a higher level."""
    level = heading.split(" ")[0]
    body = notes.split(f"\n{heading}\n", 1)[1]
    stop = re.search(rf"\n#{{1,{len(level)}}} ", body)
    return body[:stop.start()] if stop else body


def test_notes_list_failing_beta_and_status_change(spec: Spec, tmp_path: Path) -> None:
    write_release_dist(spec, tmp_path / "dist")
    previous = tmp_path / "feature_status-1.6.yaml"
    text = (REPO / "feature_status.yaml").read_text()
    # In the previous release set_deterministic was a prototype and audio did not exist yet.
    old = text.replace("title: set_deterministic\n    component: ember\n    since: 1.7.0\n    status: beta",
                       "title: set_deterministic\n    component: ember\n    since: 1.7.0\n    status: prototype")
    assert old != text
    start = old.index("  - id: audio.core")
    end = old.find("\n  - id:", start + 1)
    previous.write_text(old[:start] + (old[end + 1:] if end != -1 else ""))
    report = build_report(spec, tmp_path / "dist" / "manifest.json", host_without_tools())
    notes = release_notes(report, spec.features, load_previous(REPO, str(previous)))

    beta = _section(notes, "## Beta features")
    # ember's CPU wheels for linux-x86_64-manylinux2014 carry it too
    assert ("- **NumPy-compatible ember.fft** (`ember.fft`, ember): linux-x86_64, linux-x86_64-manylinux2014, "
            "windows-amd64, macos-arm64") in beta
    issues = _section(notes, "## Known issues")
    fft = next(line for line in issues.splitlines() if "`ember.fft`" in line)
    assert f"failed on linux-x86_64: failed, 1 of 1 tests in 1 of 1 cells ({PASSED})" in fft
    assert ("not tested on linux-x86_64-manylinux2014, windows-amd64, macos-arm64 (no cell of those platforms is "
            "in this manifest)") in fft
    blockers = _section(notes, "## Release blockers")
    assert "`vision.transforms`, stable): failed on linux-x86_64" in blockers and FAILED in blockers
    changes = _section(notes, "### Status changes")
    assert "- **set_deterministic** (`ember.deterministic`): prototype → beta on linux-x86_64, " \
           "linux-x86_64-manylinux2014, windows-amd64, macos-arm64" in changes
    assert "`audio.core`" in _section(notes, "### New features")
    assert "`ember.fft`" not in _section(notes, f"## Changes since {previous}")
    # A promotion is a highlight; a feature new since then too.
    highlights = _section(notes, "## Highlights")
    assert "- set_deterministic (`ember.deterministic`) is now beta on linux-x86_64, linux-x86_64-manylinux2014, " \
           "windows-amd64, macos-arm64 (was prototype)." in highlights
    assert f"- New since {previous}: audio: WAV IO, resampling, spectrograms (`audio.core`)." in highlights


def test_notes_cli_previous_git_ref(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # This repository's own HEAD as the previous release: git shows its feature_status.yaml.
    assert main(["--root", str(REPO), "notes", "--dist", str(tmp_path), "--previous", "HEAD"]) == 0
    notes = (tmp_path / "RELEASE_NOTES.md").read_text()
    assert notes.startswith("# ember 1.7.0 release notes\n\n## Highlights\n")
    assert "## Changes since HEAD" in notes
    assert main(["--root", str(REPO), "notes", "--dist", str(tmp_path), "--previous", "v0.0-no-such-tag"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "v0.0-no-such-tag: --previous: no such file, and git cannot show feature_status.yaml" in err


def test_previous_file_that_is_not_a_feature_file(tmp_path: Path) -> None:
    bad = tmp_path / "old.yaml"
    bad.write_text("schema_version: 1\nfeatures:\n  - id: ember.fft\n    title: fft\n")
    with pytest.raises(ShipyardError, match=rf"{re.escape(str(bad))}:3: features\.0\.component: Field required"):
        load_previous(REPO, str(bad))


def test_progress_without_a_terminal_is_plain_timestamped_lines() -> None:
    out = io.StringIO()
    with live_progress(Console(file=out, width=160), "build cpu") as progress:
        progress("ember: native core for cpu")
        with running(progress, "test ember-cpu-linux-x86_64-cp311-wheel"):
            pass
    lines = out.getvalue().splitlines()
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
    assert re.fullmatch(rf"{stamp} build cpu: ember: native core for cpu", lines[0]), lines
    assert re.fullmatch(rf"{stamp} build cpu: test ember-cpu-linux-x86_64-cp311-wheel: ended after \d+\.\d s",
                        lines[2]), lines
    assert not any(".py:" in line for line in lines), lines  # no source-file column


def _luminance(hex_colour: str) -> float:
    channels = [int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def test_every_state_and_badge_has_readable_contrast() -> None:
    css = (REPO / "src" / "shipyard" / "report" / "templates" / "report.css").read_text()
    pairs = {name: (bg, fg) for name, bg, fg in
             re.findall(r"\.(state-[a-z]+) \{ background: (#[0-9a-f]{6}); color: (#[0-9a-f]{6});", css)}
    pairs |= {name: (bg, "#ffffff") for name, bg in re.findall(r"\.badge\.([a-z]+) \{ background: (#[0-9a-f]{6}); \}",
                                                               css)}
    assert set(pairs) >= {f"state-{s}" for s in ("passed", "failed", "skipped", "unavailable", "excluded",
                                                 "elsewhere", "pending")} | {"stable", "beta", "prototype"}
    for name, (bg, fg) in pairs.items():
        light, dark = sorted((_luminance(bg), _luminance(fg)), reverse=True)
        assert (light + 0.05) / (dark + 0.05) >= 4.5, (name, bg, fg)  # WCAG AA for normal text


def test_images_mobile_and_mutex_records_get_their_cells(spec: Spec, tmp_path: Path) -> None:
    """Records of every artifact kind sit in the grid: two images of one variant share a slot,
    the mobile package its target's column, the conda mutex its variant's."""
    from shipyard.record.manifest import ArtifactRecord, merge_artifacts

    def record(cell_id: str, **fields: object) -> ArtifactRecord:
        base: dict[str, object] = dict(name=cell_id, path="", sha256="0" * 64, size=1000, cell_id=cell_id,
                                       component="ember", package_type="docker", variant="cpu", variant_tag="cpu",
                                       platform="linux-x86_64", python="3.11", version="1.7.0", features=(),
                                       tests=None, build={})
        return ArtifactRecord.model_validate(base | fields)

    records = [
        record("ember-1.7.0-cpu-runtime", build={"cached": True, "seconds": 2.0, "budget_mb": 0.0005}),
        record("ember-1.7.0-cpu-devel", build={"cached": False, "seconds": 80.0, "budget_mb": 900}),
        record("ember-lite-cpu-host-mobile", component="ember-lite", package_type="mobile", platform="host",
               python=None, tests={"result": "passed", "tests_run": True, "detail": ""}, build={"seconds": 9.0}),
        record("ember-variant-cpu-conda", component="ember-variant", package_type="conda", platform="any",
               python=None, build={"result": "built", "seconds": 1.0}),
    ]
    manifest = merge_artifacts(tmp_path / "manifest.json", release="ember", version="1.7.0", records=records)
    page, out = _page(spec, tmp_path)
    assert len(page.state) == expected_cell_count(spec, manifest)
    assert page.state["ember-1.7.0-cpu-runtime"] == "skipped" and page.state["ember-1.7.0-cpu-devel"] == "skipped"
    assert page.build["ember-1.7.0-cpu-runtime"] == "cache" and page.build["ember-1.7.0-cpu-devel"] == "fresh"
    assert page.state["ember-lite-cpu-host-mobile"] == "passed"
    html = out.read_text()
    assert "cpu · any platform" in html  # the mutex's column
    assert "over budget" in html  # the runtime image against its (tiny) budget


def _record_features(dist: Path, cell_id: str, **features: FeatureOutcome) -> None:
    """Rewrite what the manifest says of some features' tests in one cell (as the build records them)."""
    path = dist / "manifest.json"
    manifest = json.loads(path.read_text())
    [record] = [a for a in manifest["artifacts"] if a["cell_id"] == cell_id]
    for fid, f in features.items():
        record["tests"]["features"][fid.replace("_", ".")] = {
            "status": f.status, "result": f.result, "summary": f.summary, "passed": f.passed, "failed": f.failed,
            "skipped": f.skipped, "skip_reasons": list(f.skip_reasons), "not_run": f.not_run,
            "not_run_reasons": list(f.not_run_reasons)}
    path.write_text(json.dumps(manifest))


def test_partly_skipped_and_not_run_features_are_named_in_the_notes_and_the_table(spec: Spec, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    write_release_dist(spec, dist)
    died = "the interpreter died (killed by signal SIGKILL) while tests/test_join.py::test_uneven ran"
    _record_features(
        dist, PASSED,
        ember_kernels=FeatureOutcome("ember.kernels", "stable", 10, 0, 3, ("no CUDA device",)),
        distributed_collectives=FeatureOutcome("distributed.collectives", "stable", 4, 0, 0, not_run=1,
                                               not_run_reasons=(died,)),
        distributed_join=FeatureOutcome("distributed.join", "beta", 2, 0, 0, not_run=3, not_run_reasons=(died,)))
    report = build_report(spec, dist / "manifest.json", host_without_tools())
    notes = release_notes(report, spec.features)
    blockers = _section(notes, "## Release blockers")
    assert (f"- **TCP store and collectives** (`distributed.collectives`, stable): not run on linux-x86_64: not run, "
            f"1 of 5 not run in 1 of 1 cells ({died}) ({PASSED}).") in blockers
    issues = _section(notes, "## Known issues")
    assert ("(`ember.kernels`, stable): partly skipped on linux-x86_64: passed, 3 of 13 skipped in 1 cell "
            "(no CUDA device).") in issues
    assert (f"(`distributed.join`, beta): not run on linux-x86_64: not run, 3 of 5 not run in 1 of 1 cells "
            f"({died}) ({PASSED})") in issues
    # The page's feature table says the same, in the feature's row and the platform's column.
    html = write_html(report, dist / "report" / "index.html", dist).read_text()
    assert "passed, 3 of 13 skipped in 1 cell (no CUDA device)" in html
    assert f"not run, 1 of 5 not run in 1 of 1 cells ({died})" in html
