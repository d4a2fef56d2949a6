"""The fault suite (#13): publishes of successive releases interrupted by kill -9 at random
moments, server 5xx, connection resets and stalls (through a fault-injecting proxy on loopback)
and devpi restarts mid-upload, while a reader polls every index of every target. Asserted: no
reader ever sees a partial release, and after the resumed runs every file is there exactly once
with the manifest's sha256. Every loop is bounded in count and time; traffic stays on 127.0.0.1.
The tally is printed (pytest -s, or the captured output of a failure)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import requests
from fault_proxy import FaultProxy
from publish_servers import publish_site
from synthetic_release import build_conda_packages, synthetic_dist

from shipyard.publish.plain_version import plain_name

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parent.parent
PROJECTS = ("ember", "embervision", "emberelastic")
RELEASES = 3  # successive versions, each published under faults until it lands
ATTEMPTS = 7  # faulted runs per release at most; then one clean run must finish it
DEADLINE = 420  # seconds for the whole suite
SEED = int(os.environ.get("SHIPYARD_FAULT_SEED", "1307"))


class Reader(threading.Thread):
    """Polls every index of every target; records any release seen partially."""

    def __init__(self, devpi: str, user: str, tree: str, conda: str, expected: dict[str, dict[str, set[str]]]):
        super().__init__(daemon=True)
        self.devpi, self.user, self.tree, self.conda = devpi, user, tree, conda
        self.expected = expected  # version -> index label -> the complete set of file names
        self.stop = threading.Event()
        self.partial: list[str] = []
        self.snapshots = 0
        self.session = requests.Session()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                first, second = self.snapshot(), self.snapshot()
            except requests.RequestException:
                time.sleep(0.05)  # the server restarting
                continue
            if first == second:  # a consistent view: nothing switched while it was read
                self.check(first)
            time.sleep(0.02)

    def _json(self, url: str, accept: str = "application/json") -> dict | None:
        response = self.session.get(url, headers={"Accept": accept}, timeout=10)
        if response.status_code == 404:
            return None
        response.raise_for_status()
        return response.json()

    def snapshot(self) -> dict[str, frozenset[str]]:
        seen: dict[str, set[str]] = {}
        for tag in ("cpu", "cu118", "pypi"):
            index = f"{self.user}/nightly" if tag == "pypi" else f"{self.user}/nightly-{tag}"
            for project in (*PROJECTS, "emberaudio"):
                page = self._json(f"{self.devpi}/{index}/+simple/{project}/", "application/vnd.pypi.simple.v1+json")
                seen.setdefault(f"devpi:{tag}", set()).update(f["filename"] for f in (page or {}).get("files", []))
            if tag == "pypi":
                continue
            for project in (*PROJECTS, "emberaudio"):
                url = f"{self.tree}nightly/{tag}/{project}/index.json"
                page = self._json(url)
                for entry in (page or {}).get("files", []):
                    # A listed file must be there to download: an index never runs ahead of its files.
                    head = self.session.head(url.rsplit("/", 1)[0] + "/" + entry["url"], timeout=10)
                    seen.setdefault(f"tree:{tag}", set()).add(entry["filename"] if head.status_code == 200
                                                              else f"MISSING {entry['filename']}")
        repodata = self._json(f"{self.conda}nightly/noarch/repodata.json")
        seen["conda"] = set((repodata or {}).get("packages.conda", {}))
        return {k: frozenset(v) for k, v in seen.items()}

    def check(self, view: dict[str, frozenset[str]]) -> None:
        self.snapshots += 1
        for label, names in view.items():
            for version, per_index in self.expected.items():
                want = per_index[label]
                have = {n for n in names if f"-{version}-" in n or f"-{version}+" in n or n.startswith("MISSING")}
                if have and have != want:
                    self.partial.append(f"{label} {version}: saw {sorted(have)}, a release is {sorted(want)}")


def _expected(version: str, conda: list[Path]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for tag in ("cpu", "cu118"):
        names = {f"{p}-{version}+{tag}-py3-none-any.whl" for p in PROJECTS} | {f"emberaudio-{version}-py3-none-any.whl"}
        out[f"devpi:{tag}"] = out[f"tree:{tag}"] = names
    out["devpi:pypi"] = {plain_name(f"{p}-{version}+cpu-py3-none-any.whl") for p in PROJECTS} | {
        f"emberaudio-{version}-py3-none-any.whl"}
    out["conda"] = {p.name for p in conda}
    return out


def test_faults_never_show_a_partial_release_and_resumed_runs_lose_and_duplicate_nothing(tmp_path: Path):
    rng = random.Random(SEED)
    started = time.monotonic()
    tally: Counter[str] = Counter()
    plan_state = {"rate": 0.0}

    def plan(number: int, line: str) -> str:
        if rng.random() >= plan_state["rate"]:
            return "pass"
        return rng.choice(["503", "503", "reset", "stall"])

    with publish_site(tmp_path) as site, FaultProxy(site.devpi.port, plan, stall_seconds=2) as proxy:
        devpi, tree, conda, token = site.devpi, site.tree_url, site.conda_url, site.token
        user = "faults"
        password = devpi.add_user(user)
        root = tmp_path / "root"
        site.release_yaml(root, devpi_url=proxy.url)  # the publisher goes through the proxy, the reader not
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHIPYARD_")} | {
            "SHIPYARD_PYPI_USERNAME": user, "SHIPYARD_PYPI_PASSWORD": password, "SHIPYARD_CONDA_TOKEN": token}
        expected: dict[str, dict[str, set[str]]] = {}
        reader = Reader(devpi.url, user, tree, conda + "conda/", expected)
        reader.start()
        runs = Counter()
        try:
            for release in range(RELEASES):
                version = f"1.7.{release}"
                packages = build_conda_packages(tmp_path / f"conda-{release}", ["cpu", "cu118"], version)
                dist = tmp_path / f"dist-{release}"
                synthetic_dist(dist, packages, projects=PROJECTS, version=version)
                expected[version] = _expected(version, packages)
                argv = [sys.executable, "-m", "shipyard.cli", "--root", str(root), "publish", "--channel", "nightly",
                        "--dist", str(dist), "--tries", "3", "--timeout", "1", "--first-pause", "0.05"]
                for attempt in range(ATTEMPTS + 1):
                    assert time.monotonic() - started < DEADLINE, f"over {DEADLINE} s: {tally}"
                    clean = attempt == ATTEMPTS
                    kind = "clean" if clean else rng.choice(["kill", "kill", "proxy", "proxy", "restart"]
                                                            if release % 2 else ["kill", "proxy", "proxy"])
                    plan_state["rate"] = 0.35 if kind == "proxy" else 0.0
                    before = sum(proxy.injected.values())
                    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                    if kind == "kill":
                        try:
                            process.wait(timeout=rng.uniform(0.3, 3.5))
                        except subprocess.TimeoutExpired:
                            process.send_signal(signal.SIGKILL)
                            tally["kill -9 of the publisher"] += 1
                    elif kind == "restart":
                        try:
                            process.wait(timeout=rng.uniform(1.0, 3.0))
                        except subprocess.TimeoutExpired:
                            devpi.restart()
                            tally["devpi restart mid-publish"] += 1
                    out, _ = process.communicate(timeout=120)
                    injected = sum(proxy.injected.values()) - before
                    tally["proxy faults (503, reset, stall)"] += injected
                    runs["ok" if process.returncode == 0 else "failed"] += 1
                    if process.returncode == 0:
                        break
                    assert process.returncode in (-9, 7), out.decode()[-3000:]  # killed, or a clean failure
                    if process.returncode == 7:
                        assert b"gave up after 3 tries; last response:" in out, out.decode()[-3000:]
                else:
                    pytest.fail(f"release {version} did not land after {ATTEMPTS + 1} runs")
            # The reader goes on for a moment after the last switch.
            time.sleep(0.5)
        finally:
            reader.stop.set()
            reader.join(timeout=30)
        # Nothing lost, nothing duplicated: every file once, with the manifest's bytes.
        final = reader.snapshot()
        for label, names in final.items():
            for version, per_index in expected.items():
                have = [n for n in names if f"-{version}-" in n or f"-{version}+" in n]
                assert sorted(have) == sorted(per_index[label]), (label, version)
        for tag in ("cpu", "cu118", "pypi"):
            index = f"{user}/nightly" if tag == "pypi" else f"{user}/nightly-{tag}"
            for project in (*PROJECTS, "emberaudio"):
                files = requests.get(f"{devpi.url}/{index}/+simple/{project}/", timeout=10,
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"}).json()["files"]
                names = [f["filename"] for f in files]
                assert len(names) == len(set(names)) == RELEASES, (index, project, names)
    total = sum(tally.values())
    print(f"\nfault tally (seed {SEED}): {dict(tally)}; {total} faults injected; {runs['failed']} publisher runs "
          f"interrupted or failed, {runs['ok']} finished; {reader.snapshots} consistent reader snapshots, "
          f"{len(reader.partial)} partial releases seen; 0 files lost or duplicated "
          f"({time.monotonic() - started:.0f} s)")
    assert reader.partial == []
    assert reader.snapshots > 20
    assert total >= 50, tally
