"""nox sessions for shipyard. A declaration only: every session installs shipyard and calls it.

Build sessions are generated from the variants in release.yaml (`build-cpu`, `build-cuda11`, …,
and `conda-cpu`, `conda-cuda11`, … for the conda packages).
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import nox
import yaml

# uv when bootstrap installed it (sessions set up in seconds), else the standard venv + pip.
nox.options.default_venv_backend = "uv|venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["matrix"]

ROOT = Path(__file__).parent
RELEASE = yaml.safe_load((ROOT / "release.yaml").read_text())

sys.path.insert(0, str(ROOT / "ci"))
import scratch_tmpfs  # noqa: E402  (ci/: the noxfile's own helpers, standard library only)


def _all_system_packages(session: nox.Session) -> None:
    """The apt packages beyond the builds' (docker, clang, chromium, diffoscope, ...): `ci/bootstrap.sh`
    installs only what the builds need, so the main job starts sooner; a second when present."""
    session.run_install("bash", str(ROOT / "ci" / "bootstrap.sh"), "--all", external=True)


def _install_shipyard(session: nox.Session, *extras: str, bytecode: bool = False) -> None:
    """shipyard (editable) and `extras` into the session's venv; `bytecode`: and every installed
    package compiled, for a session that starts many Pythons from this venv (uv installs sources
    only, and where PYTHONDONTWRITEBYTECODE is set, as on CI's machines, each of them compiled every
    module it imported again)."""
    spec = f".[{','.join(extras)}]" if extras else "."
    session.install("-e", spec, env={"UV_COMPILE_BYTECODE": "1"} if bytecode else None)


@nox.session(name="matrix")
def matrix(session: nox.Session) -> None:
    """Print the build matrix (pass `-- --format github` for a GitHub Actions matrix)."""
    _install_shipyard(session)
    session.run("shipyard", "matrix", *session.posargs)


@nox.session(name="validate")
def validate(session: nox.Session) -> None:
    """Validate release.yaml and feature_status.yaml."""
    _install_shipyard(session)
    session.run("shipyard", "validate", *session.posargs)


@nox.session(name="doctor")
def doctor(session: nox.Session) -> None:
    """For every cell this host can build: ready, or what is missing and the fix; the session fails
    (shipyard's status 18) when a cell is not ready, after the table."""
    _install_shipyard(session)
    session.run("shipyard", "doctor", *session.posargs)


def _signs_locally() -> bool:
    """Whether builds sign with release.yaml's local key file (not CI's variable, which holds the release key)."""
    supply = RELEASE.get("supply_chain") or {}
    return bool(supply.get("signing_key_file")) and not os.environ.get(supply.get("signing_key_env") or "-")


def _build_signed_and_verified(session: nox.Session, *build: str) -> None:
    """Run a building command with provenance signed by the local key (made once), then verify every
    artifact in dist/ (with the public key beside it); on CI, whose variable holds the release key,
    the command alone."""
    local = _signs_locally()
    if local:
        session.run("shipyard", "keygen")
    session.run(*build)
    if local:  # every artifact's signature, digest, contents and SBOM
        session.run("shipyard", "verify", "dist")


def _build_session(variant: str, spec: dict) -> None:
    cuda = f"CUDA {spec['cuda']} ({spec['tag']}, archs {spec['arch_list']})" if spec.get("cuda") else "CPU"

    def session_func(session: nox.Session) -> None:
        _install_shipyard(session)
        # Assemble first what this machine can (idempotent): the sysroot for the wheels' glibc
        # promise, and a CUDA session's toolkit.
        _build_signed_and_verified(session, "shipyard", "build", "--variant", variant, "--install-toolchain",
                                   *session.posargs)

    session_func.__doc__ = (f"Build, check and test every {cuda} wheel for this host and every Python "
                            f"(-- --python 3.11 --component ember --skip-unavailable --container).")
    nox.session(name=f"build-{variant}")(session_func)


def _conda_session(variant: str, spec: dict) -> None:
    cuda = f"CUDA {spec['cuda']} ({spec['tag']})" if spec.get("cuda") else "CPU"

    def session_func(session: nox.Session) -> None:
        _install_shipyard(session)
        if spec.get("cuda"):  # assemble the variant's CUDA toolkit when this machine can (cached)
            session.run("shipyard", "toolchain", "install", variant)
        # This machine reaches no conda channel: the bootstrap channel stands in for release.yaml's
        # conda.channels, asked for explicitly (a CI runner solves from conda-forge instead).
        channel = [] if "--channel" in session.posargs else ["--bootstrap-channel"]
        _build_signed_and_verified(session, "shipyard", "conda", "build", "--variant", variant, *channel,
                                   *session.posargs)

    session_func.__doc__ = (f"Build the {cuda} conda packages with rattler-build for every Python, test each "
                            f"in an environment solved from the served channel, publish to dist/conda; "
                            f"dependencies from the bootstrap channel unless --channel is given "
                            f"(-- --python 3.11 --component ember --channel URL --no-tests).")
    nox.session(name=f"conda-{variant}")(session_func)


def _docker_session(variant: str, spec: dict) -> None:
    cuda = f"CUDA {spec['cuda']}" if spec.get("cuda") else "CPU"

    def session_func(session: nox.Session) -> None:
        _all_system_packages(session)
        _install_shipyard(session, "test")
        python, platform = RELEASE["images"]["python"], RELEASE["images"]["platform"]
        # The images hold the variant's tested wheels: build (cached when unchanged) and test them first,
        # the images' platform's only (pip picks those in the image, not a second Linux platform's).
        session.run("shipyard", "build", "--variant", variant, "--python", python, "--platform", platform,
                    "--install-toolchain")
        # The tests build the images (shipyard.image.build_images, what `shipyard image build` runs)
        # from those wheels in dist/, then test them; their fixture starts dockerd when none runs.
        marks = "slow" if spec.get("cuda") else "slow and not cuda_image"
        session.run("pytest", "-p", "no:cacheprovider", "tests/image/test_docker_image.py", "-m", marks,
                    "--image-variant", variant, *session.posargs, env={"SHIPYARD_IMAGE_TESTED_WHEELS": "1"})

    session_func.__doc__ = (f"Build the {cuda} runtime and devel images from the variant's tested wheels and "
                            f"test them: training in a container and across two, a killed peer, labels, size, "
                            f"hygiene, layer reuse, push and pull (-- pytest options).")
    nox.session(name=f"docker-{variant}")(session_func)


for _variant, _spec in RELEASE["variants"].items():
    _build_session(_variant, _spec)
    _conda_session(_variant, _spec)
    if _variant in RELEASE.get("images", {}).get("variants", {}):
        _docker_session(_variant, _spec)


@nox.session(name="repro")
def repro(session: nox.Session) -> None:
    """Build cells twice from clean clones (other folder, time, TZ, umask) and compare every artifact's bytes;
    diffoscope on a difference (default: -- --variant cpu --python 3.11 --mobile-target host; nvcc's output:
    -- --variant cuda11 --python 3.11)."""
    _all_system_packages(session)
    _install_shipyard(session)
    session.run("shipyard", "repro", *(session.posargs or ["--variant", "cpu", "--python", "3.11",
                                                           "--mobile-target", "host"]))


@nox.session(name="build-mobile")
def build_mobile(session: nox.Session) -> None:
    """Build, test (natively and under qemu) and package ember-lite for every mobile target."""
    _install_shipyard(session)
    session.run("shipyard", "build-mobile", *session.posargs)


def _install_ember(session: nox.Session, *extra: str) -> None:
    session.install("numpy", "threadpoolctl", *extra)
    session.install("./library/ember", env={"CMAKE_BUILD_PARALLEL_LEVEL": "2"})


@nox.session(name="bench-kernels")
def bench_kernels(session: nox.Session) -> None:
    """ember.fft vs numpy.fft and ember.matmul vs numpy.matmul, 1 thread and all threads, as ratios."""
    _install_ember(session)
    session.run("python", "benchmarks/bench_kernels.py", *session.posargs)


@nox.session(name="bench-distributed")
def bench_distributed(session: nox.Session) -> None:
    """Allreduce bus bandwidth on loopback (4 processes, 1 MB and 64 MB) vs a raw-socket baseline."""
    _install_ember(session)
    session.run("python", "benchmarks/bench_distributed.py", *session.posargs)


@nox.session(name="bench-mobile")
def bench_mobile(session: nox.Session) -> None:
    """ember-lite malloc calls and time per inference, with and without the caching allocator."""
    _install_ember(session)
    session.run("python", "benchmarks/bench_mobile.py", *session.posargs)


@nox.session(name="bench-build")
def bench_build(session: nox.Session) -> None:
    """Build-time ratios: N Pythons vs one (core built once) against plain per-Python builds; cached re-run."""
    _install_shipyard(session)
    session.run("python", "benchmarks/bench_build.py", *session.posargs)


@nox.session(name="bench-conda")
def bench_conda(session: nox.Session) -> None:
    """Conda build cost of every Python vs one: libember once + ember per Python, against a recipe
    that compiles everything per Python (-- --variant cuda11)."""
    _install_shipyard(session)
    session.run("python", "benchmarks/bench_conda.py", *session.posargs)


@nox.session(name="bench-main-job")
def bench_main_job(session: nox.Session) -> None:
    """The main job cold: cells tested side by side with uv vs one at a time with pip, as a ratio."""
    _install_shipyard(session)
    session.run("python", "benchmarks/bench_main_job.py", *session.posargs)


@nox.session(name="bench-docker")
def bench_docker(session: nox.Session) -> None:
    """Image rebuild after one changed wheel vs a cold build, side by side, and the image sizes."""
    _all_system_packages(session)
    _install_shipyard(session)
    session.run("python", "benchmarks/bench_docker.py", *session.posargs)


@nox.session(name="bench-supply")
def bench_supply(session: nox.Session) -> None:
    """What SBOMs and signed provenance add to a build: re-pack with and without the SBOM per wheel, signing
    and verifying every artifact of dist/ (after nox -s build-cpu; -- DIST for another folder)."""
    _install_shipyard(session)
    session.run("python", "benchmarks/bench_supply.py", *session.posargs)


@nox.session(name="publish")
def publish(session: nox.Session) -> None:
    """Publish dist/manifest.json's artifacts to every target of release.yaml
    (-- --channel nightly|test|release [--target NAME]); credentials from the *_env variables it names."""
    _install_shipyard(session)
    session.run("shipyard", "publish", *(session.posargs or ["--channel", "nightly"]))


@nox.session(name="promote")
def promote(session: nox.Session) -> None:
    """Copy a version between channels byte for byte (-- 1.7.0 --from test --to release)."""
    _install_shipyard(session)
    session.run("shipyard", "promote", *session.posargs)


@nox.session(name="report")
def report(session: nox.Session) -> None:
    """The release report of dist/manifest.json: dist/report/index.html, one offline page
    (-- --format text prints the grid here)."""
    _install_shipyard(session)
    session.run("shipyard", "report", *session.posargs)


@nox.session(name="notes")
def notes(session: nox.Session) -> None:
    """Release notes from dist/manifest.json and feature_status.yaml: dist/RELEASE_NOTES.md
    (-- --previous v1.6.0 adds the new features and status changes since that ref)."""
    _install_shipyard(session)
    session.run("shipyard", "notes", *session.posargs)


@nox.session(name="bench-publish")
def bench_publish(session: nox.Session) -> None:
    """An unchanged re-publish of 100 artifacts per target kind, each published alone to real servers on
    127.0.0.1 (devpi, static tree, pypiserver, conda channel, docker-registry with a docker engine's images),
    beside the first; goal: at most 1 s per kind, and the exit status says whether every kind met it
    (-- --profile DIR: a profile of one more re-publish per kind)."""
    _install_shipyard(session, "test")
    session.run("python", "benchmarks/bench_publish.py", *session.posargs)


@nox.session(name="bench-pipeline")
def bench_pipeline(session: nox.Session) -> None:
    """The nightly narrowed to cpu and Python 3.11 through `shipyard ci run` (act, bare runners) against the same
    shipyard commands run directly, side by side: the engine's overhead as a ratio, and where it goes
    (-- --release fixture: the small fixture release, quick)."""
    _all_system_packages(session)  # docker, Debian's docker-registry
    _install_shipyard(session, "test")  # act, devpi: what the pipeline tests use
    session.run("python", "benchmarks/bench_pipeline.py", *session.posargs)


@nox.session(name="dist-shipyard")
def dist_shipyard(session: nox.Session) -> None:
    """shipyard's own wheel and sdist, into dist/shipyard/: what an index serves and the generated
    workflows' jobs install (shipyard==<version>)."""
    session.install("uv")
    session.run("uv", "build", "--wheel", "--sdist", "--out-dir", str(ROOT / "dist" / "shipyard"), str(ROOT))


# What `nox -s tests` (and .ci/run) leaves to sessions of their own: each takes ten minutes or more
# beyond what .ci/run's 30 minutes on 2 cores leave.
SUITE_MARKERS = ("not tutorial and not bare_toolkits and not heldout and not ember_nightly and not fixture_pipeline "
                 "and not pipeline_linux")


@nox.session(name="tests")
def tests(session: nox.Session) -> None:
    """shipyard's own test suite, fast and slow tiers (`-- -m "not slow"` for the fast one), on
    every core with pytest-xdist (`-- -n 0 tests` for one process)."""
    _all_system_packages(session)
    _install_shipyard(session, "test", bytecode=True)  # the suite starts thousands of Pythons from it
    with scratch_tmpfs.scratch_env(session.log, session.warn) as env:  # ci/scratch_tmpfs.py
        session.run("pytest", "-n", "auto", "--dist", "loadgroup",
                    *(session.posargs or ["-m", SUITE_MARKERS, "tests"]),
                    env=env)


@nox.session(name="toolkits-bare")
def toolkits_bare(session: nox.Session) -> None:
    """`shipyard toolchain install` for every Linux CUDA variant of release.yaml inside a bare
    debian:bookworm container, shipyard from this checkout's wheel: each toolkit from PyPI and
    Debian's mirror alone, its proof line and wall time printed (cuda10.2 refused with its reason)."""
    _all_system_packages(session)  # docker, debootstrap
    _install_shipyard(session, "test")
    session.run("pytest", "-p", "no:cacheprovider", "-s", "-n", "0", "tests/host/test_toolkits_bare.py",
                "-m", "bare_toolkits", *session.posargs)


@nox.session(name="tutorial")
def tutorial(session: nox.Session) -> None:
    """docs/third-party.md's tutorial, every command as written, from `pip install shipyard` (this
    checkout's wheel on a loopback index) to the nightly under act publishing to devpi: about
    ten minutes, beyond what .ci/run's budget leaves."""
    _all_system_packages(session)
    _install_shipyard(session, "test")
    with scratch_tmpfs.scratch_env(session.log, session.warn) as env:
        session.run("pytest", "-n", "0", "-m", "tutorial", "tests/end_to_end/test_tutorial.py", *session.posargs,
                    env=env)


def _marked_tests(session: nox.Session, marker: str, path: str, *pytest_args: str) -> None:
    """A check too long for `nox -s tests`: the tests of `path` marked `marker`, one at a time, with what the
    suite's docker tests need (the system packages, shipyard with its test extra, the scratch tmpfs)."""
    _all_system_packages(session)  # docker, debootstrap, Debian's docker-registry
    _install_shipyard(session, "test")
    with scratch_tmpfs.scratch_env(session.log, session.warn) as env:
        session.run("pytest", "-p", "no:cacheprovider", "-n", "0", *pytest_args, "-m", marker, path,
                    *session.posargs, env=env)


@nox.session(name="nightly-ember")
def nightly_ember(session: nox.Session) -> None:
    """ember's committed nightly under `shipyard ci run` (act, bare runners), narrowed to cpu, Python 3.11 and
    linux-x86_64: plan (the Linux job image), the wheel, conda, pure and docker lanes, manifest and publish into
    devpi, a static tree, a conda channel and a registry on loopback; then pip, a conda solve and `docker pull`
    get the bytes it built. About ten minutes here. The small fixture release's runs are `nox -s pipeline-fixture`."""
    _marked_tests(session, "ember_nightly", "tests/end_to_end/test_pipeline_ember.py")


@nox.session(name="pipeline-linux")
def pipeline_linux(session: nox.Session) -> None:
    """Every Linux job of ember's release under `shipyard ci run`: the release workflow for tag v1.7.0-rc1 (channel
    test), cpu, cu118, cu124 and cu130, wheel, conda, mobile and docker lanes, Python 3.11, publishing into devpi, a
    pypiserver, a static tree, a conda channel and a registry on loopback; then pip, conda and `docker pull` get the
    bytes it built. Prints the job table, its wall time and what cannot run here (CUDA 10.2's builder image, the other
    Pythons, the Android NDK). About 22 minutes on 2 cores."""
    _marked_tests(session, "pipeline_linux", "tests/end_to_end/test_pipeline_linux.py", "-s")  # -s: its job table


@nox.session(name="pipeline-fixture")
def pipeline_fixture(session: nox.Session) -> None:
    """The small fixture release through the committed workflows under `shipyard ci run`, four runs: a failing
    stable feature published marked to nightly and refused for test, the fix a day later, tag v0.4.0-rc1 to test
    and `shipyard promote` to release, into a devpi server on loopback. About seven minutes here."""
    _marked_tests(session, "fixture_pipeline", "tests/end_to_end/test_pipeline_fixture.py")


@nox.session(name="heldout")
def heldout(session: nox.Session) -> None:
    """The held-out check (tests/heldout/release.yaml): msgpack, ujson and argon2-cffi-bindings, pinned
    sdists from PyPI, built for every Python on manylinux2014 and manylinux_2_31 (toolchains installed
    first) and tested with their own tests, then their Python 3.9 wheels pip-installed and tested in a
    debian:bullseye container; prints what it saw as tables. About 15 minutes here."""
    _marked_tests(session, "heldout", "tests/end_to_end/test_heldout.py", "-s")  # -s: its tables


@nox.session(name="fuzz")
def fuzz(session: nox.Session) -> None:
    """The input fuzzer's long budget: every file each command reads, broken by hypothesis, against
    one invariant (tests/support/input_fuzz.py); prints the tally by command and class. `-- N` sets the
    number of examples (default 20000), `-- N SEED` the seed too (a run prints its own)."""
    _install_shipyard(session, "test")
    examples = session.posargs[0] if session.posargs else "20000"
    seed = session.posargs[1] if len(session.posargs) > 1 else str(random.SystemRandom().randrange(2**32))
    session.log(f"fuzzing with {examples} examples, seed {seed} (again: nox -s fuzz -- {examples} {seed})")
    session.run("pytest", "-p", "no:cacheprovider", "-n", "0", "-s", f"--hypothesis-seed={seed}",
                "tests/project/test_input_fuzz.py", env={"SHIPYARD_FUZZ_EXAMPLES": examples})


@nox.session(name="faults")
def faults(session: nox.Session) -> None:
    """The fault suite's long budget (tests/publish/test_publish_faults.py): releases published and
    promoted to every target kind under kills, restarts, failing proxies, 429s, two publishers at
    once and expiring tokens until at least N faults were injected; prints the seed first and the
    tally by kind of fault and by target. `-- N` sets N (default 200; the CI suite runs 45), `-- N
    SEED` the seed too (a run prints its own)."""
    _all_system_packages(session)  # docker, docker-registry, htpasswd
    _install_shipyard(session, "test", bytecode=True)  # the suite starts hundreds of publishers
    count = session.posargs[0] if session.posargs else "200"
    seed = session.posargs[1] if len(session.posargs) > 1 else str(random.SystemRandom().randrange(10**6))
    session.log(f"fault suite: at least {count} faults, seed {seed} (again: nox -s faults -- {count} {seed})")
    with scratch_tmpfs.scratch_env(session.log, session.warn) as env:
        session.run("pytest", "-p", "no:cacheprovider", "-n", "0", "-s", "tests/publish/test_publish_faults.py",
                    env={**env, "SHIPYARD_FAULT_COUNT": count, "SHIPYARD_FAULT_SEED": seed})


@nox.session(name="native")
def native(session: nox.Session) -> None:
    """ember's core natively: portable paths, clang -Werror, Windows DLLs under wine, ASan+UBSan and TSan
    (part of `tests`; `-- -m sanitizers` for the sanitizer tier alone)."""
    _all_system_packages(session)
    _install_shipyard(session, "test")
    session.run("pytest", "tests/project/test_ember_native.py", *session.posargs)


@nox.session(name="lint")
def lint(session: nox.Session) -> None:
    """ruff and mypy over shipyard's sources."""
    _install_shipyard(session, "lint")
    session.run("ruff", "check", "src", "tests", "benchmarks", "ci", "noxfile.py")
    session.run("mypy")
