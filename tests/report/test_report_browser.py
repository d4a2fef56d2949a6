"""The report as a release manager sees it: rendered by a real headless Chromium (Debian's
`chromium`, installed by ci/bootstrap.sh), its DOM counted and its screenshot's pixels read."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from PIL import Image
from support.headless_chromium import HEIGHT, WIDTH, chromium
from support.report_release import FAILED, PASSED, expected_cell_count, host_without_tools, write_release_dist

from shipyard.release.spec import Spec
from shipyard.release.validate import load_spec
from shipyard.report.document import build_report
from shipyard.report.html import write_html

REPO = Path(__file__).resolve().parents[2]
# The backgrounds report.css gives a passed and a failed cell.
PASSED_RGB, FAILED_RGB = (0xD4, 0xED, 0xDA), (0xF8, 0xD7, 0xDA)

# Writes where each cell's summary sits on the page into the DOM, for --dump-dom to hand back.
# Only the test's copy of the page carries it; the report itself has no script.
MEASURE = """<script>
for (const cell of document.querySelectorAll('[data-cell]')) {
  const box = cell.querySelector('summary').getBoundingClientRect();
  cell.setAttribute('data-box', [box.left, box.top, box.width, box.height].map(Math.round).join(','));
}
</script>"""


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Spec, int, Path]:
    spec = load_spec(REPO)
    dist = tmp_path_factory.mktemp("dist")
    manifest = write_release_dist(spec, dist)
    out = write_html(build_report(spec, dist / "manifest.json", host_without_tools()), dist / "report" / "index.html",
                     dist)
    return spec, expected_cell_count(spec, manifest), out


def test_dom_holds_every_cell(page: tuple[Spec, int, Path], tmp_path: Path) -> None:
    _, expected, out = page
    dom = chromium(tmp_path / "profile", "--dump-dom", out.as_uri()).stdout
    cells = re.findall(r'<details class="cell state-([a-z-]+)" data-cell="([^"]+)"', dom)
    assert len(cells) == expected
    assert dict((cell, state) for state, cell in cells)[FAILED] == "failed"


def test_screenshot_colours_failed_and_passed_cells(page: tuple[Spec, int, Path], tmp_path: Path) -> None:
    _, _, out = page
    measured = out.with_name("measured.html")
    measured.write_text(out.read_text().replace("</body>", MEASURE + "\n</body>"))
    dom = chromium(tmp_path / "profile-measure", "--dump-dom", measured.as_uri()).stdout
    boxes = {cell: tuple(map(int, box.split(",")))
             for cell, box in re.findall(r'data-cell="([^"]+)"[^>]*data-box="([-\d,]+)"', dom)}
    shot = tmp_path / "report.png"
    chromium(tmp_path / "profile-shot", f"--screenshot={shot}", out.as_uri())
    image = Image.open(shot).convert("RGB")
    assert image.size == (WIDTH, HEIGHT)

    def colour(cell: str) -> tuple[int, int, int]:
        left, top, width, height = boxes[cell]
        assert 0 <= left and left + width <= WIDTH and 0 <= top and top + height <= HEIGHT, (cell, boxes[cell])
        return image.getpixel((left + 2, top + 2))  # inside the padding, clear of the text

    passed, failed = colour(PASSED), colour(FAILED)
    assert passed != failed
    assert max(abs(a - b) for a, b in zip(passed, PASSED_RGB, strict=True)) <= 3, passed
    assert max(abs(a - b) for a, b in zip(failed, FAILED_RGB, strict=True)) <= 3, failed
