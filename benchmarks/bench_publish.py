"""bench-publish: an unchanged re-publish of 100 artifacts must take at most 2 s.

A devpi server, the static tree and a conda channel are started on 127.0.0.1; 100 wheel artifacts
(50 projects × cpu and cu118, tiny real wheels) are published once to nightly, then published
again unchanged. Printed side by side: the first publish, the re-publish, and their ratio; the
goal is the re-publish's time.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from publish_servers import publish_site  # noqa: E402
from synthetic_release import features, make_wheel, record, write_manifest  # noqa: E402

from shipyard.publish.run import PublishRequest, publish  # noqa: E402
from shipyard.release.validate import load_spec  # noqa: E402

ARTIFACTS = 100
GOAL_SECONDS = 2.0


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-publish-") as tmp:
        base = Path(tmp)
        dist, root = base / "dist", base / "root"
        records = []
        for n in range(ARTIFACTS // 2):
            for variant, tag in (("cpu", "cpu"), ("cuda11", "cu118")):
                wheel = make_wheel(dist / "whl" / tag / f"proj{n}", f"proj{n}", f"1.7.0+{tag}")
                records.append(record(dist, wheel, component=f"proj{n}", package_type="wheel", variant=variant,
                                      tag=tag, tests=features()))
        write_manifest(dist, records)
        with publish_site(base) as site:
            password = site.devpi.add_user("bench")
            site.release_yaml(root)
            os.environ.update({"SHIPYARD_PYPI_USERNAME": "bench", "SHIPYARD_PYPI_PASSWORD": password,
                               "SHIPYARD_CONDA_TOKEN": site.token})
            spec = load_spec(root)
            request = PublishRequest(channel="nightly", dist=dist, state=base / "state")
            start = time.perf_counter()
            first = publish(spec, request)
            cold = time.perf_counter() - start
            start = time.perf_counter()
            again = publish(spec, request)
            warm = time.perf_counter() - start
    uploaded = sum(len(t.uploaded) for t in first.targets)
    unchanged = sum(len(t.unchanged) for t in again.targets)
    print(f"bench-publish: {ARTIFACTS} artifacts ({uploaded} files over devpi and the static tree)")
    print(f"  first publish       {cold:7.2f} s")
    print(f"  unchanged re-publish {warm:6.2f} s  ({unchanged} files already there, "
          f"{sum(len(t.uploaded) for t in again.targets)} uploaded)")
    print(f"  ratio first / re-publish: {cold / warm:.1f}x; goal: re-publish <= {GOAL_SECONDS:.1f} s: "
          f"{'met' if warm <= GOAL_SECONDS else 'NOT met'}")
    return 0 if warm <= GOAL_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
