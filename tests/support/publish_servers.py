"""Real servers for the publish tests, on 127.0.0.1, started and stopped by the tests: a devpi
server (with a user and password), a plain HTTP server for the static wheel tree, the conda
channel server (shipyard.conda.serve, token in the path) and Debian's docker-registry with
htpasswd (bcrypt) auth, or behind the bearer-token flow (registry_auth's stand-in token service),
over plain HTTP or TLS from a CA the test makes."""

from __future__ import annotations

import functools
import json
import secrets
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import requests
from support.release_copy import point_release_yaml

if TYPE_CHECKING:
    from support.registry_auth import Tls, TokenService

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]
MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"
# devpi derives its token key with argon2 at every start (10 s and 512 MB by default): cheap
# parameters keep a restart to a few seconds. Passwords are still checked.
_CHEAP_ARGON2 = ["--argon2-memory-cost", "64", "--argon2-time-cost", "1", "--argon2-parallelism", "1"]


def _wait_until_up(process: subprocess.Popen[bytes], log: Path, name: str, timeout: float, interval: float,
                   answered: Callable[[], bool],
                   not_up: tuple[type[Exception], ...] = (requests.RequestException,)) -> None:
    """Poll `answered` until it is true; the server's log tail when it exits or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if answered():
                return
        except not_up:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{name} did not come up:\n{log.read_text()[-3000:]}")
        time.sleep(interval)


def _stop(process: subprocess.Popen[bytes] | None, timeout: float) -> None:
    """Terminate a running server, killed when it does not end within `timeout`."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout)


@dataclass
class Devpi:
    """A devpi-server process over `serverdir`; `restart()` keeps its data, as a real restart does."""

    serverdir: Path
    port: int
    log: Path
    root_password: str = ""
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90) -> None:
        with self.log.open("ab") as sink:
            # A server outlives any one command, so it cannot go through command.run.
            self.process = subprocess.Popen(
                [BIN / "devpi-server", "--serverdir", self.serverdir, "--host", "127.0.0.1", "--port",
                 str(self.port), "--secretfile", self.serverdir.parent / "devpi-secret", *_CHEAP_ARGON2],
                stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        _wait_until_up(self.process, self.log, "devpi-server", timeout, 0.2,
                       lambda: requests.get(f"{self.url}/+api", timeout=2).status_code == 200)

    def stop(self) -> None:
        _stop(self.process, 20)
        self.process = None

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=20)
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def add_user(self, name: str, password: str | None = None) -> str:
        """A new devpi user (each test publishes as its own, so their indexes never meet); its password."""
        password = password or secrets.token_urlsafe(12)
        response = requests.put(f"{self.url}/{name}", auth=("root", self.root_password), timeout=30,
                                json={"password": password, "email": "ci@example.invalid"})
        assert response.status_code in (200, 201), response.text
        return password

    def indexes(self, user: str) -> list[str]:
        response = requests.get(f"{self.url}/{user}", headers={"Accept": "application/json"}, timeout=30)
        return sorted(response.json()["result"].get("indexes", {})) if response.status_code == 200 else []


@contextmanager
def devpi_server(folder: Path, port: int) -> Iterator[Devpi]:
    """A fresh devpi server on `port` with no PyPI mirror; `add_user` makes publishers."""
    folder.mkdir(parents=True, exist_ok=True)
    root_password = secrets.token_urlsafe(12)
    server = Devpi(folder / "server", port, folder / "devpi.log", root_password=root_password)
    subprocess.run([BIN / "devpi-gen-secret", "--secretfile", folder / "devpi-secret"], check=True,
                   capture_output=True)
    # `--root-passwd=…` in one word: a generated password may begin with "-".
    subprocess.run([BIN / "devpi-init", "--serverdir", server.serverdir, f"--root-passwd={root_password}",
                    "--no-root-pypi"], check=True, capture_output=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@contextmanager
def static_server(folder: Path, port: int = 0) -> Iterator[str]:
    """`folder` over HTTP (what a plain web server in front of the static tree does); yields the base URL."""
    folder.mkdir(parents=True, exist_ok=True)
    server = ThreadingHTTPServer(("127.0.0.1", port), functools.partial(_QuietHandler, directory=str(folder)))
    server.daemon_threads = True
    with serving_in_thread(server):
        yield f"http://127.0.0.1:{server.server_address[1]}/"


class QuietHandler(BaseHTTPRequestHandler):
    """A stand-in server's request handler that logs nothing: the tests read what commands print."""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def send_json(self, status: int, body: object) -> None:
        """Answer `status` with `body` as JSON."""
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def loopback_server(handler: type[BaseHTTPRequestHandler], port: int = 0, tls: Tls | None = None) -> Iterator[str]:
    """`handler` answering on 127.0.0.1 (`port`, or one the system picks) from a thread of its own
    while the block runs; yields its base URL, `http://127.0.0.1:<port>` (no trailing slash), or
    `https://` with `tls` (its certificate, signed by its CA)."""
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    if tls is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(tls.certificate, tls.key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    with serving_in_thread(server):
        yield f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"


@contextmanager
def serving_in_thread(server: ThreadingHTTPServer) -> Iterator[None]:
    """`server` answering from a thread of its own while the block runs; shut down and closed after."""
    # shutdown() waits for serve_forever's next look at its flag: every 0.5 s by default, which
    # was most of a short test's time.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@dataclass
class BusyServer:
    """A loopback server that answers every request with the next of `answers` (status, headers),
    the last one over and over: a rate-limiting index (429 with Retry-After) in a test."""

    answers: list[tuple[int, dict[str, str]]]
    url: str = ""
    requests: list[tuple[str, str, float]] = field(default_factory=list)  # method, path, monotonic time


@contextmanager
def busy_server(answers: list[tuple[int, dict[str, str]]]) -> Iterator[BusyServer]:
    busy = BusyServer(answers)

    class Handler(QuietHandler):
        def _serve(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            busy.requests.append((self.command, self.path, time.monotonic()))
            status, headers = busy.answers[min(len(busy.requests), len(busy.answers)) - 1]
            body = b"{}" if status == 200 else b"slow down"
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_PATCH = do_HEAD = _serve

    with loopback_server(Handler) as url:
        busy.url = f"{url}/"
        yield busy


@dataclass
class Registry:
    """Debian's docker-registry serving `config` on `address`; `restart()` keeps its storage and port,
    as a real restart does."""

    address: str  # host:port, what release.yaml's `kind: docker` target names as its url
    user: str
    password: str
    config: Path
    process: subprocess.Popen[bytes] | None = None
    tls: Tls | None = None  # served over TLS with this CA's certificate
    tokens: TokenService | None = None  # behind the bearer-token flow of this token service

    @property
    def log(self) -> Path:
        return self.config.parent / "registry.log"

    @property
    def api(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.address}/v2"

    def tag_on_disk(self, repo: str, tag: str) -> str | None:
        """The manifest digest the registry's storage links `repo:tag` to (None: no such tag), read
        from its files: what it serves, asked without any client."""
        link = (self.config.parent / "data" / "docker" / "registry" / "v2" / "repositories" / repo / "_manifests" /
                "tags" / tag / "current" / "link")
        return link.read_text().strip() if link.is_file() else None

    def blob_on_disk(self, digest: str) -> bytes:
        hexdigest = digest.removeprefix("sha256:")
        return (self.config.parent / "data" / "docker" / "registry" / "v2" / "blobs" / "sha256" / hexdigest[:2] /
                hexdigest / "data").read_bytes()

    def auth(self) -> dict[str, str]:
        return {"username": self.user, "password": self.password}

    def start(self, timeout: float = 30) -> None:
        with self.log.open("ab") as log:
            # A server outlives any one command, so it cannot go through command.run.
            self.process = subprocess.Popen(["docker-registry", "serve", str(self.config)], stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True)
        verify = str(self.tls.ca) if self.tls else True
        _wait_until_up(self.process, self.log, "docker-registry", timeout, 0.1,
                       lambda: requests.get(f"{self.api}/", timeout=2, verify=verify).status_code == 401,
                       not_up=(requests.ConnectionError, requests.Timeout))  # a TLS handshake may time out

    def stop(self) -> None:
        _stop(self.process, 30)
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def served_digest(self, repo: str, tag: str) -> str | None:
        """The manifest digest the registry serves under `repo:tag` (None: no such tag), from its API."""
        answer = requests.head(f"http://{self.address}/v2/{repo}/manifests/{tag}", auth=(self.user, self.password),
                               headers={"Accept": MANIFEST_V2}, timeout=30)
        return answer.headers["Docker-Content-Digest"] if answer.status_code == 200 else None

    def tags(self, repo: str) -> list[str]:
        answer = requests.get(f"http://{self.address}/v2/{repo}/tags/list", auth=(self.user, self.password),
                              timeout=30)
        return sorted(answer.json().get("tags") or []) if answer.status_code == 200 else []


@contextmanager
def docker_registry(folder: Path, *, user: str = "shipyard", password: str | None = None, tls: Tls | None = None,
                    bearer: bool = False) -> Iterator[Registry]:
    """Debian's docker-registry on a claimed 127.0.0.1 port, storing under `folder`, with htpasswd
    (bcrypt) auth for `user` (`bearer`: behind the stand-in token service, which knows `user`
    instead), over TLS with `tls`'s certificate when given; stopped at the end."""
    from shipyard.plumbing import command
    from shipyard.plumbing.port_ranges import claimed_port_range

    if shutil.which("docker-registry") is None or shutil.which("htpasswd") is None:
        pytest.fail("docker-registry and htpasswd are missing: run ci/bootstrap.sh "
                    "(apt-get install -y docker-registry apache2-utils)")
    folder.mkdir(parents=True, exist_ok=True)
    password = password or secrets.token_urlsafe(18)
    htpasswd = command.run(["htpasswd", "-B", "-i", "-n", user], input_text=password, timeout=30).stdout
    (folder / "htpasswd").write_text(htpasswd)
    with claimed_port_range() as ports:
        port = unbound_port(ports)
        config: dict = {"version": 0.1, "log": {"level": "warn"},
                        "storage": {"filesystem": {"rootdirectory": str(folder / "data")}},
                        "http": {"addr": f"127.0.0.1:{port}", "secret": secrets.token_hex(16)},
                        "auth": {"htpasswd": {"realm": "shipyard-test", "path": str(folder / "htpasswd")}}}
        if tls is not None:
            config["http"]["tls"] = {"certificate": str(tls.certificate), "key": str(tls.key)}
        with ExitStack() as stack:
            tokens = None
            if bearer:
                from support.registry_auth import token_service

                tokens = stack.enter_context(token_service(folder / "token", user, password,
                                                                unbound_port(range(port + 1, ports.stop))))
                config["auth"] = {"token": {"realm": tokens.realm, "service": tokens.service, "issuer": tokens.issuer,
                                            "rootcertbundle": str(tokens.rootcertbundle)}}
            (folder / "config.yml").write_text(json.dumps(config))  # JSON is YAML
            server = Registry(f"127.0.0.1:{port}", user, password, folder / "config.yml", tls=tls, tokens=tokens)
            try:
                server.start()  # inside: a start that fails still stops the process
                yield server
            finally:
                server.stop()


def unbound_port(ports: range) -> int:
    """The first port of a claimed range that nothing listens on: a server left running by a
    killed test run keeps its port after its claim is gone."""
    for port in ports:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"every port of {ports} is in use")


@dataclass
class Site:
    """The three servers over one folder: devpi, a web server over `folder/whl`, the conda channel
    server over `folder/conda` (token in the path)."""

    devpi: Devpi
    folder: Path
    tree_url: str
    conda_url: str  # the channel server's base URL, with its token
    token: str

    def replacements(self, *, prefix: str = "", devpi_url: str | None = None, conda_url: str | None = None,
                     registry: str | None = None) -> dict[str, str]:
        """What point_release_yaml changes so that the publish targets point at these servers (devpi
        through `devpi_url` when given, e.g. a fault proxy; the images target at `registry`,
        host:port, when given); `prefix` gives the root's trees sub-folders of their own."""
        sub = f"{prefix}/" if prefix else ""
        conda_base = (conda_url or self.conda_url).split("/t/")[0]
        return {"url: http://127.0.0.1:8081/": f"url: {devpi_url or self.devpi.url}/",
                "url: http://127.0.0.1:8083/whl/": f"url: {self.tree_url}{sub}",
                "url: http://127.0.0.1:8082/conda/": f"url: {conda_base}/conda/{sub}",
                "path: dist/site/whl": f"path: {self.folder / 'whl' / prefix}",
                "path: dist/site/conda": f"path: {self.folder / 'conda' / prefix}",
                **({"url: 127.0.0.1:5000": f"url: {registry}"} if registry else {})}

    def release_yaml(self, root: Path, *, prefix: str = "", devpi_url: str | None = None,
                     conda_url: str | None = None, registry: str | None = None) -> None:
        """release.yaml and feature_status.yaml in `root`, the publish targets pointed at these
        servers (replacements says how)."""
        point_release_yaml(root, self.replacements(prefix=prefix, devpi_url=devpi_url, conda_url=conda_url,
                                                   registry=registry))


@contextmanager
def publish_site(base: Path) -> Iterator[Site]:
    """Start the servers in `base` (devpi on a claimed port), stop them at the end."""
    from shipyard.conda.serve import serve_channel
    from shipyard.plumbing.port_ranges import claimed_port_range

    folder = base / "site"
    (folder / "conda").mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(18)
    with claimed_port_range() as ports, devpi_server(base / "devpi", ports[0]) as devpi, \
            static_server(folder / "whl") as tree, serve_channel({"conda": folder / "conda"}, token=token) as conda:
        yield Site(devpi, folder, tree, conda, token)


def pip_installed_sha(index_url: str, requirement: str, dest: Path, *extra: str) -> str:
    """pip installs `requirement` from `index_url` only; the sha256 of the archive it installed."""
    dest.mkdir(parents=True, exist_ok=True)
    report = dest / "report.json"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--isolated", "--no-cache-dir",
                           "--index-url", index_url, "--target", str(dest / "site"), "--report", str(report),
                           *extra, requirement], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    [item] = json.loads(report.read_text())["install"]
    return item["download_info"]["archive_info"]["hashes"]["sha256"]


@dataclass
class PypiServer:
    """pypiserver over `packages`: an index that speaks only the upload API and PEP 503 HTML, as
    PyPI-compatible indexes without staging do. Uploads need a user of its htpasswd file."""

    packages: Path
    htpasswd: Path
    port: int
    log: Path
    process: subprocess.Popen[bytes] | None = None
    spare_ports: list[int] = field(default_factory=list)  # of its claimed range, for restarts

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def simple(self) -> str:
        return f"{self.url}simple/"

    def add_user(self, name: str, password: str) -> None:
        """`name` may upload with `password` (an API token's user is __token__); read at each request."""
        from passlib.apache import HtpasswdFile

        users = HtpasswdFile(str(self.htpasswd), new=not self.htpasswd.exists())
        users.set_password(name, password)
        users.save()

    def start(self, timeout: float = 60) -> None:
        with self.log.open("ab") as sink:
            # A server outlives any one command, so it cannot go through command.run. No fallback:
            # a project it does not hold is not sent on to pypi.org.
            self.process = subprocess.Popen(
                [BIN / "pypi-server", "run", "-p", str(self.port), "--host", "127.0.0.1", "-P", self.htpasswd,
                 "-a", "update", "--hash-algo", "sha256", "--disable-fallback",
                 self.packages], stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        _wait_until_up(self.process, self.log, "pypiserver", timeout, 0.1,
                       lambda: requests.get(self.simple, timeout=2).status_code == 200)

    def stop(self) -> None:
        _stop(self.process, 20)
        self.process = None

    def restart(self) -> None:
        """Stopped, then started on the next port of its claimed range: waitress cannot bind the old
        one while the connections it closed are in TIME_WAIT (a minute). Whoever connects through a
        proxy points the proxy at `port` again."""
        self.stop()
        self.port = unbound_port(range(self.spare_ports.pop(0), self.spare_ports[-1] + 1))
        self.spare_ports = [p for p in self.spare_ports if p > self.port]
        self.start()

    def files(self) -> dict[str, str]:
        """filename -> sha256 of what it stores (its folder, as the server's disk holds it)."""
        from shipyard.plumbing.hashing import sha256_of

        return {p.name: sha256_of(p) for p in sorted(self.packages.iterdir()) if p.is_file()}


@contextmanager
def pypi_server(folder: Path) -> Iterator[PypiServer]:
    """A fresh pypiserver on a claimed 127.0.0.1 port storing in `folder/packages`; stopped at the end.
    Its htpasswd starts empty of users: `add_user` makes uploaders."""
    from shipyard.plumbing.port_ranges import claimed_port_range

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "packages").mkdir(exist_ok=True)
    htpasswd = folder / "htpasswd"
    with claimed_port_range() as ports:
        first = unbound_port(ports)
        server = PypiServer(folder / "packages", htpasswd, first, folder / "pypiserver.log",
                            spare_ports=[p for p in ports if p > first])
        # pypiserver refuses to start on an htpasswd file it cannot read: one placeholder user.
        server.add_user("nobody", secrets.token_urlsafe(18))
        server.start()
        try:
            yield server
        finally:
            server.stop()
