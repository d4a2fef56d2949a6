"""The ready-to-train images: built from the release's wheels, training in one container and
across two, surviving (or cleanly failing) a killed peer, labelled, within budget, clean, and
pushed to a real registry.

The images come from conftest's `ember_images` (tests/support/ember_images.py): each is built once per
session, from wheels out of shipyard's build cache, and the end-to-end publish
(test_publish_release.py) publishes the same CPU runtime image; `nox -s docker-<variant>` points
them at the tested wheels of dist/ and at one variant (--image-variant). A second build must
change nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import secrets
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from support.ember_images import EmberImages
from support.wheel_edit import append_to_wheel_member

from shipyard.errors import CheckFailed
from shipyard.host.source_tree import git_info
from shipyard.image.build import ImageRequest, build_images
from shipyard.image.deps import ensure_wheelhouse
from shipyard.image.hygiene import scan_image
from shipyard.image.plan import feature_ids, rfc3339
from shipyard.plumbing import command
from shipyard.plumbing.hashing import sha256_of
from shipyard.record.manifest import ArtifactRecord, merge_artifacts, read_manifest
from shipyard.release.cuda_archs import ptx_arch, sm_name
from shipyard.release.spec import Spec
from shipyard.release.validate import load_spec
from shipyard.testing.container import run_tests_in_container
from shipyard.testing.runner import component_test_requirements
from shipyard.testing.verdict import feature_gate
from shipyard.wheel.index import write_index

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = "/opt/ember/examples/train_sgd.py"
RUN_TIMEOUT = 180  # no container may run longer than this; every wait below is bounded


# --- session fixtures --------------------------------------------------------------------------

@pytest.fixture(scope="session")
def spec() -> Spec:
    return load_spec(REPO)


def _variants(config: pytest.Config) -> tuple[str, str]:
    """(the variant whose images every test uses, the CUDA variant of the CUDA checks)."""
    chosen = config.getoption("--image-variant")
    if chosen:
        return chosen, chosen
    return "cpu", "cuda11"


@pytest.fixture(scope="session")
def client(docker_engine: None) -> docker.DockerClient:
    return docker.from_env(timeout=600)


def _run(image: str, *args: str, timeout: float = RUN_TIMEOUT) -> command.Completed:
    return command.run(["docker", "run", "--rm", image, *args], timeout=timeout, check=False)


# --- training --------------------------------------------------------------------------------

def _losses(output: str) -> tuple[float, float]:
    found = re.search(r"initial loss=([0-9.e+-]+) final loss=([0-9.e+-]+)", output)
    assert found, output
    return float(found.group(1)), float(found.group(2))


def test_standalone_two_process_training_loss_falls(ember_images: EmberImages, request: pytest.FixtureRequest) -> None:
    variant, _ = _variants(request.config)
    image = ember_images.get(variant).plan.tag
    done = _run(image, "ember-run", "--standalone", "--nproc-per-node", "2", EXAMPLE)
    assert done.returncode == 0, done.output
    first, last = _losses(done.output)
    assert last < first / 100, done.output
    assert "world_size=2" in done.output and "all workers succeeded" in done.output


def test_embers_own_tests_pass_inside_the_runtime_image(ember_images: EmberImages, spec: Spec,
                                                       request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """ember's own suite, run as the image's user against the ember the image holds, judged by the
    feature gate as in a venv: the image carries what the wheels were tested with."""
    variant, _ = _variants(request.config)
    image = ember_images.get(variant).plan.tag
    settings = spec.release.images
    assert settings is not None
    tests_dir = REPO / "library" / "ember" / "tests"
    requirements = component_test_requirements(tests_dir)
    platform_tag = spec.release.platforms[settings.platform].wheel_platform_tag
    house = ensure_wheelhouse(requirements, settings.python, platform_tag)
    # A copy the image's user may read (shipyard's cache lies under root's home).
    wheelhouse = shutil.copytree(house.path, tmp_path / "wheelhouse")
    for path in (wheelhouse, *wheelhouse.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    # The tests' own requirements (pytest, hypothesis) go into a venv beside the image's Python, which
    # sees the image's site-packages: ember is the image's, never installed again.
    setup = ("python3 -m venv --system-site-packages /tmp/tests-venv\n"
             "/tmp/tests-venv/bin/pip install --quiet --no-cache-dir --disable-pip-version-check --no-index "
             f"--find-links /wheelhouse {' '.join(repr(r) for r in requirements)}\n")
    judged = run_tests_in_container(image, setup=setup, python="/tmp/tests-venv/bin/python", tests_dir=tests_dir,
                                    gate=feature_gate(spec, "ember", settings.platform, tests_dir, REPO),
                                    work=tmp_path / "ember", volumes=(f"{wheelhouse}:/wheelhouse:ro",),
                                    other_features=sorted(f.id for f in spec.features.features
                                                          if f.component != "ember"))
    print(judged.log_tail)
    assert judged.problems == (), judged.log_tail
    proven = {f.id for f in judged.features if f.result in ("passed", "partial")}
    assert proven >= {"ember.fft", "distributed.collectives"}, proven


@pytest.fixture
def network(client: docker.DockerClient) -> Iterator[str]:
    """A user-defined bridge network (containers resolve each other by name), removed after."""
    name = f"shipyard-test-{uuid.uuid4().hex[:8]}"
    net = client.networks.create(name, driver="bridge")
    try:
        yield name
    finally:
        for container in client.containers.list(all=True, filters={"network": name}):
            container.remove(force=True)
        net.remove()


@pytest.fixture
def job_token(tmp_path: Path) -> Path:
    """The job's secret in a folder of its own, bind-mounted read-only into every node: the
    token reaches ember-run through --rdzv-token-file, never through argv or the image."""
    folder = tmp_path / "job-secret"
    folder.mkdir(mode=0o755)
    token = folder / "token"
    token.write_text(secrets.token_hex(32) + "\n")
    token.chmod(0o444)  # the image's user is not root
    return folder


TOKEN_MOUNT = "/run/secrets/ember"


def _node(client: docker.DockerClient, image: str, network: str, name: str, rdzv_host: str, token: Path,
          *extra: str, steps: int = 200, collective_timeout: int = 60) -> docker.models.containers.Container:
    # --rdzv-bind names the endpoint's host: its own node listens on that address only, and
    # every other node (where the name is not a local address) connects instead.
    return client.containers.run(
        image, ["ember-run", "--nnodes", "2", "--nproc-per-node", "2", "--rdzv-endpoint", f"{rdzv_host}:29400",
                "--rdzv-bind", rdzv_host, "--rdzv-token-file", f"{TOKEN_MOUNT}/token",
                "--rdzv-id", "two-containers", *extra, EXAMPLE, "--steps", str(steps),
                "--timeout", str(collective_timeout)],
        name=name, hostname=name, network=network, detach=True,
        volumes={str(token): {"bind": TOKEN_MOUNT, "mode": "ro"}})


def _wait(container, timeout: float) -> int:  # noqa: ANN001
    return int(container.wait(timeout=timeout)["StatusCode"])


def test_two_containers_form_one_two_node_job(ember_images: EmberImages, client: docker.DockerClient, network: str,
                                              job_token: Path, request: pytest.FixtureRequest) -> None:
    variant, _ = _variants(request.config)
    image = ember_images.get(variant).plan.tag
    host = f"{network}-node0"
    nodes = [_node(client, image, network, host, host, job_token, "--rdzv-timeout", "60"),
             _node(client, image, network, f"{network}-node1", host, job_token, "--rdzv-timeout", "60")]
    codes = [_wait(n, RUN_TIMEOUT) for n in nodes]
    logs = [n.logs().decode() for n in nodes]
    print("\n".join(logs))
    assert codes == [0, 0], logs
    token = (job_token / "token").read_text().strip()
    for node in nodes:  # the secret is in no log and in no container's command line
        node.reload()
        assert token not in " ".join(node.attrs["Args"]) and token not in node.logs().decode()
    rounds = sorted(re.search(r"round \d+: node (\d)/2, ranks (\d)\.\.(\d) of 4", log).groups() for log in logs)
    assert rounds == [("0", "0", "1"), ("1", "2", "3")], logs  # both nodes' ranks, one job of four
    trained = [log for log in logs if "world_size=4" in log]
    assert len(trained) == 1, logs  # global rank 0 reports, once, for the whole job
    first, last = _losses(trained[0])
    assert last < first / 100


def test_killed_container_makes_its_peer_exit_with_a_clear_error(ember_images: EmberImages, client: docker.DockerClient,
                                                                 network: str, job_token: Path,
                                                                 request: pytest.FixtureRequest) -> None:
    """ember-run's policy (library/emberelastic/README.md): a node that leaves makes its peers'
    collectives fail, the group restarts with the remaining nodes as long as MIN remain; with
    --nnodes 2 none can, so the survivor's rendezvous times out and it exits 1 saying so. A killed
    container sends nothing, so its peers' workers learn of it from their collective timeout."""
    variant, _ = _variants(request.config)
    image = ember_images.get(variant).plan.tag
    host = f"{network}-node0"
    timeout, collective = 20, 15
    survivor = _node(client, image, network, host, host, job_token, "--rdzv-timeout", str(timeout),
                     steps=10**8, collective_timeout=collective)
    victim = _node(client, image, network, f"{network}-node1", host, job_token, "--rdzv-timeout", str(timeout),
                   steps=10**8, collective_timeout=collective)
    deadline = time.monotonic() + 90
    while not all(b"round 0:" in n.logs() for n in (survivor, victim)):
        assert time.monotonic() < deadline, [n.logs().decode() for n in (survivor, victim)]
        time.sleep(0.5)
    time.sleep(5)  # mid-run: the workers are up
    victim.kill()
    start = time.monotonic()
    code = _wait(survivor, collective + timeout + 60)  # raises (a failure, not a hang) if still running
    waited = time.monotonic() - start
    log = survivor.logs().decode()
    print(log)
    assert code == 1, log
    # Whether the new round had opened when its time ran out decides which of the two it says.
    assert re.search(r"rendezvous failed: rendezvous (did not complete within 20 s \(needs at least 2 nodes\)"
                     r"|round \d+ timed out with too few nodes)", log), log
    assert "restarting the group (1/3)" in log, log  # the failure was seen and counted before the new round
    assert waited < collective + timeout + 30, waited


# --- the CUDA image --------------------------------------------------------------------------

@pytest.mark.cuda_image
def test_cuda_image_falls_back_to_cpu_and_resolves_its_cuda_libraries(ember_images: EmberImages,
                                                                      request: pytest.FixtureRequest) -> None:
    _, cuda_variant = _variants(request.config)
    plan = ember_images.get(cuda_variant).plan
    assert plan.variant.cuda, f"--image-variant {cuda_variant} is not a CUDA variant"
    code = ("import ember, numpy as np; c = ember.cuda; "
            "print('compiled', c.compiled_with_cuda(), 'available', c.is_available(), 'archs', len(c.arch_list())); "
            "print('reason', ember._C.cuda_unavailable_reason()); "
            "a = np.arange(8, dtype=np.float32); print('cpu-sum', float(ember.fft.irfft(ember.fft.rfft(a), 8).sum()))")
    done = _run(plan.tag, "python", "-c", code)
    assert done.returncode == 0, done.output
    assert f"compiled True available False archs {len(plan.variant.archs)}" in done.stdout, done.stdout
    assert re.search(r"reason \S+", done.stdout), done.stdout
    assert "cpu-sum 28.0" in done.stdout, done.stdout  # the CPU path computes
    script = ("d=$(python -c 'import ember, os; print(os.path.dirname(os.path.dirname(ember.__file__)))'); "
              "for f in $(find $d/ember $d/ember.libs -name '*.so*'); do echo \"== $f\"; ldd $f; done")
    ldd = _run(plan.tag, "sh", "-c", script)
    assert ldd.returncode == 0, ldd.output
    assert "not found" not in ldd.stdout, ldd.stdout
    cuda_libs = set(re.findall(r"^\s+(libcu\S+) => (\S+)", ldd.stdout, re.MULTILINE))
    assert any(name.startswith("libcudart") for name, _ in cuda_libs), ldd.stdout
    assert all(path.startswith("/opt/python/") for _, path in cuda_libs), cuda_libs
    # NVIDIA's runtime wheel is installed too, for anything that loads libcudart by its soname.
    wheel = _run(plan.tag, "sh", "-c", "ls /opt/python/lib/python3*/site-packages/nvidia/cuda_runtime/lib/")
    assert f"libcudart.so.{plan.variant.cuda.split('.')[0]}" in wheel.stdout, wheel.output
    # Its labels say what its kernels run on: the SASS and PTX its wheels' binaries carry, as their
    # arch check read them (docker inspect), the same fact the manifest records for the image.
    inspected = json.loads(command.run(["docker", "image", "inspect", plan.tag]).stdout)[0]["Config"]["Labels"]
    sass = sorted((sm_name(a) for a in plan.variant.archs), key=lambda n: int(n[3:]))
    ptx = sm_name(ptx_arch(plan.variant.archs)).replace("sm_", "compute_")
    assert (inspected["org.shipyard.image.cuda-sass"], inspected["org.shipyard.image.cuda-ptx"]) == (
        ",".join(sass), ptx), inspected
    manifest = read_manifest(ember_images.dists(cuda_variant) / "manifest.json")
    assert manifest is not None
    record = manifest.by_cell()[f"ember-{plan.variant.tag}-linux-x86_64-runtime-docker"]
    assert record.cuda_archs is not None and record.cuda_archs.to_json() == {"sass": sass, "ptx": [ptx]}


# --- labels, tags, user, budget, hygiene -------------------------------------------------------

def test_labels_tags_and_user(ember_images: EmberImages, client: docker.DockerClient, spec: Spec,
                              request: pytest.FixtureRequest) -> None:
    variant, _ = _variants(request.config)
    result = ember_images.get(variant)
    plan = result.plan
    flavour = f"cuda{plan.variant.cuda}" if plan.variant.cuda else "cpu"
    assert plan.tags == (f"ember:1.7.0-{flavour}-runtime", f"ember:nightly-{flavour}-runtime")
    image = client.images.get(plan.tag)
    assert set(plan.tags) <= set(image.tags)  # both tags name the one image
    labels = image.labels
    git = git_info(REPO)
    oci = "org.opencontainers.image"
    assert labels[f"{oci}.version"] == "1.7.0"
    assert labels[f"{oci}.revision"] == git.sha
    assert labels[f"{oci}.created"] == rfc3339(git.commit_time)
    assert labels[f"{oci}.licenses"] == "BSD-3-Clause"
    assert labels[f"{oci}.source"].startswith("https://")
    assert labels[f"{oci}.title"] == f"ember {flavour} runtime"
    assert labels["org.shipyard.image.variant"] == plan.variant.name
    assert labels["org.shipyard.image.cuda-version"] == (plan.variant.cuda or "none")
    if not plan.variant.cuda:  # no kernels, nothing to say about GPU archs
        assert "org.shipyard.image.cuda-sass" not in labels and "org.shipyard.image.cuda-ptx" not in labels
    expected = feature_ids(spec, spec.release.images.components, "linux-x86_64")  # type: ignore[union-attr]
    for status in ("stable", "beta", "prototype"):
        assert labels[f"org.shipyard.image.features.{status}"] == ",".join(expected[status])
    assert "elastic.launcher" in labels["org.shipyard.image.features.stable"].split(",")
    assert image.attrs["Config"]["User"] == "ember"
    who = _run(plan.tag, "sh", "-c", "id -u; id -un; command -v ember-run; ls /opt/ember/examples")
    assert who.stdout.split() == ["1000", "ember", "/opt/python/bin/ember-run", "train_sgd.py"], who.output
    # The manifest records the image for publish.
    manifest = read_manifest(ember_images.dists(variant) / "manifest.json")
    assert manifest is not None
    record = manifest.by_cell()[f"ember-{plan.variant.tag}-linux-x86_64-runtime-docker"]
    assert record.sha256 == result.image_id.removeprefix("sha256:") and record.build["tags"] == list(plan.tags)
    # Its SBOM is attached beside it, and the image's label names that document's sha256.
    sbom = ember_images.dists(variant) / record.build["sbom"]
    assert labels["org.shipyard.image.sbom.sha256"] == hashlib.sha256(sbom.read_bytes()).hexdigest()
    bom = json.loads(sbom.read_text())
    wheels = {p["value"] for c in bom["components"] for p in c.get("properties", []) if p["name"] == "shipyard:file"}
    assert {w.split("-")[0] for w in wheels} == set(spec.release.images.components), wheels  # type: ignore[union-attr]
    assert any(c["type"] == "container" for c in bom["components"])


def test_unchanged_rerun_is_a_no_op(ember_images: EmberImages, request: pytest.FixtureRequest) -> None:
    variant, _ = _variants(request.config)
    first = ember_images.get(variant)
    start = time.monotonic()
    (again,) = build_images(ember_images.spec, ember_images.request(variant, ("runtime",)))
    seconds = time.monotonic() - start
    assert again.cached and again.image_id == first.image_id
    assert seconds < 5, f"an unchanged re-run took {seconds:.1f} s of shipyard's own time"


def test_size_budget_is_enforced(ember_images: EmberImages, request: pytest.FixtureRequest) -> None:
    variant, _ = _variants(request.config)
    built = ember_images.get(variant)
    settings = ember_images.spec.release.images
    assert settings is not None
    assert built.size_mb <= built.plan.budget_mb
    tight = settings.variants[variant].model_copy(update={"runtime_budget_mb": 1.0})
    release = ember_images.spec.release.model_copy(
        update={"images": settings.model_copy(update={"variants": {**settings.variants, variant: tight}})})
    small = dataclasses.replace(ember_images.spec, release=release)
    with pytest.raises(CheckFailed) as caught:
        build_images(small, ember_images.request(variant, ("runtime",)))
    message = str(caught.value)
    assert f"{built.plan.tag} is {built.size_mb:.0f} MB, over its budget of 1 MB" in message, message
    assert f"images.variants.{variant}.runtime_budget_mb" in message, message


def test_images_hold_no_pip_cache_apt_list_or_secret(ember_images: EmberImages, client: docker.DockerClient,
                                                     request: pytest.FixtureRequest) -> None:
    variant, _ = _variants(request.config)
    assert scan_image(ember_images.get(variant).plan.tag, client=client) == []
    # The scanner finds what a careless build leaves: a pip cache, an apt list, a build argument.
    token = secrets.token_hex(16)
    tag = f"shipyard-leaky:{uuid.uuid4().hex[:8]}"
    base = ember_images.get(variant).labels["org.shipyard.image.base"].split(": ", 1)[1]
    dockerfile = (f"FROM {base}\nARG TOKEN\nRUN mkdir -p /root/.cache/pip/http /var/lib/apt/lists "
                  "&& echo cached > /root/.cache/pip/http/entry && echo list > /var/lib/apt/lists/deb_Packages "
                  "&& echo \"$TOKEN\" > /etc/leaked\n")
    context = request.getfixturevalue("tmp_path")
    (context / "Dockerfile").write_text(dockerfile)
    client.images.build(path=str(context), tag=tag, buildargs={"TOKEN": token}, rm=True)
    try:
        found = {str(f).split(" in ")[0] + " in " + str(f).split(" in ")[1].split()[0] for f in
                 scan_image(tag, [token], client=client)}
        kinds = {f.split(" in ")[0] for f in found}
        assert kinds == {"a pip cache", "an apt list", "secret #1"}, found
        assert any(f.endswith("history") for f in found) and any(" layer" in f for f in found), found
    finally:
        client.images.remove(tag, force=True)


def test_one_changed_wheel_keeps_base_and_dependency_layers(ember_images: EmberImages, client: docker.DockerClient,
                                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            request: pytest.FixtureRequest) -> None:
    """A changed emberaudio wheel: only the layer holding the release's installed wheels changes.
    Planted on the way: a credential in the environment (the release's registry password
    variable) and a secret file in the wheel index; neither may reach the image."""
    variant, _ = _variants(request.config)
    before = ember_images.get(variant)
    source = ember_images.dists(variant)
    dist = tmp_path / "dist"
    shutil.copytree(source / "whl", dist / "whl")
    shutil.copy(source / "manifest.json", dist / "manifest.json")
    tag = before.plan.variant.tag
    wheel = next((dist / "whl" / tag / "emberaudio").glob("*.whl"))
    append_to_wheel_member(wheel, "emberaudio/__init__.py", b"\n# changed for the layer-reuse test\n")
    write_index(dist / "whl" / tag)
    manifest = read_manifest(dist / "manifest.json")
    assert manifest is not None
    old = next(a for a in manifest.artifacts if a.component == "emberaudio" and a.package_type == "wheel")
    merge_artifacts(dist / "manifest.json", release=manifest.release, version=manifest.version,
                    records=[ArtifactRecord(**{**old.model_dump(), "sha256": sha256_of(wheel),
                                               "size": wheel.stat().st_size})])
    planted = f"planted-{secrets.token_hex(12)}"
    (dist / "whl" / tag / "emberaudio" / ".netrc").write_text(f"machine example.org password {planted}\n")
    monkeypatch.setenv("SHIPYARD_REGISTRY_PASSWORD", planted)
    settings = ember_images.spec.release.images
    assert settings is not None
    other = dataclasses.replace(ember_images.spec, release=ember_images.spec.release.model_copy(
        update={"images": settings.model_copy(update={"repository": "ember-layer-test"})}))
    start = time.monotonic()
    (after,) = build_images(other, ImageRequest(variant=variant, dist=dist, targets=("runtime",),
                                                allow_untested=True))
    print(f"\nrebuild after one changed wheel: {time.monotonic() - start:.1f} s")
    try:
        assert not after.cached
        old_layers = client.images.get(before.plan.tag).attrs["RootFS"]["Layers"]
        new_layers = client.images.get(after.plan.tag).attrs["RootFS"]["Layers"]
        assert len(old_layers) == len(new_layers)
        changed = [i for i, (a, b) in enumerate(zip(old_layers, new_layers, strict=True)) if a != b]
        # Everything below the release's wheels (base, Python, dependencies) keeps its digest; the
        # wheels' layer changed, and only the scripts' layer is above it.
        assert changed and changed[0] == len(new_layers) - 2, (changed, len(new_layers))
        # The COPY steps, newest first: scripts, the installed wheels, the dependencies, the Python.
        copies = [[h["CreatedBy"] for h in client.images.get(ref).history() if "COPY" in h["CreatedBy"]]
                  for ref in (before.plan.tag, after.plan.tag)]
        assert [c.endswith(("/opt/ember/examples/ ", "/opt/python/ ")) for c in copies[1][:4]] == [True] * 4, copies
        assert copies[0][1] != copies[1][1]  # the wheels' content hash changed…
        assert copies[0][2:] == copies[1][2:]  # …the dependencies' and the Python's did not
        assert scan_image(after.plan.tag, [planted], client=client) == []
        shown = _run(after.plan.tag, "sh", "-c",
                     "tail -c 40 /opt/python/lib/python3*/site-packages/emberaudio/__init__.py")
        assert "layer-reuse test" in shown.stdout
    finally:
        for ref in after.plan.tags:
            client.images.remove(ref, noprune=True)


# --- devel ---------------------------------------------------------------------------------------

def test_devel_image_builds_against_ember_cpp_api(ember_images: EmberImages, request: pytest.FixtureRequest) -> None:
    variant, _ = _variants(request.config)
    devel = ember_images.get(variant, "devel")
    assert devel.size_mb <= devel.plan.budget_mb
    project = (
        "mkdir -p /tmp/p && cd /tmp/p && "
        "printf 'cmake_minimum_required(VERSION 3.18)\\nproject(use_ember CXX)\\nfind_package(ember CONFIG REQUIRED)\\n"
        "add_executable(use use.cpp)\\ntarget_link_libraries(use ember::ember)\\n' > CMakeLists.txt && "
        "printf '#include <ember/kernels.h>\\n#include <cstdio>\\nint main(){float a[2]={1,2},b[2]={3,4},o[2];"
        "ember::add(a,b,o,2);std::printf(\"%%g %%g\\\\n\",o[0],o[1]);}\\n' > use.cpp && "
        "cmake -S . -B build -G Ninja >/dev/null && cmake --build build >/dev/null && ./build/use")
    done = _run(devel.plan.tag, "sh", "-c", project)
    assert done.returncode == 0, done.output
    assert done.stdout.strip().splitlines()[-1] == "4 6", done.output
