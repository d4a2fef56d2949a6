"""bench-publish: an unchanged re-publish of 100 artifacts must take at most 2 s, for each kind of
wheel target.

devpi: a devpi server, the static tree and a conda channel are started on 127.0.0.1; 100 wheel
artifacts (50 projects × cpu and cu118, tiny real wheels) are published once to nightly, then
published again unchanged. pypi: a pypiserver (upload API and PEP 503 HTML only) gets 100
artifacts (100 projects' cpu wheels, each under the plain version), published once and again.
Printed side by side: the first publish, the re-publish, and their ratio; the goal is the
re-publish's time.
"""

from __future__ import annotations

import os
import secrets
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from support.publish_servers import publish_site, pypi_server  # noqa: E402
from support.release_copy import point_release_yaml  # noqa: E402
from support.synthetic_release import features, make_wheel, record, write_manifest  # noqa: E402

from shipyard.publish.run import PublishReport, PublishRequest, publish  # noqa: E402
from shipyard.release.validate import load_spec  # noqa: E402

ARTIFACTS = 100
GOAL_SECONDS = 2.0
DEVPI_TARGET = "    kind: devpi\n    url: http://127.0.0.1:8081/\n"


def _dist(dist: Path, variants: tuple[tuple[str, str], ...]) -> None:
    records = []
    for n in range(ARTIFACTS // len(variants)):
        for variant, tag in variants:
            wheel = make_wheel(dist / "whl" / tag / f"proj{n}", f"proj{n}", f"1.7.0+{tag}")
            records.append(record(dist, wheel, component=f"proj{n}", package_type="wheel", variant=variant,
                                  tag=tag, tests=features()))
    write_manifest(dist, records)


def _twice(root: Path, request: PublishRequest) -> tuple[float, float, PublishReport, PublishReport]:
    spec = load_spec(root)
    start = time.perf_counter()
    first = publish(spec, request)
    cold = time.perf_counter() - start
    start = time.perf_counter()
    again = publish(spec, request)
    return cold, time.perf_counter() - start, first, again


def bench_devpi(base: Path) -> tuple[float, float, PublishReport, PublishReport]:
    dist, root = base / "dist", base / "root"
    _dist(dist, (("cpu", "cpu"), ("cuda11", "cu118")))
    with publish_site(base) as site:
        password = site.devpi.add_user("bench")
        site.release_yaml(root)
        os.environ.update({"SHIPYARD_PYPI_USERNAME": "bench", "SHIPYARD_PYPI_PASSWORD": password,
                           "SHIPYARD_CONDA_TOKEN": site.token})
        return _twice(root, PublishRequest(channel="nightly", dist=dist, state=base / "state"))


def bench_pypi(base: Path) -> tuple[float, float, PublishReport, PublishReport]:
    dist, root = base / "dist", base / "root"
    _dist(dist, (("cpu", "cpu"),))
    with pypi_server(base / "pypiserver") as server:
        password = secrets.token_urlsafe(18)
        server.add_user("bench", password)
        point_release_yaml(root, {DEVPI_TARGET: f"    kind: pypi\n    url: {server.url}\n"
                                                f"    index_url: {server.simple}\n    channels: [nightly]\n"})
        os.environ.update({"SHIPYARD_PYPI_USERNAME": "bench", "SHIPYARD_PYPI_PASSWORD": password})
        return _twice(root, PublishRequest(channel="nightly", dist=dist, state=base / "state",
                                           targets=("wheels-staging",)))


def main() -> int:
    rows = []
    for label, bench in (("devpi + static tree", bench_devpi), ("pypi (pypiserver)", bench_pypi)):
        with tempfile.TemporaryDirectory(prefix="bench-publish-") as tmp:
            cold, warm, first, again = bench(Path(tmp))
        rows.append((label, cold, warm, sum(len(t.uploaded) for t in first.targets),
                     sum(len(t.unchanged) for t in again.targets), sum(len(t.uploaded) for t in again.targets)))
    print(f"bench-publish: {ARTIFACTS} artifacts per kind; goal: re-publish <= {GOAL_SECONDS:.1f} s")
    print(f"  {'target kind':22} {'first':>8} {'re-publish':>11} {'ratio':>6}  files")
    for label, cold, warm, uploaded, unchanged, again in rows:
        print(f"  {label:22} {cold:7.2f}s {warm:10.2f}s {cold / warm:5.1f}x  {uploaded} uploaded, then "
              f"{unchanged} already there and {again} uploaded: {'met' if warm <= GOAL_SECONDS else 'NOT met'}")
    return 0 if all(row[2] <= GOAL_SECONDS for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
