"""The fault suite (#13): publishes of successive releases (wheels, conda packages and two images
each) interrupted by kill -9 at random moments (among them random points of the image pushes),
server 5xx, connection resets and stalls (through fault-injecting proxies on loopback in front of
devpi and of the docker registry), and devpi and registry restarts mid-upload, while a reader
polls every index of every target and the registry's tags. Asserted: no reader ever sees a
partial release (no channel tag ever names an image that is not whole in the registry, or whose
release is not staged and verified whole), and after the resumed runs every file and image is
there exactly once with the manifest's sha256 (for an image: its id). Every loop is bounded in
count and time; traffic stays on 127.0.0.1. The tally is printed (pytest -s, or the captured
output of a failure)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import docker
import pytest
import requests
from fault_proxy import FaultProxy
from publish_servers import MANIFEST_V2, Registry, docker_registry, publish_site
from synthetic_release import (
    build_conda_packages,
    image_record,
    import_image,
    remove_images,
    synthetic_dist,
    write_manifest,
)

from shipyard.publish.plain_version import plain_name

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parent.parent
PROJECTS = ("ember", "embervision", "emberelastic")
IMAGE_TAGS = {"cpu": "cpu", "cu118": "cuda11"}  # each release's images: variant tag -> variant
RELEASES = 4  # successive versions at least, each published under faults until it lands…
FAULTS = 50  # …and more (up to MAX_RELEASES) until at least this many faults were injected
MAX_RELEASES = 8
ATTEMPTS = 7  # faulted runs per release at most; then one clean run must finish it
DEADLINE = 600  # seconds for the whole suite
# HTTP connections the registry sees in one image publish of a release: the listing, then per image
# the engine's ping, its blob pushes and the staging manifest (the publisher's own reads and tag
# PUTs share one kept-alive connection); kill -9 and the registry restart are placed among them.
REGISTRY_CONNECTIONS = 23
SEED = int(os.environ.get("SHIPYARD_FAULT_SEED", "1307"))


class Reader(threading.Thread):
    """Polls every index of every target; records any release seen partially."""

    def __init__(self, devpi: str, user: str, tree: str, conda: str, expected: dict[str, dict[str, set[str]]],
                 registry: Registry, repo: str, images: dict[str, dict[str, str]]):
        super().__init__(daemon=True)
        self.devpi, self.user, self.tree, self.conda = devpi, user, tree, conda
        self.expected = expected  # version -> index label -> the complete set of file names
        self.registry, self.repo = registry, repo
        self.images = images  # version -> variant tag -> image id: the release's images
        self.stop = threading.Event()
        self.partial: list[str] = []
        self.snapshots = 0
        self.mid_switch = 0  # views with some of a release's channel tags written, the others staged and verified
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
        seen["registry"] = self.registry_view()
        return {k: frozenset(v) for k, v in seen.items()}

    def registry_view(self) -> set[str]:
        """`<state> <tag>@<config digest>` for each tag of the repository: state `whole` when its
        manifest and every blob it names are served, `incomplete` when a blob is not, `missing` when
        the tag is listed but its manifest is not served."""
        auth = (self.registry.user, self.registry.password)
        base = f"http://{self.registry.address}/v2/{self.repo}"
        listed = self.session.get(f"{base}/tags/list", auth=auth, timeout=10)
        if listed.status_code == 404:  # nothing pushed yet
            return set()
        listed.raise_for_status()
        view = set()
        for tag in listed.json().get("tags") or []:
            answer = self.session.get(f"{base}/manifests/{tag}", auth=auth, headers={"Accept": MANIFEST_V2},
                                      timeout=10)
            if answer.status_code == 404:
                view.add(f"missing {tag}@-")
                continue
            answer.raise_for_status()
            body = json.loads(answer.content)
            config = body["config"]["digest"]
            whole = all(self.session.head(f"{base}/blobs/{blob}", auth=auth, timeout=10).status_code == 200
                        for blob in (config, *(layer["digest"] for layer in body["layers"])))
            view.add(f"{'whole' if whole else 'incomplete'} {tag}@{config}")
        return view

    def check_registry(self, view: frozenset[str]) -> None:
        """A channel tag names its image whole, and only once every image of its release is there
        whole and verified (under its channel tag, or the staging tag the switch copies)."""
        for version, ids in self.images.items():
            want = {f"{version}-{tag}-runtime-nightly": f"sha256:{image_id}" for tag, image_id in ids.items()}
            shown: dict[str, tuple[str, str]] = {}
            staged: dict[str, tuple[str, str]] = {}
            for entry in view:
                state, ref = entry.split(" ", 1)
                tag, config = ref.split("@", 1)
                if tag.startswith(f"{version}-"):
                    (staged if "-stage-" in tag else shown)[tag] = (state, config)
            if not shown:
                continue
            wrong = sorted(f"{tag}: {state} {config}" for tag, (state, config) in shown.items()
                           if state != "whole" or want.get(tag) != config)
            unstaged = sorted(tag for tag in set(want) - set(shown)
                              if staged.get(f"{tag}-stage-{want[tag][7:19]}") != ("whole", want[tag]))
            if wrong or unstaged:
                self.partial.append(f"registry {version}: channel tags {sorted(shown)} visible; wrong: {wrong}; "
                                    f"not staged whole: {unstaged}")
            elif len(shown) < len(want):
                self.mid_switch += 1

    def check(self, view: dict[str, frozenset[str]]) -> None:
        self.snapshots += 1
        self.check_registry(view["registry"])
        for label, names in view.items():
            if label == "registry":
                continue
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


@pytest.fixture
def client(docker_engine: None) -> docker.DockerClient:
    return docker.from_env(timeout=300)


def _images(folder: Path, repo: str, version: str) -> dict[str, str]:
    """The release's images, one tiny imported image per variant tag: tag -> image id (no prefix)."""
    return {tag: import_image(folder, f"{repo}:{version}-{tag}-runtime", f"{version} {tag}").removeprefix("sha256:")
            for tag in IMAGE_TAGS}


class RegistryFaults:
    """The plan of the proxy in front of the registry: faults at `rate`, and, at the chosen HTTP
    connection of the run, kill -9 of the publisher (after a pause) or a registry restart."""

    def __init__(self, registry: Registry, seed: int) -> None:
        self.registry = registry
        self.rng = random.Random(seed)  # its own: the proxy's thread draws from it
        self.rate = 0.0
        self.process: subprocess.Popen[bytes] | None = None
        self.kill_at = self.restart_at = 0
        self.kill_pause = 0.0
        self.seen = 0
        self.killed = self.restarted = False
        self.restarting: threading.Thread | None = None

    def arm(self, process: subprocess.Popen[bytes] | None, rate: float, kill_at: int = 0, kill_pause: float = 0.0,
            restart_at: int = 0) -> None:
        self.process, self.rate, self.kill_at, self.kill_pause, self.restart_at = (
            process, rate, kill_at, kill_pause, restart_at)
        self.seen, self.killed, self.restarted, self.restarting = 0, False, False, None

    def _kill(self, process: subprocess.Popen[bytes]) -> None:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            self.killed = True

    def __call__(self, number: int, line: str) -> str:
        if not line.endswith("HTTP/1.1"):  # the engine's TLS probe before it falls back to HTTP
            return "pass"
        method, path = line.split(" ")[:2]
        # The engine retries a failed layer upload itself after 5, 10, 15 s: faults there would spend
        # the suite's time waiting. Its ping and manifest PUT, and all the publisher's requests, fail.
        uploading = "/blobs/uploads/" in path and method in ("POST", "PATCH", "PUT")
        self.seen += 1
        if self.process is not None and self.seen == self.kill_at:
            threading.Timer(self.kill_pause, self._kill, (self.process,)).start()
        if self.process is not None and self.seen == self.restart_at and self.process.poll() is None:
            self.restarted = True
            self.restarting = threading.Thread(target=self.registry.restart)
            self.restarting.start()
        if uploading or self.rng.random() >= self.rate:
            return "pass"
        return self.rng.choice(["503", "503", "reset", "stall"])


def test_faults_never_show_a_partial_release_and_resumed_runs_lose_and_duplicate_nothing(
        tmp_path: Path, client: docker.DockerClient):
    rng = random.Random(SEED)
    started = time.monotonic()
    tally: Counter[str] = Counter()
    plan_state = {"rate": 0.0}

    def plan(number: int, line: str) -> str:
        if rng.random() >= plan_state["rate"]:
            return "pass"
        return rng.choice(["503", "503", "reset", "stall"])

    repo = f"shipyard-faults-{uuid.uuid4().hex[:8]}"
    made: set[str] = set()
    with publish_site(tmp_path) as site, FaultProxy(site.devpi.port, plan, stall_seconds=2) as proxy, \
            docker_registry(tmp_path / "registry") as registry, \
            FaultProxy(int(registry.address.rsplit(":", 1)[1]), RegistryFaults(registry, SEED + 1),
                       stall_seconds=2) as registry_proxy:
        faults: RegistryFaults = registry_proxy.plan  # type: ignore[assignment]
        devpi, tree, conda, token = site.devpi, site.tree_url, site.conda_url, site.token
        user = "faults"
        password = devpi.add_user(user)
        root = tmp_path / "root"
        # The publisher goes through the proxies, the reader not.
        site.release_yaml(root, devpi_url=proxy.url, registry=f"127.0.0.1:{registry_proxy.port}")
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHIPYARD_")} | {
            "SHIPYARD_PYPI_USERNAME": user, "SHIPYARD_PYPI_PASSWORD": password, "SHIPYARD_CONDA_TOKEN": token,
            "SHIPYARD_REGISTRY_USERNAME": registry.user, "SHIPYARD_REGISTRY_PASSWORD": registry.password}
        expected: dict[str, dict[str, set[str]]] = {}
        images: dict[str, dict[str, str]] = {}
        reader = Reader(devpi.url, user, tree, conda + "conda/", expected, registry, repo, images)
        reader.start()
        runs = Counter()
        try:
            for release in range(MAX_RELEASES):
                if release >= RELEASES and sum(tally.values()) >= FAULTS:
                    break
                version = f"1.7.{release}"
                packages = build_conda_packages(tmp_path / f"conda-{release}", ["cpu", "cu118"], version)
                dist = tmp_path / f"dist-{release}"
                records = synthetic_dist(dist, packages, projects=PROJECTS, version=version)
                ids = _images(tmp_path / "images", repo, version)
                made |= set(ids.values())
                write_manifest(dist, [*records, *(image_record(f"{repo}:{version}-{tag}-runtime", image_id,
                                                               variant=IMAGE_TAGS[tag], tag=tag, version=version)
                                                  for tag, image_id in ids.items())], version)
                expected[version] = _expected(version, packages)
                images[version] = ids
                argv = [sys.executable, "-m", "shipyard.cli", "--root", str(root), "publish", "--channel", "nightly",
                        "--dist", str(dist), "--tries", "3", "--first-pause", "0.05"]
                for attempt in range(ATTEMPTS + 1):
                    assert time.monotonic() - started < DEADLINE, f"over {DEADLINE} s: {tally}"
                    clean = attempt == ATTEMPTS
                    # A stall (2 s, then the connection closes) fails a request either way; the clean run
                    # gives a server on a busy machine the default minute to answer.
                    timeout = ["--timeout", "60" if clean else "5"]
                    # Each release's first run is killed during its image pushes (after the other targets
                    # released it), at a random one of the registry's connections, after a random pause, and
                    # every other release's registry restarts before that, mid-push; its second run goes
                    # through both proxies at their fault rate; then faults at random.
                    kind = "clean" if clean else "kill-image" if attempt == 0 else "proxy" if attempt == 1 else \
                        rng.choice(["kill", "kill-image", "proxy", "proxy-registry", "restart", "registry-restart"]
                                   if release % 2 else ["kill", "kill-image", "proxy", "proxy-registry",
                                                        "registry-restart"])
                    plan_state["rate"] = 0.35 if kind == "proxy" else 0.0
                    before = sum(proxy.injected.values()), sum(registry_proxy.injected.values())
                    process = subprocess.Popen([*argv, *timeout], env=env, stdout=subprocess.PIPE,
                                               stderr=subprocess.STDOUT)
                    restart_at = (rng.randint(2, REGISTRY_CONNECTIONS) if kind == "registry-restart" else
                                  rng.randint(2, REGISTRY_CONNECTIONS // 2) if attempt == 0 and release % 2 == 0
                                  else 0)
                    kill_at = rng.randint(max(2, restart_at + 1), REGISTRY_CONNECTIONS) if kind == "kill-image" else 0
                    faults.arm(process, rate={"proxy": 0.35, "proxy-registry": 0.5}.get(kind, 0.0), kill_at=kill_at,
                               kill_pause=rng.uniform(0.0, 0.4), restart_at=restart_at)
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
                    out, _ = process.communicate(timeout=180)
                    if faults.restarting is not None:
                        faults.restarting.join(timeout=60)
                    tally["kill -9 of the publisher during the image push"] += faults.killed
                    tally["registry restart mid-push"] += faults.restarted
                    faults.arm(None, rate=0.0)
                    tally["devpi proxy faults (503, reset, stall)"] += sum(proxy.injected.values()) - before[0]
                    tally["registry proxy faults (503, reset, stall)"] += (sum(registry_proxy.injected.values())
                                                                           - before[1])
                    runs["ok" if process.returncode == 0 else "failed"] += 1
                    if process.returncode == 0:
                        break
                    assert process.returncode in (-9, 7), out.decode()[-3000:]  # killed, or a clean failure
                    if process.returncode == 7:
                        assert b"gave up after 3 tries; last response:" in out, out.decode()[-3000:]
                else:
                    pytest.fail(f"release {version} did not land after {ATTEMPTS + 1} runs; the last said:\n"
                                f"{out.decode()[-3000:]}")
            # The reader goes on for a moment after the last switch.
            time.sleep(0.5)
        finally:
            reader.stop.set()
            reader.join(timeout=30)
            remove_images(client, repo, made)
        # Nothing lost, nothing duplicated: every file once, with the manifest's bytes.
        final = reader.snapshot()
        for label, names in final.items():
            if label == "registry":
                continue
            for version, per_index in expected.items():
                have = [n for n in names if f"-{version}-" in n or f"-{version}+" in n]
                assert sorted(have) == sorted(per_index[label]), (label, version)
        for tag in ("cpu", "cu118", "pypi"):
            index = f"{user}/nightly" if tag == "pypi" else f"{user}/nightly-{tag}"
            for project in (*PROJECTS, "emberaudio"):
                files = requests.get(f"{devpi.url}/{index}/+simple/{project}/", timeout=10,
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"}).json()["files"]
                names = [f["filename"] for f in files]
                assert len(names) == len(set(names)) == len(expected), (index, project, names)
        # Every image under its channel tag, whole, with the recorded id, the one manifest its staging
        # tag holds; and no tag besides those two per image (a resumed push adds none).
        wanted = set()
        for version, ids in images.items():
            for tag, image_id in ids.items():
                channel = f"{version}-{tag}-runtime-nightly"
                staging = f"{channel}-stage-{image_id[:12]}"
                wanted |= {f"whole {channel}@sha256:{image_id}", f"whole {staging}@sha256:{image_id}"}
                digest = registry.served_digest(repo, channel)
                assert digest is not None and digest == registry.served_digest(repo, staging), (channel, digest)
        assert final["registry"] == wanted, sorted(final["registry"] ^ wanted)
    total = sum(tally.values())
    print(f"\nfault tally (seed {SEED}): {dict(tally)}; {total} faults injected; {runs['failed']} publisher runs "
          f"interrupted or failed, {runs['ok']} finished; {reader.snapshots} consistent reader snapshots, "
          f"{len(reader.partial)} partial releases seen, {reader.mid_switch} seen between the channel tags of one "
          f"release's images (each whole, the others staged and verified); 0 files or images lost or duplicated "
          f"({time.monotonic() - started:.0f} s)")
    assert reader.partial == []
    assert reader.snapshots > 20
    assert total >= FAULTS, tally
    assert tally["kill -9 of the publisher during the image push"] >= 3, tally
    assert tally["registry restart mid-push"] >= 1, tally
