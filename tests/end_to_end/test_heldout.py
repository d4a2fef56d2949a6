"""The held-out check: three real sdists from PyPI, none of which shipyard's own tests use, built as
one release (tests/heldout/release.yaml, pinned by sha256) for every Python on two glibc promises,
manylinux2014 (zig's clang) and manylinux_2_31 (the bullseye sysroot), each wheel tested with its
project's own test suite; then every wheel of Python 3.9 (bullseye's own python3) installed with pip
inside a debootstrapped `debian:bullseye` container and the project's tests run there too.

msgpack (C from Cython), ujson (C and C++: double-conversion) and argon2-cffi-bindings (cffi, one abi3
wheel for every Python, checked by abi3audit). `nox -s heldout` runs it (about 15 minutes here); it
is left out of `nox -s tests`. Both tests print a table of what they saw.
"""

from __future__ import annotations

import json
import re
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.bullseye_python import bullseye_python_image

from shipyard.cli import main
from shipyard.image.deps import ensure_wheelhouse
from shipyard.plumbing import command
from shipyard.release.validate import load_spec
from shipyard.testing.container import run_tests_in_container
from shipyard.testing.verdict import feature_gate, fold_feature_report
from shipyard.wheel.limited_api import abi3_problems

# Two cold builds of 11 cells each (about 10 minutes here) fall in the first test: beyond the suite's 1200 s.
pytestmark = [pytest.mark.slow, pytest.mark.heldout, pytest.mark.timeout(3600)]

RELEASE = Path(__file__).resolve().parents[1] / "heldout"
# release.yaml's platforms and the glibc each promises: a wheel is labelled with the promise, and
# auditwheel must find it consistent with that glibc or an older one (it names the oldest it fits).
PROMISES = {"linux-x86_64": "manylinux_2_17_x86_64", "linux-x86_64-glibc231": "manylinux_2_31_x86_64"}


def _glibc(tag: str) -> tuple[int, int]:
    found = re.fullmatch(r"manylinux_(\d+)_(\d+)_x86_64", tag)
    return (int(found.group(1)), int(found.group(2))) if found else (99, 99)
BULLSEYE_PYTHON = "3.9"  # Debian 11's own python3: the one Python a bullseye user pip-installs into
IMPORTS = {"msgpack": "msgpack._cmsgpack", "ujson": "ujson", "argon2-cffi-bindings": "_argon2_cffi_bindings"}


@dataclass(frozen=True)
class Built:
    dist: Path
    seconds: dict[str, float]  # per platform: the wall time of its `shipyard build`


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"  # noqa: E731
    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """Both platforms of the release built, repaired, checked and tested into one dist/, from a cold
    build state (the sdists and zig's compiled libc++ stay in shipyard's cache)."""
    for toolchain in ("zig-2.17", "bullseye"):
        assert main(["toolchain", "install", toolchain]) == 0
    work = tmp_path_factory.mktemp("heldout")
    dist, state = work / "dist", work / "state"
    seconds: dict[str, float] = {}
    for platform in PROMISES:
        start = time.monotonic()
        code = main(["--root", str(RELEASE), "build", "--variant", "cpu", "--platform", platform,
                     "--dist", str(dist), "--state", str(state)])
        seconds[platform] = time.monotonic() - start
        assert code == 0, f"shipyard build --platform {platform} exited {code}"
    return Built(dist, seconds)


def _auditwheel_tag(wheel: Path) -> str:
    shown = command.run([sys.executable, "-m", "auditwheel", "show", wheel], timeout=300, what="auditwheel show")
    found = re.search(r'consistent with the following platform tag:\s*"([^"]+)"', " ".join(shown.stdout.split()))
    return found.group(1) if found else "?"


def test_every_project_builds_and_passes_its_tests_for_every_python_on_both_promises(built: Built) -> None:
    spec = load_spec(RELEASE)
    release = spec.release
    artifacts = json.loads((built.dist / "manifest.json").read_text())["artifacts"]
    by_cell = {a["cell_id"]: a for a in artifacts}
    rows, problems = [], []
    for component in release.components.values():
        for platform, tag in PROMISES.items():
            pythons = [BULLSEYE_PYTHON] if component.limited_api else list(release.pythons)
            for python in pythons:
                py_tag = f"cp{python.replace('.', '')}"
                cell = f"{component.name}-cpu-{platform}-{py_tag}-{'abi3-' if component.limited_api else ''}wheel"
                artifact = by_cell.get(cell)
                if artifact is None:
                    problems.append(f"{cell}: not in the manifest")
                    continue
                wheel = built.dist / artifact["path"]
                audited = _auditwheel_tag(wheel)
                abi3 = "-"
                if component.limited_api:
                    found = abi3_problems(wheel, component.limited_api)
                    abi3 = "clean" if not found else "; ".join(found)
                    if found:
                        problems.append(f"{cell}: abi3audit: {abi3}")
                tests = artifact["tests"]
                summaries = ", ".join(f["summary"] for fid, f in tests["features"].items() if fid != "(unmarked)")
                if component.limited_api:
                    summaries += f" on {' '.join(sorted(tests['pythons'], key=lambda p: int(p.split('.')[1])))}"
                if artifact["build"]["result"] != "passed" or tests["result"] != "passed":
                    problems.append(f"{cell}: {artifact['build']['result']}, tests {tests['result']}")
                if _glibc(audited) > _glibc(tag) or tag not in wheel.name:
                    problems.append(f"{cell}: {wheel.name}: auditwheel says {audited}, release.yaml promises {tag}")
                with zipfile.ZipFile(wheel) as zf:  # the compiled module is in the wheel, not a pure fallback
                    if not any(n.endswith(".so") for n in zf.namelist()):
                        problems.append(f"{cell}: no extension module in {wheel.name}")
                label = wheel.name.removesuffix(".whl").rsplit("-", 1)[-1]
                rows.append((component.name, artifact["version"], platform, python if not component.limited_api
                             else f"{python} (abi3)", artifact["build"]["result"], summaries,
                             f"{label} (fits {audited})", abi3))
    print("\n" + _table(("project", "version", "platform", "Python", "build", "tests",
                         "wheel tag (auditwheel show: oldest it fits)", "abi3audit"), rows))
    print("wall time of `shipyard build`: " + ", ".join(f"{p} {s:.0f} s" for p, s in built.seconds.items()))
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def bullseye_python(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A bullseye image with Debian's python3 (3.9) and venv, nothing else, made once per base image."""
    return bullseye_python_image(tmp_path_factory)


def test_the_python_39_wheels_install_with_pip_and_pass_their_tests_in_bullseye(
        built: Built, bullseye_python: str, tmp_path: Path) -> None:
    """Each platform's cp39 (and abi3) wheels, installed by file with bullseye's own pip (20.3) into a
    venv of Debian's python3, offline; the import of each compiled module, then each project's own
    tests, judged as in the build. The other Pythons have no interpreter in bullseye: their wheels
    are held to the promise by auditwheel (the symbol versions they need) and tested on this host."""
    spec = load_spec(RELEASE)
    release = spec.release
    index = built.dist / "whl" / "cpu"
    artifacts = json.loads((built.dist / "manifest.json").read_text())["artifacts"]
    house = ensure_wheelhouse(["pytest>=7", "cffi>=1.0.1"], BULLSEYE_PYTHON, PROMISES["linux-x86_64-glibc231"])
    rows, problems = [], []
    for platform in PROMISES:
        wheels = [a["path"].removeprefix("whl/cpu/") for a in artifacts
                  if a["platform"] == platform and a["python"] == BULLSEYE_PYTHON]
        assert len(wheels) == len(release.components), wheels
        modules = ", ".join(IMPORTS.values())
        setup = (
            "python3 -m venv /venv\n"
            "/venv/bin/pip install --quiet --no-cache-dir --disable-pip-version-check --no-index "
            f"--find-links /wheelhouse pytest {' '.join(f'/index/{w}' for w in wheels)}\n"
            f"/venv/bin/python -c \"import platform, {modules}; print('imported', platform.libc_ver())\" "
            "> /work/imported.txt\n")
        for component in release.components.values():
            tests_dir = component.tests_folder(spec.root)
            work = tmp_path / platform / component.name
            judged = run_tests_in_container(
                bullseye_python, setup=setup, python="/venv/bin/python", tests_dir=tests_dir,
                project_dir=component.source_dir(spec.root),
                gate=feature_gate(spec, component.name, platform, tests_dir, component.test_id_root(spec.root)),
                work=work, volumes=(f"{index}:/index:ro", f"{house.path}:/wheelhouse:ro"),
                other_features=sorted(f.id for f in spec.features.features if f.component != component.name))
            imported = (work / "imported.txt").read_text().strip() if (work / "imported.txt").is_file() else ""
            record = fold_feature_report((work / "feature-report.jsonl").read_text(), 0) \
                if (work / "feature-report.jsonl").is_file() else None
            outcomes = [e["outcome"] for e in record["tests"].values()] if record else []
            counted = f"{outcomes.count('passed')} passed, {outcomes.count('failed')} failed, " \
                      f"{outcomes.count('skipped')} skipped"
            wheel = next(w for w in wheels if w.startswith(f"{component.name}/"))
            rows.append((component.name, platform, wheel.rsplit("-", 1)[-1].removesuffix(".whl"),
                         "ok " + imported.removeprefix("imported ") if imported else "failed",
                         counted if not judged.problems else "; ".join(judged.problems)))
            if judged.problems or "('glibc', '2.31')" not in imported:
                problems.append(f"{component.name} {platform}: {imported or 'no import'}; {judged.problems}\n"
                                f"{judged.log_tail}")
    print("\n" + _table(("project", "platform", "wheel tag pip installed", "import (libc)",
                         "its tests in bullseye, Python 3.9"), rows))
    assert not problems, "\n".join(problems)
