"""dist/report/get-started.html as a user meets it: real headless Chromium picks every combination
of OS, package manager, compute platform and channel by clicking the labels, and the one answer
it shows must be the command (or the reason there is none) worked out here from release.yaml and
the manifest. The page itself has no script; only the test's copy carries the clicking one."""

from __future__ import annotations

import html
import itertools
import json
import re
from pathlib import Path

import pytest
from support.headless_chromium import chromium
from support.report_release import add_conda_and_image, write_release_dist

from shipyard.cli import main
from shipyard.release.spec import Spec
from shipyard.release.validate import load_spec
from shipyard.report.get_started import write_get_started

REPO = Path(__file__).resolve().parents[2]

# Clicks every combination's labels (a label click is what a mouse or a screen reader's activation
# does) and writes, for each, the texts of the answers left visible, as JSON, into the DOM.
PICK_EVERY_COMBINATION = """<script>
const groups = ['platform', 'installer', 'variant', 'channel'];
const values = groups.map(g => [...document.querySelectorAll(`input[name=${g}]`)].map(i => i.value));
function shown() {
  return [...document.querySelectorAll('.answer')].filter(a => getComputedStyle(a).display !== 'none')
    .map(a => (a.querySelector('.command') || a.querySelector('.not-built')).textContent);
}
const seen = {initial: shown()};
function visit(depth, picked) {
  if (depth === groups.length) {
    seen[picked.join('|')] = shown();
    return;
  }
  for (const value of values[depth]) {
    const input = document.querySelector(`input[name=${groups[depth]}][value="${value}"]`);
    input.labels[0].click();
    visit(depth + 1, [...picked, value]);
  }
}
visit(0, []);
const out = document.createElement('pre');
out.id = 'seen';
out.textContent = JSON.stringify(seen);
document.body.append(out);
</script>"""


def _expected(spec: Spec, platform: str, installer: str, variant: str, channel: str) -> tuple[str, str]:
    """('command', the exact command) or ('reason', words the reason must hold), for the manifest of
    report_release (nightly-gated cpu wheels for linux, conda packages and the runtime image) as
    release.yaml describes where they go."""
    release = spec.release
    if platform == "macos-arm64" and variant != "cpu":
        return "reason", "(no CUDA on macOS)"
    if platform == "windows-amd64" and variant == "cuda10.2":
        return "reason", "CUDA 10.2 Windows builds were dropped"
    if platform == "linux-x86_64-manylinux2014" and variant != "cpu":
        return "reason", "nvcc takes gcc as its host compiler, not zig's clang"
    if platform == "linux-x86_64-manylinux2014" and installer == "conda":
        return "reason", "only wheels promise a glibc"
    if installer == "docker" and platform != "linux-x86_64":
        return "reason", "The Docker images are linux-x86_64 images"
    if installer == "docker" and variant not in ("cpu", "cuda11"):
        return "reason", "Docker images are built for cpu, cuda11 only"
    if channel != "nightly":  # the manifest has a failing stable feature: test and release are gated
        return "reason", f"the {channel} channel's gate blocks this build"
    if (platform, variant) != ("linux-x86_64", "cpu"):
        return "reason", "Not built: the manifest holds no"
    tree = release.publish["wheels-tree"].url
    conda = release.publish["conda-channel"].url  # a bucket's channel: public, no token in the path
    return "command", {
        "pip": f"pip3 install ember embervision emberaudio --index-url {tree}nightly/cpu/",
        "uv": f"uv pip install ember embervision emberaudio --index-url {tree}nightly/cpu/",
        "conda": f"conda install -c {conda}nightly/ -c conda-forge 'ember-variant ==1.0 cpu' ember emberaudio",
        "docker": f"docker pull {release.publish['images'].url.removeprefix('https://')}/ember:1.7.0-cpu-runtime-nightly",
    }[installer]


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Spec, Path]:
    spec = load_spec(REPO)
    dist = tmp_path_factory.mktemp("dist")
    write_release_dist(spec, dist)
    manifest = add_conda_and_image(spec, dist)
    return spec, write_get_started(spec.release, manifest, dist / "report" / "get-started.html")


def test_chromium_shows_the_right_command_for_every_combination(page: tuple[Spec, Path], tmp_path: Path) -> None:
    spec, out = page
    clicking = out.with_name("clicking.html")
    clicking.write_text(out.read_text().replace("</body>", PICK_EVERY_COMBINATION + "\n</body>"))
    dom = chromium(tmp_path / "profile", "--dump-dom", clicking.as_uri()).stdout
    seen = json.loads(html.unescape(re.search(r'<pre id="seen">(.*?)</pre>', dom, re.S).group(1)))
    release = spec.release
    combinations = list(itertools.product(release.platforms, ("pip", "uv", "conda", "docker"), release.variants,
                                          release.channels))
    # Before any click, the default pick (linux · pip · CPU · stable) shows its one answer: the
    # release channel's gate keeps this manifest out, and the page says so.
    initial = seen.pop("initial")
    assert initial == seen["linux-x86_64|pip|cpu|release"] and "release channel's gate blocks" in initial[0], initial
    # 4 platforms: linux-x86_64-manylinux2014 is one, labelled with the glibc it needs (below)
    assert len(seen) == len(combinations) == 4 * 4 * 5 * 3
    commands = 0
    for combination in combinations:
        shown = seen["|".join(combination)]
        assert len(shown) == 1, (combination, shown)  # exactly one answer at a time
        kind, expected = _expected(spec, *combination)
        if kind == "command":
            commands += 1
            assert shown[0] == expected, combination
        else:
            assert expected in shown[0] and not shown[0].startswith(("pip3 ", "uv ", "conda ", "docker ")), (
                combination, shown[0])
    assert commands == 4


def test_without_script_the_default_choice_shows_its_command_and_every_control_has_a_label(
        page: tuple[Spec, Path], tmp_path: Path) -> None:
    """What a browser shows with scripts off (the page has none): the default combination's command,
    and real radio inputs, each with a label, grouped under a legend, in the tab order."""
    _, out = page
    text = out.read_text()
    assert "<script" not in text and not re.search(r"""(src|href)=["']?(https?:)?//""", text)
    dom = chromium(tmp_path / "profile", "--dump-dom", out.as_uri()).stdout
    radios = re.findall(r'<input class="radio" type="radio" name="(\w+)" id="([\w-]+)"', dom)
    assert {name for name, _ in radios} == {"platform", "installer", "variant", "channel"}
    assert all(f'<label for="{ident}">' in dom for _, ident in radios)
    # Two Linux x86_64 platforms, told apart by the glibc their wheels need.
    assert ">Linux (x86_64, glibc 2.31 or newer)</label>" in dom
    assert ">Linux (x86_64, glibc 2.17 or newer)</label>" in dom
    assert ">Windows (amd64)</label>" in dom
    assert dom.count("<legend") == 4 and "tabindex" not in dom
    assert "display: none" not in re.search(r"\.radio \{[^}]*\}", text).group()  # hidden, yet in the tab order
    assert sum(" checked" in tag for tag in re.findall(r'<input class="radio"[^>]*>', dom)) == 4  # one per group


def test_report_command_writes_the_page_beside_the_report(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    spec = load_spec(REPO)
    write_release_dist(spec, tmp_path)
    assert main(["--root", str(REPO), "report", "--dist", str(tmp_path)]) == 0
    page = tmp_path / "report" / "get-started.html"
    assert f"wrote {page}" in " ".join(capsys.readouterr().out.split())
    # release.yaml's real place: PyTorch's layout in the bucket, read at its URL
    assert ("pip3 install ember embervision emberaudio --index-url "
            "https://ember-ml-downloads.s3.us-east-1.amazonaws.com/whl/nightly/cpu/") in page.read_text()
    # with the stand-ins here, the page names them
    assert main(["--root", str(REPO), "--targets", str(REPO / "local-targets.yaml"), "report", "--dist",
                 str(tmp_path)]) == 0
    assert "pip3 install ember embervision emberaudio --index-url http://127.0.0.1:8083/whl/nightly/cpu/" in (
        page.read_text())
