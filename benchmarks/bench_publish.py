"""bench-publish: an unchanged re-publish of 100 artifacts must take at most 1 s, for each target kind.

One row per kind of release.yaml's publish targets, each published alone (`--target`), against real
servers on 127.0.0.1 (tests/support/publish_servers.py): a devpi server, the static tree behind a
plain web server, a pypiserver (upload API and PEP 503 HTML only), the conda channel behind
shipyard's channel server (token in the path), and Debian's docker-registry (htpasswd auth) with
images from a docker engine (the running one, else a dockerd started here and stopped at the end,
as the suite's docker_engine fixture does). Each row's 100 artifacts go to nightly once, then again
unchanged:

- devpi and static tree: 100 tiny real wheels, 50 projects × cpu and cu118 (devpi also gets the
  cpu ones under the plain version, its PyPI flavour: 150 files);
- pypi: 100 projects' cpu wheels, each under the plain version;
- conda channel: 100 .conda packages, the suite's fixture recipe built by rattler-build once per
  variant tag (100 tags; about 0.05 s each, so no scaling down);
- docker registry: 100 image tags of 4 tiny images (`docker import` of one file each, then
  `docker tag`): the first publish pushes 4 images' blobs, the re-publish is what is timed;
- s3, both layouts: the static tree's 100 wheels and the conda channel's 100 packages in a bucket
  of moto's S3 server (a stand-in for an S3-compatible store: no real store is reachable here).

Printed side by side: the first publish, the re-publish, their ratio and the files, and whether the
re-publish met the goal. Exit status 0 only when every row met it.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import secrets
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from support.docker_daemon import ensure_engine, stop_started_engine  # noqa: E402
from support.publish_servers import docker_registry, publish_site, pypi_server  # noqa: E402
from support.s3_standin import s3_standin  # noqa: E402
from support.synthetic_release import (  # noqa: E402
    build_conda_packages,
    features,
    image_record,
    import_image,
    make_wheel,
    record,
    remove_images,
    write_manifest,
)

from shipyard.publish.run import PublishReport, PublishRequest, publish  # noqa: E402
from shipyard.record.manifest import ArtifactRecord  # noqa: E402
from shipyard.release.validate import load_spec  # noqa: E402

ARTIFACTS = 100
GOAL_SECONDS = 1.0
IMAGES = 4  # distinct tiny images behind the 100 tags
PYPI_ENV = ("SHIPYARD_BENCH_PYPI_USERNAME", "SHIPYARD_BENCH_PYPI_PASSWORD")
IMAGES_TARGET = "  images:\n    kind: docker\n"


@dataclass(frozen=True)
class Row:
    label: str
    target: str  # release.yaml's publish target, published alone
    dist: Callable[[Path], None]  # writes dist/ (its files and manifest.json)


@dataclass(frozen=True)
class Figures:
    cold: float
    warm: float
    first: PublishReport
    again: PublishReport


def _wheels(dist: Path, projects: int, variants: tuple[tuple[str, str], ...], prefix: str) -> None:
    records = []
    for n in range(projects):
        for variant, tag in variants:
            wheel = make_wheel(dist / "whl" / tag / f"{prefix}{n}", f"{prefix}{n}", f"1.7.0+{tag}")
            records.append(record(dist, wheel, component=f"{prefix}{n}", package_type="wheel", variant=variant,
                                  tag=tag, tests=features()))
    write_manifest(dist, records)


def wheel_dist(dist: Path) -> None:
    _wheels(dist, ARTIFACTS // 2, (("cpu", "cpu"), ("cuda11", "cu118")), "proj")


def pypi_dist(dist: Path) -> None:
    _wheels(dist, ARTIFACTS, (("cpu", "cpu"),), "plain")


def conda_dist(dist: Path) -> None:
    # One recipe, one variant tag per package: 100 names (build strings) of one tiny noarch package.
    tags = [f"b{n}" for n in range(ARTIFACTS)]
    (dist / "conda").mkdir(parents=True, exist_ok=True)
    packages = build_conda_packages(dist / "conda", tags)
    write_manifest(dist, [record(dist, p, component="ember", package_type="conda", variant="cpu", tag="cpu",
                                 tests=features()) for p in packages])


def image_dist(repo: str, scratch: Path) -> Callable[[Path], None]:
    def write(dist: Path) -> None:
        import docker

        client = docker.from_env(timeout=300)
        ids = [import_image(scratch, f"{repo}:base{i}", f"bench {i}") for i in range(IMAGES)]
        records: list[ArtifactRecord] = []
        for n in range(ARTIFACTS):
            ref = f"{repo}:1.7.0-k{n}-runtime"  # kind k<n>-runtime: 100 moving tags too
            image_id = ids[n % IMAGES]
            client.images.get(image_id).tag(repo, f"1.7.0-k{n}-runtime")
            records.append(image_record(ref, image_id))
        dist.mkdir(parents=True, exist_ok=True)
        write_manifest(dist, records)

    return write


def _twice(root: Path, request: PublishRequest, profile: Path | None) -> Figures:
    """Published, then again unchanged (timed); with `profile`, a third, untimed, unchanged publish
    under cProfile writes `<profile>/<target>.prof` (python -m pstats reads it)."""
    spec = load_spec(root)
    start = time.perf_counter()
    first = publish(spec, request)
    cold = time.perf_counter() - start
    start = time.perf_counter()
    again = publish(spec, request)
    warm = time.perf_counter() - start
    if profile is not None:
        profile.mkdir(parents=True, exist_ok=True)
        profiler = cProfile.Profile()
        profiler.runcall(publish, spec, request)
        profiler.dump_stats(profile / f"{request.targets[0]}.prof")
    return Figures(cold, warm, first, again)


def run_rows(base: Path, profile: Path | None) -> list[tuple[str, Figures | str]]:
    """Every row against one set of servers; a row that fails says why and the others still run."""
    repo = f"shipyard-bench-{uuid.uuid4().hex[:8]}"
    out: list[tuple[str, Figures | str]] = []
    with ExitStack() as stack:
        ensure_engine(base)
        stack.callback(stop_started_engine, base)  # only a dockerd this run started
        import docker

        stack.callback(lambda: remove_images(docker.from_env(timeout=300), repo))
        site = stack.enter_context(publish_site(base))
        pypi = stack.enter_context(pypi_server(base / "pypiserver"))
        registry = stack.enter_context(docker_registry(base / "registry"))
        bucket = stack.enter_context(s3_standin())
        devpi_password = site.devpi.add_user("bench")
        pypi_password = secrets.token_urlsafe(18)
        pypi.add_user("bench", pypi_password)
        root = base / "root"
        site.release_yaml(root, registry=registry.address)
        release_yaml = root / "release.yaml"
        text = release_yaml.read_text()
        assert IMAGES_TARGET in text, "release.yaml no longer has the images target"
        release_yaml.write_text(text.replace(IMAGES_TARGET, (
            f"  pypi-index:\n    kind: pypi\n    url: {pypi.url}\n    index_url: {pypi.simple}\n"
            f"    username_env: {PYPI_ENV[0]}\n    password_env: {PYPI_ENV[1]}\n"
            f"    default_variant: cpu\n    channels: [nightly]\n"
            f"  bucket-tree:\n{bucket.target('bench/whl/')}"
            f"  bucket-conda:\n{bucket.target('bench/conda/', layout='conda')}"
            f"{IMAGES_TARGET}"), 1))
        os.environ.update({"SHIPYARD_PYPI_USERNAME": "bench", "SHIPYARD_PYPI_PASSWORD": devpi_password,
                           "SHIPYARD_CONDA_TOKEN": site.token, PYPI_ENV[0]: "bench", PYPI_ENV[1]: pypi_password,
                           "SHIPYARD_REGISTRY_USERNAME": registry.user,
                           "SHIPYARD_REGISTRY_PASSWORD": registry.password, **bucket.credentials()})
        rows = (Row("devpi", "pypi", wheel_dist), Row("static tree", "wheels-tree", wheel_dist),
                Row("pypi (pypiserver)", "pypi-index", pypi_dist), Row("conda channel", "conda-channel", conda_dist),
                Row("docker registry", "images", image_dist(repo, base / "images")),
                Row("s3 wheel tree (moto)", "bucket-tree", wheel_dist),
                Row("s3 conda channel (moto)", "bucket-conda", conda_dist))
        for row in rows:
            folder = base / row.target
            try:
                row.dist(folder / "dist")
                out.append((row.label, _twice(root, PublishRequest(channel="nightly", dist=folder / "dist",
                                                                   state=folder / "state", targets=(row.target,)),
                                            profile)))
            except Exception as exc:  # the row's failure is its figure; the other kinds still run
                traceback.print_exc()
                out.append((row.label, f"failed: {type(exc).__name__}: {exc}"))
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="also profile one more unchanged re-publish per kind, into DIR/<target>.prof")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-publish-") as tmp:
        rows = run_rows(Path(tmp), args.profile and args.profile.resolve())
    print(f"bench-publish: {ARTIFACTS} artifacts per kind, each kind published alone; "
          f"goal: an unchanged re-publish <= {GOAL_SECONDS:.1f} s")
    width = max(len("target kind"), *(len(label) for label, _ in rows))
    print(f"  {'target kind':{width}} {'first':>8} {'re-publish':>11} {'ratio':>6}  files")
    met = []
    for label, figures in rows:
        if isinstance(figures, str):
            met.append(False)
            print(f"  {label:{width}} {figures}: NOT met")
            continue
        uploaded = sum(len(t.uploaded) for t in figures.first.targets)
        unchanged = sum(len(t.unchanged) for t in figures.again.targets)
        again = sum(len(t.uploaded) for t in figures.again.targets)
        ok = figures.warm <= GOAL_SECONDS and again == 0
        met.append(ok)
        print(f"  {label:{width}} {figures.cold:7.2f}s {figures.warm:10.2f}s {figures.cold / figures.warm:5.1f}x  "
              f"{uploaded} uploaded, then {unchanged} already there and {again} uploaded: "
              f"{'met' if ok else 'NOT met'}")
    # The figures are wall times on a machine that may be shared: its load says how far to trust them.
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"bench-publish: {sum(met)} of {len(met)} kinds met the goal ({os.cpu_count()} cores, load average "
          f"{load} over 1, 5, 15 min at the end)")
    return 0 if all(met) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
