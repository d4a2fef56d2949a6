"""The fault suite (#13, #29 item 5): successive releases (wheels, conda packages and two images
each) published to every target kind (devpi, a pypi index served by pypiserver, the static tree,
the conda channel, the docker registry, a wheel tree in an S3 bucket: moto's server, a stand-in)
and then promoted nightly -> test, each run under one fault drawn at random from the first
attempt: kill -9 of the publisher at a random moment or at a random request of a server, devpi,
pypiserver and registry restarts mid-upload, proxies in front of devpi, pypiserver, the registry
and the bucket that answer 503, reset, drop the connection without
an answer, stall, cut a request mid-body, cut an answer mid-body, or lose the answer after the
server has acted (so the "already done" paths run), a rate limit (a request or two answered 429
with `Retry-After: 1`), two `shipyard publish` (or promote) processes at once on the same
targets (same manifest, same bytes; three times in four with one server's proxy failing on top),
and registry tokens that expire in use (the registry is behind the bearer-token flow,
support/registry_auth.py; in such a run its tokens live 2 s and its answers come slowly, so a run
outlives its first token). A reader polls every index of every target and channel, and the
registry's tags, and checks every snapshot it takes: one page (a project's index, a channel's repodata) must
show a release whole or not at all, and a page read later must not lack a release a page read
earlier showed (a switch is one step and never undone). Asserted: no partial release on the
targets that stage (pypi and s3 have no staging: a project page is whole or absent, and their views
with a release on some pages only are counted, not refused), no
file with bytes other than the manifest's, and after the resumed runs every file and image is
there exactly once. Every loop is bounded in count and time; traffic stays on 127.0.0.1.

The seed is random per run and printed first and with the tally; SHIPYARD_FAULT_SEED=<n> runs a
seed again (the faults drawn are the same; where a timer lands in the publisher's work depends on
the machine). SHIPYARD_FAULT_COUNT=<n> sets how many faults at least (default 45, the CI suite's;
`nox -s faults -- 200` is the long budget). The tally, by kind of fault and by target, is printed
(pytest -s, or the captured output of a failure)."""

from __future__ import annotations

import json
import os
import random
import re
import secrets
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import pytest
import requests
from packaging.version import Version
from support.fault_proxy import FaultProxy
from support.publish_servers import MANIFEST_V2, PypiServer, Registry, docker_registry, publish_site, pypi_server
from support.s3_standin import BUCKET, S3StandIn, s3_standin
from support.shipyard_process import shipyard_command, without_shipyard_settings
from support.synthetic_release import (
    build_conda_packages,
    image_record,
    import_image,
    remove_images,
    synthetic_dist,
    write_manifest,
)

from shipyard.plumbing.hashing import sha256_of
from shipyard.publish.plain_version import plain_version_wheel

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
PROJECTS = ("ember", "embervision", "emberelastic")
PAGES = (*PROJECTS, "emberaudio")  # every project page a reader reads, in this order
IMAGE_TAGS = {"cpu": "cpu", "cu118": "cuda11"}  # each release's images: variant tag -> variant
CHANNELS = ("nightly", "test")  # published, then promoted
RELEASES = 3  # successive versions at least, each published and promoted under faults…
# …and more (up to MAX_RELEASES) until at least FAULTS faults were injected and every kind of fault
# (KINDS) happened at least once. The one place the count is read: the CI suite's 45, or the long
# budget's (nox -s faults). A release takes about 20 s and draws 5 to 10 faults: seed 307695 drew 30
# in 6 releases, so a bound of 6 failed a sound publisher on an unlucky draw; DEADLINE bounds the time.
FAULTS = int(os.environ.get("SHIPYARD_FAULT_COUNT") or 45)
MAX_RELEASES = max(12, FAULTS // 3)
ATTEMPTS = 5  # faulted runs per publish or promote at most; then one clean run must finish it
DEADLINE = max(900, 15 * FAULTS)  # seconds for the whole suite (on a quiet machine a fraction of that)
PROXY_FAULTS = ("503", "reset", "drop", "stall", "lost", "lost", "cut-request", "cut-answer")
TOKEN_LIFETIME = 2  # seconds a registry token works in an "expiring-token" run…
SLOW_REGISTRY = 0.1  # …whose registry answers each request this much later (a run outlives its token)
LOST_ANSWERS = ("lost", "cut-answer")  # the server acted, the client never learned it
# One run's fault, drawn at random (those not seen yet first).
KINDS = ("kill", "kill-at-request", "proxy-devpi", "proxy-pypi", "proxy-registry", "proxy-s3", "restart-devpi",
         "restart-pypi", "restart-registry", "rate-limit", "two-publishers", "expiring-token")
SEED = int(os.environ.get("SHIPYARD_FAULT_SEED") or secrets.randbelow(10**6))
PYPI_USER_ENV = ("SHIPYARD_PYPISERVER_USERNAME", "SHIPYARD_PYPISERVER_PASSWORD")
S3_PREFIX = "faults/whl/"  # the bucket's wheel tree (moto's S3 server on loopback, a stand-in for a store)
# Targets with no staging: each project page is whole or absent, a release appears page by page.
UNSTAGED = ("pypi", "s3")


class ServerFaults:
    """The plan of the proxy in front of one server: faults at `rate` on the requests it may fail,
    kill -9 of the publisher at the `kill_at`-th request (after a pause), a restart of the server at
    the `restart_at`-th request that `counts_for_restart` (an upload), 429s from the `limit_at`-th
    request on for `limit_count` requests, and every request passed on `slow` seconds late."""

    def __init__(self, name: str, seed: int, restart: Callable[[], None],
                 may_fail: Callable[[str, str, str], bool], counts_for_restart: Callable[[str, str], bool]) -> None:
        self.name = name
        self.rng = random.Random(seed)  # its own: the proxy's thread draws from it
        self.restart = restart
        self.may_fail = may_fail  # (method, path, request line) -> whether a fault may hit it
        self.counts_for_restart = counts_for_restart
        self.arm(None, 0.0)

    def arm(self, process: subprocess.Popen[bytes] | None, rate: float, *, kill_at: int = 0,
            kill_pause: float = 0.0, restart_at: int = 0, limit_at: int = 0, limit_count: int = 0,
            slow: float = 0.0) -> None:
        self.process, self.rate, self.kill_at, self.kill_pause, self.restart_at = (
            process, rate, kill_at, kill_pause, restart_at)
        self.limit_at, self.limit_count, self.slow = limit_at, limit_count, slow
        self.seen = self.uploads = 0
        self.lose_a_write = False  # set while no write's answer was lost yet (the suite must see one)
        self.drop_one = False  # set while no connection was dropped yet (the suite must see one)
        self.killed = self.restarted = False
        self.restarting: threading.Thread | None = None

    def _kill(self, process: subprocess.Popen[bytes]) -> None:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            self.killed = True

    def __call__(self, number: int, line: str) -> str:
        parts = line.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):  # e.g. the engine's TLS probe
            return "pass"
        method, path = parts[0], parts[1]
        self.seen += 1
        self.uploads += self.counts_for_restart(method, path)
        if self.process is not None and self.seen == self.kill_at:
            threading.Timer(self.kill_pause, self._kill, (self.process,)).start()
        if (self.process is not None and self.restart_at and self.uploads == self.restart_at
                and not self.restarted and self.process.poll() is None):
            self.restarted = True
            self.restarting = threading.Thread(target=self.restart)
            self.restarting.start()
        if self.limit_at and self.limit_at <= self.seen < self.limit_at + self.limit_count:
            return "429"
        if not self.may_fail(method, path, line) or self.rng.random() >= self.rate:
            return "slow" if self.slow else "pass"
        if self.lose_a_write and _is_upload(method, path):
            return self.rng.choice(LOST_ANSWERS)  # the "already done" paths must run at least once
        if self.drop_one:
            self.drop_one = False
            return "drop"
        return self.rng.choice(PROXY_FAULTS)


class Reader(threading.Thread):
    """Polls every page of every target and channel; checks every snapshot it takes."""

    def __init__(self, devpi: str, user: str, tree: str, conda: str, pypi: PypiServer, bucket: str,
                 expected: dict[str, dict[str, dict[str, dict[str, str]]]],
                 registry: Registry, repo: str, images: dict[str, dict[str, str]]):
        super().__init__(daemon=True)
        self.devpi, self.user, self.tree, self.conda, self.pypi = devpi, user, tree, conda, pypi
        self.bucket = bucket  # the S3 wheel tree's base URL, read over plain HTTP as a download site is
        # version -> label kind (devpi:cpu, tree:cu118, conda, pypi, …) -> page -> file name -> sha256
        self.expected = expected
        self.registry, self.repo = registry, repo
        self.images = images  # version -> variant tag -> image id: the release's images
        self.stop = threading.Event()
        self.partial: list[str] = []  # on a target that stages: a defect
        self.partial_by_target: Counter[str] = Counter()
        self.wrong_bytes: list[str] = []
        self.between_uploads: Counter[str] = Counter()  # UNSTAGED: a release in some pages only (documented)
        self.snapshots = 0
        self.unreadable = 0  # labels of a snapshot cut short by a server restarting
        self.mid_switch = 0  # views with some of a release's channel tags written, the others staged and verified
        self.moving_seen: dict[str, Version] = {}  # moving tag -> the newest version a view showed it naming
        self.session = requests.Session()
        assert registry.tokens is not None
        # The reader's own token, minted in this process for an hour: its reads never meet an expiry.
        token = registry.tokens.token([f"repository:{repo}:pull"], lifetime=3600)
        self.registry_auth = {"Authorization": f"Bearer {token}"}

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                view = self.snapshot()
            except requests.RequestException:
                self.unreadable += 1
                time.sleep(0.05)  # the server restarting
                continue
            self.check(view)
            time.sleep(0.02)

    def _get(self, url: str, accept: str = "application/json") -> requests.Response | None:
        response = self.session.get(url, headers={"Accept": accept}, timeout=10)
        if response.status_code == 404:
            return None
        response.raise_for_status()
        return response

    def snapshot(self, *, strict: bool = False) -> dict[str, list[tuple[str, dict[str, str]]]]:
        """label -> [(page, {file name: sha256 as the page states it})], pages in the order read. A
        server that does not answer (restarting) cuts its labels short: what was read is kept and
        checked (counted in `unreadable`); `strict` raises instead."""
        seen: dict[str, list[tuple[str, dict[str, str]]]] = {}

        def read(label: str, pages: Iterator[tuple[str, dict[str, str]]]) -> None:
            try:
                for page in pages:
                    seen.setdefault(label, []).append(page)
            except requests.RequestException:
                if strict:
                    raise
                self.unreadable += 1

        for channel in CHANNELS:
            for tag in ("cpu", "cu118", "plain"):
                index = f"{self.user}/{channel}" if tag == "plain" else f"{self.user}/{channel}-{tag}"
                read(f"devpi:{tag}@{channel}", self._devpi_pages(index))
                if tag != "plain":
                    read(f"tree:{tag}@{channel}", self._tree_pages(f"{self.tree}{channel}/{tag}/"))
                    read(f"s3:{tag}@{channel}", self._tree_pages(f"{self.bucket}{channel}/{tag}/"))
            read(f"conda@{channel}", self._conda_pages(f"{self.conda}{channel}/noarch/repodata.json"))
        read("registry", self._registry_pages())
        read("pypi", self._pypi_pages())
        return seen

    def _devpi_pages(self, index: str) -> Iterator[tuple[str, dict[str, str]]]:
        for project in PAGES:
            page = self._get(f"{self.devpi}/{index}/+simple/{project}/", "application/vnd.pypi.simple.v1+json")
            files = (page.json() if page else {}).get("files", [])
            yield project, {f["filename"]: f["hashes"].get("sha256", "") for f in files}

    def _tree_pages(self, base: str) -> Iterator[tuple[str, dict[str, str]]]:
        for project in PAGES:
            page = self._get(f"{base}{project}/index.json")
            files = {}
            for entry in (page.json() if page else {}).get("files", []):
                # A listed file must be there to download: an index never runs ahead of its files.
                # A GET, not a HEAD: moto's server refuses an anonymous HEAD that the bucket's policy
                # allows (the GET it allows), and the files are tiny.
                with self.session.get(f"{base}{project}/{entry['url']}", timeout=10, stream=True) as got:
                    name = entry["filename"] if got.status_code == 200 else f"MISSING {entry['filename']}"
                files[name] = entry["hashes"]["sha256"]
            yield project, files

    def _conda_pages(self, url: str) -> Iterator[tuple[str, dict[str, str]]]:
        repodata = self._get(url)
        packages = (repodata.json() if repodata else {}).get("packages.conda", {})
        yield "noarch", {n: r["sha256"] for n, r in packages.items()}

    def _registry_pages(self) -> Iterator[tuple[str, dict[str, str]]]:
        yield "tags", dict.fromkeys(self.registry_view(), "")

    def _pypi_pages(self) -> Iterator[tuple[str, dict[str, str]]]:
        for project in PAGES:  # pypiserver: PEP 503 HTML, the sha256 in each link's fragment
            page = self._get(f"{self.pypi.simple}{project}/", "text/html")  # its port moves on a restart
            yield project, dict(re.findall(r'href="[^"#]*/([^"/#]+)#sha256=([0-9a-f]{64})"', page.text if page else ""))

    def registry_view(self) -> set[str]:
        """`<state> <tag>@<config digest>` for each tag of the repository: state `whole` when its
        manifest and every blob it names are served, `incomplete` when a blob is not, `missing` when
        the tag is listed but its manifest is not served. The moving tags are read before the tags
        list: they change in place, so what one names is checked against a list read after it (a
        published tag, written before the moving tag and never removed, must be in it)."""
        auth = self.registry_auth
        base = f"http://{self.registry.address}/v2/{self.repo}"

        def state(tag: str) -> str | None:
            answer = self.session.get(f"{base}/manifests/{tag}", headers={**auth, "Accept": MANIFEST_V2},
                                      timeout=10)
            if answer.status_code == 404:
                return None
            answer.raise_for_status()
            body = json.loads(answer.content)
            config = body["config"]["digest"]
            whole = all(self.session.head(f"{base}/blobs/{blob}", headers=auth, timeout=10).status_code == 200
                        for blob in (config, *(layer["digest"] for layer in body["layers"])))
            return f"{'whole' if whole else 'incomplete'} {tag}@{config}"

        moving = [f"{channel}-{tag}-runtime" for channel in CHANNELS for tag in IMAGE_TAGS]
        view = {entry for entry in map(state, moving) if entry is not None}
        listed = self.session.get(f"{base}/tags/list", headers=auth, timeout=10)
        if listed.status_code == 404:  # nothing pushed yet
            return view
        listed.raise_for_status()
        for tag in listed.json().get("tags") or []:
            if tag not in moving:
                view.add(state(tag) or f"missing {tag}@-")
        return view

    def served_digest(self, tag: str) -> str | None:
        """The manifest digest the registry serves under `tag` (None: no such tag)."""
        answer = requests.head(f"http://{self.registry.address}/v2/{self.repo}/manifests/{tag}", timeout=30,
                               headers={**self.registry_auth, "Accept": MANIFEST_V2})
        return answer.headers["Docker-Content-Digest"] if answer.status_code == 200 else None

    def check_registry(self, channel: str, view: set[str]) -> None:
        """A channel tag names its image whole, and only once every image of its release is there
        whole and verified (under its channel tag, or the staging tag the switch copies). The tags
        list is read first: a channel tag in it was written after every staging tag of its release."""
        for version, ids in self.images.items():
            want = {f"{version}-{tag}-runtime-{channel}": f"sha256:{image_id}" for tag, image_id in ids.items()}
            shown: dict[str, tuple[str, str]] = {}
            staged: dict[str, tuple[str, str]] = {}
            for entry in view:
                state, ref = entry.split(" ", 1)
                tag, config = ref.split("@", 1)
                if tag.startswith(f"{version}-") and (tag.endswith(f"-{channel}") or f"-{channel}-stage-" in tag):
                    (staged if "-stage-" in tag else shown)[tag] = (state, config)
            if not shown:
                continue
            wrong = sorted(f"{tag}: {state} {config}" for tag, (state, config) in shown.items()
                           if state != "whole" or want.get(tag) != config)
            unstaged = sorted(tag for tag in set(want) - set(shown)
                              if staged.get(f"{tag}-stage-{want[tag][7:19]}") != ("whole", want[tag]))
            if wrong or unstaged:
                self.partial_by_target["registry"] += 1
                self.partial.append(f"registry {version}@{channel}: channel tags {sorted(shown)} visible; wrong: "
                                    f"{wrong}; not staged whole: {unstaged}")
            elif len(shown) < len(want):
                self.mid_switch += 1

    def check_moving(self, channel: str, view: set[str]) -> None:
        """A moving tag (`nightly-cpu-runtime`) names a release's image only once every image of that
        release is shown whole under its channel tag (it is written last), and once it named a
        release, never an older one nor nothing (it moves forward only)."""
        for tag in IMAGE_TAGS:
            moving = f"{channel}-{tag}-runtime"
            entry = next((e for e in view if e.split(" ", 1)[1].startswith(f"{moving}@")), None)
            before = self.moving_seen.get(moving)
            if entry is None:
                if before is not None:
                    self.partial.append(f"registry {moving}: gone after it named {before}")
                continue
            state, ref = entry.split(" ", 1)
            config = ref.split("@", 1)[1]
            version = next((v for v, ids in list(self.images.items()) if f"sha256:{ids[tag]}" == config), None)
            if state != "whole" or version is None:
                self.partial.append(f"registry {moving}: {state} {config}, the image of no release")
                continue
            siblings = {f"whole {version}-{t}-runtime-{channel}@sha256:{i}" for t, i in self.images[version].items()}
            if not siblings <= view:
                self.partial_by_target["registry"] += 1
                self.partial.append(f"registry {moving} names {version} before its channel tags are all there: "
                                    f"{sorted(siblings - view)} not shown; the view: {sorted(view)}")
            if before is not None and Version(version) < before:
                self.partial.append(f"registry {moving} went back from {before} to {version}")
            self.moving_seen[moving] = max(Version(version), before or Version(version))

    def check(self, view: dict[str, list[tuple[str, dict[str, str]]]]) -> None:
        self.snapshots += 1
        for label, pages in view.items():
            kind, _, channel = label.partition("@")
            if kind == "registry":
                for name in CHANNELS:
                    self.check_registry(name, set(pages[0][1]))
                    self.check_moving(name, set(pages[0][1]))
                continue
            for version, per_kind in list(self.expected.items()):
                shown_before = False
                for page, files in pages:
                    want = per_kind[kind][page]
                    have = {n: sha for n, sha in files.items()
                            if f"-{version}-" in n or f"-{version}+" in n or n.startswith("MISSING")}
                    for name, sha in have.items():
                        if name in want and want[name] != sha:
                            self.wrong_bytes.append(f"{label} {page}: {name} listed with sha256 {sha}, the manifest "
                                                    f"says {want[name]}")
                    unstaged = kind.split(":")[0] in UNSTAGED  # a release appears page by page
                    if unstaged and shown_before and not have:
                        self.between_uploads[kind.split(":")[0]] += 1
                    elif (have and set(have) != set(want)) or (shown_before and not have):
                        self.partial_by_target[kind.split(":")[0]] += 1
                        self.partial.append(f"{label} {version}: page {page} shows {sorted(have)}, a release is "
                                            f"{sorted(want)}" + (" (an earlier page showed it)" if not have else ""))
                    shown_before = shown_before or bool(have)


def _expected(version: str, records: dict[str, str], plain: dict[str, str],
              conda: list[Path]) -> dict[str, dict[str, dict[str, str]]]:
    """label kind -> page -> file name -> sha256, for one release; `records` the manifest's
    file name -> sha256, `plain` the plain-version rewrites'."""
    out: dict[str, dict[str, dict[str, str]]] = {}
    for tag in ("cpu", "cu118"):
        pages = {p: {(n := f"{p}-{version}+{tag}-py3-none-any.whl"): records[n]} for p in PROJECTS}
        pages["emberaudio"] = {(n := f"emberaudio-{version}-py3-none-any.whl"): records[n]}
        out[f"devpi:{tag}"] = out[f"tree:{tag}"] = out[f"s3:{tag}"] = pages
    out["devpi:plain"] = out["pypi"] = {p: {n: sha for n, sha in plain.items() if n.startswith(f"{p}-")}
                                        for p in PAGES}
    out["conda"] = {"noarch": {p.name: records[p.name] for p in conda}}
    return out


@pytest.fixture
def client(docker_engine: None) -> docker.DockerClient:
    return docker.from_env(timeout=300)


def _images(folder: Path, repo: str, version: str) -> dict[str, str]:
    """The release's images, one tiny imported image per variant tag: tag -> image id (no prefix)."""
    return {tag: import_image(folder, f"{repo}:{version}-{tag}-runtime", f"{version} {tag}").removeprefix("sha256:")
            for tag in IMAGE_TAGS}


def _is_upload(method: str, path: str) -> bool:
    return method in ("POST", "PUT", "PATCH")


def _lost_answers(tally: Counter[str]) -> int:
    """How many writes the server took whose answer never reached the publisher (lost or cut)."""
    return sum(count for key, count in tally.items()
               if any(f" {fault} on " in key for fault in LOST_ANSWERS) and _is_upload(key.rsplit(" on ", 1)[1], ""))


def _expired_tokens(log: Path) -> int:
    """How many requests the registry refused for an invalid token so far (its log says so at warning
    level): in this suite, a token that expired, since every token it is shown is one the service signed."""
    return log.read_text(errors="replace").count("error authorizing context: invalid token") if log.is_file() else 0


def _registry_may_fail(method: str, path: str, line: str) -> bool:
    # Every request: the publisher's registry client sends them all (blob uploads included) and
    # retries each itself; the docker engine only saves and loads images.
    return True


@pytest.mark.timeout(max(1200, DEADLINE + 300))  # the long budget outlives pyproject's 1200 s
def test_faults_never_show_a_partial_release_and_resumed_runs_lose_and_duplicate_nothing(
        tmp_path: Path, client: docker.DockerClient):
    print(f"\nfault suite seed {SEED} (SHIPYARD_FAULT_SEED={SEED} draws the same faults again)")
    rng = random.Random(SEED)
    started = time.monotonic()
    tally: Counter[str] = Counter()
    repo = f"shipyard-faults-{uuid.uuid4().hex[:8]}"
    made: set[str] = set()
    with publish_site(tmp_path) as site, pypi_server(tmp_path / "pypiserver") as pypi, \
            docker_registry(tmp_path / "registry", bearer=True) as registry, s3_standin() as bucket:
        registry_port = int(registry.address.rsplit(":", 1)[1])
        plans = {"devpi": ServerFaults("devpi", SEED + 1, site.devpi.restart, lambda *_: True, _is_upload),
                 "pypi": ServerFaults("pypi", SEED + 2, lambda: restart_pypi(), lambda *_: True, _is_upload),
                 # moto keeps its objects in memory: a restart would lose the bucket, not test a resume.
                 "s3": ServerFaults("s3", SEED + 7, lambda: None, lambda *_: True, _is_upload),
                 "registry": ServerFaults("registry", SEED + 3, registry.restart, _registry_may_fail,
                                          lambda method, path: True)}
        tokens = registry.tokens
        assert tokens is not None
        with FaultProxy(site.devpi.port, plans["devpi"], stall_seconds=2, seed=SEED + 4) as devpi_proxy, \
                FaultProxy(pypi.port, plans["pypi"], stall_seconds=2, seed=SEED + 5) as pypi_proxy, \
                FaultProxy(int(bucket.endpoint.rsplit(":", 1)[1]), plans["s3"], stall_seconds=2,
                           seed=SEED + 8) as s3_proxy, \
                FaultProxy(registry_port, plans["registry"], stall_seconds=2, slow_seconds=SLOW_REGISTRY,
                           seed=SEED + 6) as registry_proxy:
            proxies = {"devpi": devpi_proxy, "pypi": pypi_proxy, "registry": registry_proxy, "s3": s3_proxy}

            def restart_pypi() -> None:
                pypi.restart()
                pypi_proxy.upstream_port = pypi.port
            devpi, tree, conda, token = site.devpi, site.tree_url, site.conda_url, site.token
            user = "faults"
            password = devpi.add_user(user)
            pypi_password = secrets.token_urlsafe(18)
            pypi.add_user(user, pypi_password)
            root = tmp_path / "root"
            # The publisher goes through the proxies, the reader not. A pypi target beside the others.
            site.release_yaml(root, devpi_url=devpi_proxy.url, registry=f"127.0.0.1:{registry_proxy.port}")
            text = (root / "release.yaml").read_text().replace(
                "  images:\n    kind: docker\n",
                f"  pypi-index:\n    kind: pypi\n    url: {pypi_proxy.url}/\n    index_url: {pypi_proxy.url}/simple/\n"
                f"    username_env: {PYPI_USER_ENV[0]}\n    password_env: {PYPI_USER_ENV[1]}\n"
                f"    default_variant: cpu\n    channels: [nightly, test, release]\n"
                f"  bucket-tree:\n{S3StandIn(s3_proxy.url, bucket.client).target(S3_PREFIX)}"
                f"  images:\n    kind: docker\n", 1)
            assert "pypi-index:" in text
            # TestPyPI's stand-in (the test channel's pypi target) is the suite's pypiserver, as pypi-index
            # above, which takes every channel: two targets on one index would upload each file twice.
            text, dropped = re.subn(r"(?m)^  testpypi:\n(?:    .*\n)+", "", text)
            assert dropped == 1, "the stand-ins no longer have a testpypi target"
            (root / "release.yaml").write_text(text)
            env = without_shipyard_settings({
                "SHIPYARD_PYPI_USERNAME": user, "SHIPYARD_PYPI_PASSWORD": password, "SHIPYARD_CONDA_TOKEN": token,
                "SHIPYARD_REGISTRY_USERNAME": registry.user, "SHIPYARD_REGISTRY_PASSWORD": registry.password,
                PYPI_USER_ENV[0]: user, PYPI_USER_ENV[1]: pypi_password, **bucket.credentials()})
            expected: dict[str, dict[str, dict[str, dict[str, str]]]] = {}
            images: dict[str, dict[str, str]] = {}
            reader = Reader(devpi.url, user, tree, conda + "conda/", pypi, f"{bucket.endpoint}/{BUCKET}/{S3_PREFIX}",
                            expected, registry, repo, images)
            reader.start()
            runs: Counter[str] = Counter()
            covered: set[str] = set()
            unretried: list[str] = []  # runs that stopped at a fault without retrying it: counted, named

            def run_until_done(argv: list[str], what: str) -> None:
                """`argv` under one fault per run, drawn at random; a clean run after ATTEMPTS."""
                out = b""
                history: list[str] = []  # each run's fault and how it ended, for a failure's message
                for attempt in range(ATTEMPTS + 1):
                    assert time.monotonic() - started < DEADLINE, f"over {DEADLINE} s: {tally}"
                    clean = attempt == ATTEMPTS
                    kind = "clean" if clean else rng.choice(sorted(set(KINDS) - covered) or KINDS)
                    # A stall (2 s, then the connection closes) fails a request either way; the clean run
                    # gives a server on a busy machine the default minute to answer.
                    timeout = ["--timeout", "60" if clean else "5"]
                    before = {name: Counter(p.injected_by_method) for name, p in proxies.items()}
                    # Drawn before the processes start: a plan is armed before their first request.
                    on_top = rng.choice([None, *sorted(plans)]) if kind == "two-publishers" else None
                    limited = rng.choice(sorted(plans)) if kind == "rate-limit" else None
                    limit_at, limit_count = rng.randint(1, 10), rng.randint(1, 2)
                    expiring = kind == "expiring-token"
                    tokens.lifetime = TOKEN_LIFETIME if expiring else None
                    refused_before = _expired_tokens(registry.log)
                    rates = {name: 0.35 if kind == f"proxy-{name}" else 0.2 if name == on_top else 0.0
                             for name in plans}
                    restarts = {name: rng.randint(1, 8 if name == "devpi" else 4 if name == "pypi" else 20)
                                if kind == f"restart-{name}" else 0 for name in plans}
                    for name, plan in plans.items():
                        plan.arm(None, rates[name], restart_at=restarts[name],
                                 limit_at=limit_at if name == limited else 0,
                                 limit_count=limit_count if name == limited else 0,
                                 slow=SLOW_REGISTRY if expiring and name == "registry" else 0.0)
                        plan.lose_a_write = _lost_answers(tally) == 0
                        plan.drop_one = not any(" drop on " in key for key in tally)
                    processes = [subprocess.Popen([*argv, *timeout], env=env, stdout=subprocess.PIPE,
                                                  stderr=subprocess.STDOUT)
                                 for _ in range(2 if kind == "two-publishers" else 1)]
                    process = processes[0]
                    for plan in plans.values():
                        plan.process = process
                    if kind == "kill-at-request":  # at a random request of a random server
                        target = rng.choice(sorted(plans))
                        plans[target].kill_at = rng.randint(1, 12)
                        plans[target].kill_pause = rng.uniform(0.0, 0.3)
                    if kind == "kill":
                        try:
                            process.wait(timeout=rng.uniform(0.2, 6.0))
                        except subprocess.TimeoutExpired:
                            process.send_signal(signal.SIGKILL)
                            tally[f"{what}: kill -9 of the publisher at a random moment"] += 1
                            covered.add(kind)
                    outs = [p.communicate(timeout=240)[0] for p in processes]
                    out = outs[0]
                    if kind == "two-publishers":
                        tally[f"{what}: two publishers at once"] += 1
                        covered.add(kind)
                    if expiring:
                        expired = _expired_tokens(registry.log) - refused_before
                        tally[f"{what}: registry token expired in use"] += expired
                        if expired:
                            covered.add(kind)
                    tokens.lifetime = None
                    for name, plan in plans.items():
                        if plan.restarting is not None:
                            plan.restarting.join(timeout=120)
                        if plan.killed:
                            tally[f"{what}: kill -9 of the publisher at a {name} request"] += 1
                            covered.add(kind)
                        if plan.restarted:
                            tally[f"{what}: {name} restart mid-upload"] += 1
                            covered.add(kind)
                        plan.arm(None, 0.0)
                        injected = proxies[name].injected_by_method - before[name]
                        for (fault, method), count in injected.items():
                            tally[f"{what}: {name} {fault} on {method}"] += count
                        if injected and kind == f"proxy-{name}":
                            covered.add(kind)
                        if any(fault == "429" for fault, _ in injected):
                            covered.add("rate-limit")
                    for process, out in zip(processes, outs, strict=True):
                        runs["ok" if process.returncode == 0 else "failed"] += 1
                        history.append(f"{kind}: exit {process.returncode}: "
                                       f"{(out.decode().strip().splitlines() or [''])[-1][:300]}")
                        said = f"{what} under {kind}: exit {process.returncode}: {out.decode()[-3000:]}"
                        # killed, or a clean failure: never exit 8 (the bytes are the same), never a crash
                        assert process.returncode in (0, -9, 7), said
                        if process.returncode == 7:
                            last = out.decode().strip().splitlines()[-1]
                            assert b"Traceback" not in out and last.startswith("error: "), said
                            if b"gave up after 3 tries; last response:" not in out:  # failed without retrying
                                unretried.append(f"{what} under {kind}: {last[:400]}")  # its one line
                    if all(process.returncode == 0 for process in processes):
                        return  # else the next run resumes (after two at once: the loser's work)
                pytest.fail(f"{what} {argv[-1]} did not finish after {ATTEMPTS + 1} runs:\n" + "\n".join(history) +
                            f"\nthe last said:\n{out.decode()[-3000:]}")

            try:
                for release in range(MAX_RELEASES):
                    if (release >= RELEASES and sum(tally.values()) >= FAULTS and covered >= set(KINDS)
                            and _lost_answers(tally) >= 1):
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
                    plain = {p.name: sha for r in records if r.variant in ("cpu", "any") and r.path.endswith(".whl")
                             for p in [plain_version_wheel(dist / r.path, tmp_path / f"plain-{release}")]
                             for sha in [sha256_of(p)]}
                    expected[version] = _expected(version, {r.name: r.sha256 for r in records}, plain, packages)
                    images[version] = ids
                    common = shipyard_command("--root", root)
                    tail = ["--dist", str(dist), "--tries", "3", "--first-pause", "0.05"]
                    run_until_done([*common, "publish", "--channel", "nightly", *tail], "publish")
                    run_until_done([*common, "promote", version, "--from", "nightly", "--to", "test", *tail],
                                   "promote")
                # The reader goes on for a moment after the last switch.
                time.sleep(0.5)
            finally:
                reader.stop.set()
                reader.join(timeout=30)
                remove_images(client, repo, made)
            # Nothing lost, nothing duplicated, no other bytes: every page as the manifest says, counted.
            lost: list[str] = []
            duplicated: list[str] = []
            final = reader.snapshot(strict=True)
            for label, pages in final.items():
                kind, _, channel = label.partition("@")
                if kind == "registry":
                    continue
                for version, per_kind in expected.items():
                    for page, files in pages:
                        want = per_kind[kind][page]
                        have = {n: sha for n, sha in files.items() if f"-{version}-" in n or f"-{version}+" in n}
                        lost += [f"{label} {page}: {n}" for n in set(want) - set(have)]
                        duplicated += [f"{label} {page}: {n}" for n in set(have) - set(want)]
                        reader.wrong_bytes += [f"{label} {page}: {n}" for n in set(want) & set(have)
                                               if want[n] != have[n]]
            for channel in CHANNELS:  # devpi's JSON pages: a name listed twice is a duplicate
                for tag in ("cpu", "cu118", "plain"):
                    index = f"{user}/{channel}" if tag == "plain" else f"{user}/{channel}-{tag}"
                    for project in PAGES:
                        files = requests.get(f"{devpi.url}/{index}/+simple/{project}/", timeout=10,
                                             headers={"Accept": "application/vnd.pypi.simple.v1+json"}).json()["files"]
                        names = [f["filename"] for f in files]
                        duplicated += [f"devpi {index} {n}" for n in set(names) if names.count(n) > 1]
            stored = pypi.files()  # pypiserver's disk: each plain wheel once, with its bytes
            for per_kind in expected.values():
                for files in per_kind["pypi"].values():
                    lost += [f"pypiserver {n}" for n in files if n not in stored]
                    reader.wrong_bytes += [f"pypiserver {n}" for n, sha in files.items()
                                           if n in stored and stored[n] != sha]
            # Every image under its channel tags, whole, with the recorded id, the one manifest its staging
            # tag holds; each channel's moving tags on the newest release's images; and no tag besides
            # those (a resumed push adds none).
            newest = max(images, key=Version)
            wanted = {f"whole {channel}-{tag}-runtime@sha256:{image_id}" for channel in CHANNELS
                      for tag, image_id in images[newest].items()}
            for version, ids in images.items():
                for tag, image_id in ids.items():
                    for channel in CHANNELS:
                        channel_tag = f"{version}-{tag}-runtime-{channel}"
                        staging = f"{channel_tag}-stage-{image_id[:12]}"
                        wanted |= {f"whole {channel_tag}@sha256:{image_id}", f"whole {staging}@sha256:{image_id}"}
                        digest = reader.served_digest(channel_tag)
                        if digest is None:
                            lost.append(f"registry {channel_tag}")
            tags = set(final["registry"][0][1])
            lost += [f"registry {t}" for t in sorted(wanted - tags)]
            duplicated += [f"registry {t}" for t in sorted(tags - wanted)]
    total = sum(tally.values())
    by_target: Counter[str] = Counter()
    by_kind: Counter[str] = Counter()
    for key, count in tally.items():
        fault = key.split(": ", 1)[1]
        # A server's faults are its target's; a kill or two publishers at once hit every target (the
        # static tree and the conda channel have no server of their own: they meet only those).
        target = next((t for t in ("devpi", "pypi", "registry", "s3") if t in fault), "every target")
        by_target[target] += count
        kind = re.sub(r"^(devpi|pypi|registry|s3) ", "", fault).split(" on ")[0]
        kind = re.sub(r" at a (devpi|pypi|registry|s3) request", " at a server's request", kind)
        by_kind[kind] += count
    lines = [f"fault tally (seed {SEED}, at least {FAULTS} faults asked): {total} faults injected in "
             f"{time.monotonic() - started:.0f} s over {len(expected)} releases published and promoted to devpi, "
             f"pypi (pypiserver), the static tree, the conda channel, the registry and an S3 bucket's wheel tree",
             "  by kind of fault:", *(f"    {count:5d}  {kind}" for kind, count in sorted(by_kind.items())),
             "  by target:", *(f"    {count:5d}  {target}" for target, count in sorted(by_target.items())),
             f"  publisher runs: {runs['failed']} interrupted or failed, {runs['ok']} finished",
             f"  reader: {reader.snapshots} snapshots, every one checked ({reader.unreadable} targets' reads cut "
             f"short by a restart, checked as far as read); {dict(reader.between_uploads)} views between uploads "
             f"(no staging); {reader.mid_switch} views between the channel tags of one release's images",
             f"  {len(reader.partial)} partial releases seen {dict(reader.partial_by_target)}; {len(lost)} files or "
             f"images lost, {len(duplicated)} duplicated, {len(reader.wrong_bytes)} with other bytes",
             f"  {len(unretried)} runs stopped by a fault without retrying it {unretried}",
             f"  in detail: {dict(sorted(tally.items()))}"]
    print("\n".join(lines))
    assert reader.partial == [], "\n".join(reader.partial)
    assert reader.wrong_bytes == [] and lost == [] and duplicated == [], (reader.wrong_bytes, lost, duplicated)
    assert reader.snapshots > 20
    assert total >= FAULTS, tally
    assert covered >= set(KINDS), (sorted(set(KINDS) - covered), tally)
    assert _lost_answers(tally) >= 1, tally  # an upload the server took whose answer never arrived
    assert any(" drop on " in key for key in tally), tally  # a connection closed without an answer
