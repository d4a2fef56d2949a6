"""Two `shipyard publish` processes at once, with other bytes under the same file names, against
the real servers (issue #52, item 1): on every target kind (the s3 kind against moto's S3
server, a stand-in: support/s3_standin.py; the registry with images in the docker engine),
exactly one wins, the other exits 8 in lines that name the target, the file and both sha256s, and
what the server serves is the winner's, byte for byte, 20 rounds in a row. Each kind keeps one
server for its rounds, with fresh names (or a fresh channel folder) per round.

No hook synchronises the two: both are forked at the same instant (support.shipyard_process's
ShipyardForks: whole `shipyard publish` processes, the CLI imported once for all of them) and race
through the same steps (the listing, the staging, the switch); a round in which they overlap is what
the code before the fix lost (the static tree and the conda channel then served the second one's
bytes under the first one's name, both exiting 0)."""

from __future__ import annotations

import json
import secrets
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest
import requests
from support.publish_project import PublishProject
from support.publish_servers import MANIFEST_V2, PypiServer, Registry, Site, docker_registry, publish_site, pypi_server
from support.s3_standin import STATIC_TARGET, S3StandIn, s3_standin
from support.shipyard_process import ShipyardForks
from support.synthetic_release import (
    VERSION,
    build_conda_packages,
    features,
    image_record,
    import_image,
    make_wheel,
    record,
    remove_images,
    write_manifest,
)

from shipyard.plumbing.hashing import sha256_hex, sha256_of
from shipyard.publish.plain_version import plain_version_wheel

pytestmark = pytest.mark.slow
ROUNDS = 20
DEVPI_TARGET = "    kind: devpi\n    url: http://127.0.0.1:8081/\n"


@dataclass
class Servers:
    site: Site
    conda_package: Path  # the fixture recipe's cpu package


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    base = tmp_path_factory.mktemp("race")
    [package] = build_conda_packages(base / "built", ["cpu"])
    with publish_site(base) as site:
        yield Servers(site, package)


@pytest.fixture(scope="module")
def pypi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PypiServer]:
    with pypi_server(tmp_path_factory.mktemp("race-pypi")) as running:
        yield running


@dataclass(frozen=True)
class Racer:
    project: PublishProject
    sha256: str  # what its manifest records for the raced file (a pypi target's: the plain-version rewrite)


@pytest.fixture(scope="module")
def forks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShipyardForks]:
    forks = ShipyardForks(tmp_path_factory.mktemp("race-runs"))
    yield forks
    forks.close()


def _race(forks: ShipyardForks, target: str, filename: str, racers: tuple[Racer, Racer],
          served: Callable[[], str]) -> None:
    """Both racers publish to `target` at once: one exits 0, the other 8 naming `filename`, the target
    and both sha256s, and `served()` (the file downloaded back from the server) is the winner's."""
    done = forks.together(*(r.project.command("publish", "--channel", "nightly", "--target", target)
                            for r in racers))
    codes = [code for code, _ in done]
    outputs = [output for _, output in done]
    assert sorted(codes) == [0, 8], "\n---\n".join(outputs)
    winner, loser = (0, 1) if codes[0] == 0 else (1, 0)
    flat = " ".join(outputs[loser].split())
    assert f"{target}: " in flat and filename in flat, flat
    assert racers[winner].sha256 in flat and racers[loser].sha256 in flat, flat
    assert "Traceback" not in outputs[loser]
    assert served() == racers[winner].sha256


def _download(url: str, **kwargs: object) -> str:
    response = requests.get(url, timeout=30, **kwargs)  # type: ignore[arg-type]
    assert response.status_code == 200, (url, response.status_code)
    return sha256_hex(response.content)


def _wheel_dist(dist: Path, project: str, payload: str) -> Path:
    """dist/ holding one cpu wheel of `project` and its manifest; the wheel."""
    wheel = make_wheel(dist / "whl" / "cpu" / project, project, f"{VERSION}+cpu", payload=payload)
    write_manifest(dist, [record(dist, wheel, component=project, package_type="wheel", variant="cpu", tag="cpu",
                                 tests=features())])
    return wheel


def _racers(folder: Path, replacements: dict[str, str], env: dict[str, str],
            dist_of: Callable[[Path, str], str]) -> tuple[Racer, Racer]:
    """Two projects in `folder`/a and `folder`/b with one release.yaml; `dist_of(dist, payload)` lays
    out each one's dist/ (other bytes each) and returns the sha256 its record names."""
    out = []
    for side in ("a", "b"):
        project = PublishProject.laid_out(folder / side, replacements, env, tries=3)
        out.append(Racer(project, dist_of(project.dist, f"{side}-{secrets.token_hex(4)}")))
    assert out[0].sha256 != out[1].sha256
    return out[0], out[1]


def test_two_publishers_of_one_static_tree_name_one_wins_and_its_bytes_stay(servers: Servers, forks: ShipyardForks,
                                                                            tmp_path: Path):
    site = servers.site
    replacements = site.replacements(prefix="race")
    for n in range(ROUNDS):
        project = "rs" + secrets.token_hex(4)
        filename = f"{project}-{VERSION}+cpu-py3-none-any.whl"
        racers = _racers(tmp_path / f"r{n}", replacements, {},
                         lambda dist, payload, p=project: sha256_of(_wheel_dist(dist, p, payload)))  # type: ignore[misc]
        page = f"{site.tree_url}race/nightly/cpu/{project}/"

        def served(page: str = page, filename: str = filename) -> str:
            [entry] = [e for e in requests.get(f"{page}index.json", timeout=30).json()["files"]
                       if e["filename"] == filename]
            digest = _download(page + filename)
            assert entry["hashes"]["sha256"] == digest  # the index entry is the winner's too
            return digest

        _race(forks, "wheels-tree", filename, racers, served)


def _other_bytes(package: Path, dest: Path, payload: str) -> Path:
    """`package` with other bytes and the same name: a zip comment of its own (a .conda is a zip)."""
    copy = dest / package.name
    dest.mkdir(parents=True, exist_ok=True)
    copy.write_bytes(package.read_bytes())
    with zipfile.ZipFile(copy, "a") as archive:
        archive.comment = payload.encode()
    return copy


def _conda_dist(package: Path, dist: Path, payload: str) -> str:
    placed = _other_bytes(package, dist / "conda" / "noarch", payload)
    write_manifest(dist, [record(dist, placed, component="ember", package_type="conda", variant="cpu", tag="cpu",
                                 tests=features())])
    return sha256_of(placed)


def test_two_publishers_of_one_conda_package_name_one_wins_and_its_bytes_stay(servers: Servers, forks: ShipyardForks,
                                                                              tmp_path: Path):
    site = servers.site
    filename = servers.conda_package.name
    for n in range(ROUNDS):
        prefix = f"race{n}"  # a channel folder per round: the fixture package has one name
        racers = _racers(tmp_path / f"r{n}", site.replacements(prefix=prefix),
                         {"SHIPYARD_CONDA_TOKEN": site.token},
                         lambda dist, payload: _conda_dist(servers.conda_package, dist, payload))
        url = f"{site.conda_url}conda/{prefix}/nightly/noarch/"

        def served(url: str = url) -> str:
            [entry] = [v for k, v in requests.get(f"{url}repodata.json", timeout=30).json()["packages.conda"].items()
                       if k == filename]
            digest = _download(url + filename)
            assert entry["sha256"] == digest
            return digest

        _race(forks, "conda-channel", filename, racers, served)


def test_two_publishers_of_one_devpi_name_one_wins_and_its_bytes_stay(servers: Servers, forks: ShipyardForks,
                                                                      tmp_path: Path):
    devpi = servers.site.devpi
    user = "race" + secrets.token_hex(3)
    env = {"SHIPYARD_PYPI_USERNAME": user, "SHIPYARD_PYPI_PASSWORD": devpi.add_user(user)}
    # The variant index only: the race is decided per index, and one is enough to show it.
    replacements = {**servers.site.replacements(prefix=user),
                    "    password_env: SHIPYARD_PYPI_PASSWORD\n    default_variant: cpu\n":
                    "    password_env: SHIPYARD_PYPI_PASSWORD\n"}
    for n in range(ROUNDS):
        project = "rd" + secrets.token_hex(4)
        filename = f"{project}-{VERSION}+cpu-py3-none-any.whl"
        racers = _racers(tmp_path / f"r{n}", replacements, env,
                         lambda dist, payload, p=project: sha256_of(_wheel_dist(dist, p, payload)))  # type: ignore[misc]
        page = f"{devpi.url}/{user}/nightly-cpu/+simple/{project}/"

        def served(page: str = page) -> str:
            [entry] = requests.get(page, headers={"Accept": "application/vnd.pypi.simple.v1+json"},
                                   timeout=30).json()["files"]
            digest = _download(requests.compat.urljoin(page, entry["url"]))
            assert entry["hashes"]["sha256"] == digest
            return digest

        _race(forks, "pypi", filename, racers, served)


def test_two_publishers_of_one_pypi_name_one_wins_and_its_bytes_stay(pypi: PypiServer, forks: ShipyardForks,
                                                                     tmp_path: Path):
    user, password = "race" + secrets.token_hex(3), secrets.token_urlsafe(18)
    pypi.add_user(user, password)
    replacements = {DEVPI_TARGET: f"    kind: pypi\n    url: {pypi.url}\n    index_url: {pypi.simple}\n"
                                  "    channels: [nightly]\n"}
    env = {"SHIPYARD_PYPI_USERNAME": user, "SHIPYARD_PYPI_PASSWORD": password}
    for n in range(ROUNDS):
        project = "rp" + secrets.token_hex(4)
        filename = f"{project}-{VERSION}-py3-none-any.whl"

        def dist_of(dist: Path, payload: str, project: str = project) -> str:
            # What the target uploads: the wheel under the plain version (PyPI refuses +cpu).
            return sha256_of(plain_version_wheel(_wheel_dist(dist, project, payload), dist.parent / "plain"))

        racers = _racers(tmp_path / f"r{n}", replacements, env, dist_of)

        def served(filename: str = filename) -> str:
            digest = _download(f"{pypi.url}packages/{filename}")
            assert pypi.files()[filename] == digest
            return digest

        _race(forks, "pypi", filename, racers, served)


@pytest.fixture(scope="module")
def s3() -> Iterator[S3StandIn]:
    pytest.importorskip("moto.server", reason="moto (a test dependency) is not installed: pip install -e '.[test]'")
    with s3_standin() as running:
        yield running


def test_two_publishers_of_one_s3_name_one_wins_and_its_bytes_stay(s3: S3StandIn, forks: ShipyardForks,
                                                                  tmp_path: Path):
    """The store's own conditional write (If-None-Match: *) decides; the loser names both."""
    for n in range(ROUNDS):
        project = "rs" + secrets.token_hex(4)
        prefix = f"race{n}/whl/"
        filename = f"{project}-{VERSION}+cpu-py3-none-any.whl"
        racers = _racers(tmp_path / f"r{n}", {STATIC_TARGET: s3.target(prefix)}, s3.credentials(),
                         lambda dist, payload, p=project: sha256_of(_wheel_dist(dist, p, payload)))  # type: ignore[misc]
        folder = f"{prefix}nightly/cpu/{project}"

        def served(folder: str = folder, filename: str = filename) -> str:
            [entry] = [e for e in json.loads(s3.object_bytes(f"{folder}/index.json"))["files"]
                       if e["filename"] == filename]
            digest = sha256_hex(s3.object_bytes(f"{folder}/{filename}"))
            assert entry["hashes"]["sha256"] == digest  # the page lists the winner's
            return digest

        _race(forks, "wheels-tree", filename, racers, served)


@pytest.fixture(scope="module")
def registry(docker_engine: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with docker_registry(tmp_path_factory.mktemp("race-registry")) as server:
        yield server


def test_two_publishers_of_one_registry_tag_one_wins_and_its_image_stays(registry: Registry, forks: ShipyardForks,
                                                                        tmp_path: Path):
    """Two images (other ids) under one version tag, pushed by two processes at once: a tag has no
    conditional write, so each writes, reads back and reads again (publish/registry.py); the one whose
    image the tag does not hold exits 8 naming both ids, and never writes over the winner."""
    client = docker.from_env(timeout=300)
    credentials = {"SHIPYARD_REGISTRY_USERNAME": registry.user, "SHIPYARD_REGISTRY_PASSWORD": registry.password}
    repos = []
    try:
        for n in range(ROUNDS):
            repo = f"shipyard-race-{secrets.token_hex(4)}"
            repos.append(repo)
            ref = f"{repo}:{VERSION}-cpu-runtime"

            def dist_of(dist: Path, payload: str, ref: str = ref) -> str:
                image_id = import_image(dist.parent / "images", ref, payload)  # the engine keeps both by id
                dist.mkdir(parents=True, exist_ok=True)
                write_manifest(dist, [image_record(ref, image_id)])
                return image_id.removeprefix("sha256:")

            racers = _racers(tmp_path / f"r{n}", {"url: 127.0.0.1:5000": f"url: {registry.address}"}, credentials,
                             dist_of)

            def served(repo: str = repo) -> str:
                """The image id (config digest) of what the channel's version tag names."""
                manifest = requests.get(f"http://{registry.address}/v2/{repo}/manifests/{VERSION}-cpu-runtime-nightly",
                                        auth=(registry.user, registry.password), headers={"Accept": MANIFEST_V2},
                                        timeout=30)
                assert manifest.status_code == 200, manifest.text
                return str(manifest.json()["config"]["digest"]).removeprefix("sha256:")

            _race(forks, "images", ref, racers, served)
    finally:
        for repo in repos:
            remove_images(client, repo)
