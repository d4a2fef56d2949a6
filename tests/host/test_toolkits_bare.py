"""Every Linux CUDA toolkit of the release from a registry, on a machine that has nothing of this one:
`shipyard toolchain install` for each CUDA variant inside a bare `debian:bookworm` container (the
debootstrapped minbase a workflow's job container is here, with only the host's CA bundle and pip
settings: local_ci/act_host.py), shipyard installed from this checkout's wheel.

It needs PyPI and Debian's mirror and takes minutes per toolkit: `nox -s toolkits-bare` runs it, and
`nox -s tests` leaves it out (the bare_toolkits mark). What it prints per toolkit: the proof line,
its identity and components, and its wall time.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from pathlib import Path

import pytest
from support.shipyard_index import build_shipyard

from shipyard.errors import ToolchainMissing
from shipyard.host.toolchains.cuda_recipes import cuda_toolkit_recipe
from shipyard.local_ci import act_images
from shipyard.local_ci.act_host import stage_share
from shipyard.release.validate import load_spec

REPO = Path(__file__).resolve().parents[2]

# What a bare bookworm lacks for `shipyard toolchain install`: a Python for shipyard, and the host
# compilers the recipes name (cuda_toolkits.toml host_cxx); apt-get and dpkg-deb are in minbase.
_SCRIPT = r"""
set -uo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq && apt-get install -y -qq --no-install-recommends python3 python3-venv {compilers} >/dev/null
python3 -m venv /opt/shipyard && /opt/shipyard/bin/pip install -q --disable-pip-version-check /wheel/{wheel}
for variant in {variants}; do
  start=$(date +%s)
  /opt/shipyard/bin/shipyard --root /checkout toolchain install "$variant" > "/out/$variant.log" 2>&1
  echo $? > "/out/$variant.rc"
  echo $(( $(date +%s) - start )) > "/out/$variant.seconds"
  cat "/out/$variant.log"
done
for manifest in /root/.cache/shipyard/toolchains/cuda-*/toolchain.json; do
  cp "$manifest" "/out/$(basename "$(dirname "$manifest")").json"
done
"""


@pytest.mark.bare_toolkits
@pytest.mark.cuda_toolkit
@pytest.mark.timeout(5400)
def test_every_linux_cuda_toolkit_installs_in_a_bare_bookworm(docker_engine: None, tmp_path: Path) -> None:
    release = load_spec(REPO).release
    cuda_variants = {name: v for name, v in release.variants.items() if v.cuda}
    obtainable = [name for name, v in cuda_variants.items() if cuda_toolkit_recipe(v.cuda).from_registry]
    refused = [name for name, v in cuda_variants.items() if name not in obtainable]
    assert {"cuda11", "cuda12", "cuda13"} <= set(obtainable) and "cuda10.2" in refused
    compilers = sorted({cuda_toolkit_recipe(cuda_variants[n].cuda).host_cxx for n in obtainable})

    share = stage_share(tmp_path / "host")
    image = act_images.job_image("debian:bookworm", share, progress=print)
    assert image.available, image.origin
    wheel = build_shipyard(REPO, tmp_path / "wheel")
    out = tmp_path / "out"
    out.mkdir()
    script = _SCRIPT.format(compilers=" ".join(compilers), wheel=wheel.name,
                            variants=" ".join(obtainable + refused))
    start = time.monotonic()
    # The checkout read-only, for release.yaml (its variants and archs); nothing of this host's
    # toolchain cache, Pythons or apt state goes in.
    done = subprocess.run(
        ["docker", "run", "--rm", *(f"--env={k}={v}" for k, v in share.env.items()),
         "-v", f"{REPO}:/checkout:ro", "-v", f"{wheel.parent}:/wheel:ro", "-v", f"{out}:/out",
         image.name, "bash", "-c", script], check=False, timeout=5000)
    wall = time.monotonic() - start
    print(f"\nbare debian:bookworm: {wall:.0f} s in all (docker run {shlex.quote(image.name)}, exit {done.returncode})")

    for name in obtainable:
        version = cuda_variants[name].cuda
        log = (out / f"{name}.log").read_text()
        rc = int((out / f"{name}.rc").read_text())
        ready = [line for line in log.splitlines() if line.startswith("ready:")]
        assert rc == 0 and ready, f"{name}: exit {rc}\n{log[-4000:]}"
        manifest = json.loads((out / f"cuda-{version}.json").read_text())
        wanted = {a.removesuffix("+PTX") for a in cuda_variants[name].archs}
        assert manifest["verified_archs"] == sorted(wanted, key=_arch_key)
        assert not [c for c in manifest["components"] if c.startswith("home:")], manifest["components"]
        print(f"{name}: {ready[0]}")
        print(f"  identity {manifest['identity']}; {int((out / f'{name}.seconds').read_text())} s wall "
              f"(install {manifest.get('install_seconds')} s, {manifest.get('download_bytes', 0) / 1e6:.0f} MB)")
        print(f"  components: {', '.join(manifest['components'])}")
    for name in refused:
        version = cuda_variants[name].cuda
        log = (out / f"{name}.log").read_text()
        rc = int((out / f"{name}.rc").read_text())
        reason = cuda_toolkit_recipe(version).unobtainable
        assert rc == ToolchainMissing.exit_code, f"{name}: exit {rc}\n{log[-4000:]}"
        assert f"no CUDA {version} toolkit here" in log and "cannot be obtained on this machine" in log, log
        assert reason and reason in " ".join(log.split()), log
        print(f"{name}: refused, exit {rc}: {' '.join(log.split())[:300]}")


def _arch_key(arch: str) -> tuple[int, int]:
    major, minor = arch.split(".")
    return int(major), int(minor)
