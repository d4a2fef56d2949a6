"""PEP 825 wheel variants from the same build (`shipyard variants`), the ember variant provider on
recorded machines, and the install command it prints (issue 31, items 2-4)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support.synthetic_release import features, make_wheel, record, write_manifest
from support.user_installs import plain_pip_env
from variantlib.api import get_variants_by_priority
from variantlib.variants_json import VariantsJson

from shipyard.cli import main
from shipyard.record.manifest import CudaArchs, read_manifest
from shipyard.release.validate import load_spec
from shipyard.report.get_started import get_started
from shipyard.wheel.index import write_index
from shipyard.wheel.repair import source_date_epoch

REPO = Path(__file__).resolve().parents[2]
PROVIDER = REPO / "library" / "ember-variant-provider"
MACHINES = PROVIDER / "tests" / "machines"
# What the arch check records for each variant's wheels, built as release.yaml says (SASS for each
# listed arch, PTX for the highest): test data standing for the manifest of a full build.
RECORDED_ARCHS = {
    "cu102": ("cuda10.2", ("sm_37", "sm_50", "sm_60", "sm_70", "sm_75"), ("compute_75",)),
    "cu118": ("cuda11", ("sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"), ("compute_90",)),
    "cu124": ("cuda12", ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"), ("compute_90",)),
    "cu130": ("cuda13", ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"), ("compute_120",)),
}
# The recorded machines, the build variantlib picks for each over the release's variants, and a
# phrase of why (item 3's table).
EXPECTED = {
    "h100-cuda12": ("cu124", "its sm_90 SASS runs on NVIDIA H100 80GB HBM3 (9.0); built with CUDA 12.4"),
    "p100-cuda11": ("cu118", "its sm_60 SASS runs on Tesla P100-PCIE-16GB (6.0); built with CUDA 11.8"),
    "k40-old-driver": ("cpu", "the CPU build runs on any machine"),
    "a100-a10-cuda12": ("cu124", "its sm_80 SASS runs on NVIDIA A100-SXM4-40GB (8.0); its sm_86 SASS runs on "
                                 "NVIDIA A10 (8.6)"),
    "rtx3090-gtx1080-cuda12": ("cu124", "its sm_86 SASS runs on NVIDIA GeForce RTX 3090 (8.6); its sm_60 SASS runs "
                                        "on NVIDIA GeForce GTX 1080 (6.1)"),
    "rtx4090-gtx1080-cuda13": ("cu124", "its sm_86 SASS runs on NVIDIA GeForce RTX 4090 (8.9); its sm_60 SASS runs "
                                        "on NVIDIA GeForce GTX 1080 (6.1)"),
    "no-driver": ("cpu", "the CPU build runs on any machine"),
}


def native_wheel(folder: Path, project: str, version: str, tag: str) -> Path:
    """A wheel with a module and a stand-in shared library, named like a built one."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{project}-{version}-cp311-cp311-manylinux_2_31_x86_64.whl"
    info = f"{project}-{version}.dist-info"
    from wheel.wheelfile import WheelFile

    with source_date_epoch(1603800000), WheelFile(path, "w") as wf:
        wf.writestr(f"{project}/__init__.py", f"VARIANT = {tag!r}\n")
        wf.writestr(f"{project}/_core.so", hashlib.sha256(tag.encode()).digest() * 64)
        wf.writestr(f"{project}.libs/libpng16-ab12cd34.so.16", b"\x7fELF" + bytes(range(256)) * 8)
        wf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n"
                                        f"Requires-Python: >=3.9\n")
        wf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: shipyard-tests\nRoot-Is-Purelib: false\n"
                                     "Tag: cp311-cp311-manylinux_2_31_x86_64\n")
    return path


def make_release_dist(repo: Path, root: Path) -> Path:
    """A checkout of this repository's release.yaml with a dist/ of ember wheels for cpu and every
    CUDA variant (their recorded archs above), a pure emberaudio wheel, and the manifest."""
    from support.release_copy import LOCAL_TARGETS, with_stand_ins

    root.mkdir()
    shutil.copy(repo / "feature_status.yaml", root / "feature_status.yaml")
    # Its targets the committed stand-ins (local-targets.yaml): a test never reaches for the bucket.
    (root / "release.yaml").write_text(with_stand_ins((repo / "release.yaml").read_text(), LOCAL_TARGETS.read_text()))
    os.symlink(repo / "library", root / "library")
    os.symlink(repo / "recipes", root / "recipes")  # the conda package type's recipes, which validate asks for
    dist = root / "dist"
    records = []
    cpu = native_wheel(dist / "whl" / "cpu" / "ember", "ember", "1.7.0+cpu", "cpu")
    passed = features()  # every feature's tests passed: the gate lets these through
    records.append(record(dist, cpu, component="ember", package_type="wheel", variant="cpu", tag="cpu", tests=passed))
    for tag, (variant, sass, ptx) in RECORDED_ARCHS.items():
        wheel = native_wheel(dist / "whl" / tag / "ember", "ember", f"1.7.0+{tag}", tag)
        records.append(record(dist, wheel, component="ember", package_type="wheel", variant=variant, tag=tag,
                              tests=passed).model_copy(update={"cuda_archs": CudaArchs(sass=sass, ptx=ptx)}))
    pure = make_wheel(dist / "whl" / "cpu" / "emberaudio", "emberaudio", "1.7.0")
    records.append(record(dist, pure, component="emberaudio", package_type="wheel", variant="any", tag="any",
                          tests=passed))
    # The CPU build's conda package and runtime image, as the manifest records them (their bytes do
    # not matter here: the install commands name them).
    conda = dist / "conda" / "linux-64" / "ember-1.7.0-py311_cpu_0.conda"
    conda.parent.mkdir(parents=True)
    conda.write_bytes(b"conda package")
    records.append(record(dist, conda, component="ember", package_type="conda", variant="cpu", tag="cpu",
                          tests=passed))
    image = dist / "images" / "ember-1.7.0-cpu-runtime.id"
    image.parent.mkdir(parents=True)
    image.write_bytes(b"sha256:image")
    records.append(record(dist, image, component="ember", package_type="docker", variant="cpu", tag="cpu",
                          tests=passed).model_copy(update={"name": "ember:1.7.0-cpu-runtime"}))
    write_manifest(dist, records)
    for tag_dir in (dist / "whl").iterdir():  # the legacy per-variant indexes, as a build writes them
        write_index(tag_dir)
    return root


@pytest.fixture
def release_dist(repo: Path, tmp_path: Path) -> Path:
    return make_release_dist(repo, tmp_path / "release")


@pytest.fixture(scope="module")
def variant_index(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """make_release_dist after `shipyard variants`, made once for the tests that only read it."""
    root = make_release_dist(repo, tmp_path_factory.mktemp("variants") / "release")
    assert main(["--root", str(root), "variants"]) == 0
    return root


@pytest.fixture
def provider_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The provider importable here and in the subprocess variantlib runs it in, as an install makes it."""
    monkeypatch.syspath_prepend(str(PROVIDER / "src"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(PROVIDER / "src"),
                                                                   os.environ.get("PYTHONPATH")])))
    # No recorded machine from outside: each test names its own (and leaves none behind).
    monkeypatch.setenv("EMBER_VARIANT_MACHINE", "")
    monkeypatch.delenv("EMBER_VARIANT_MACHINE")
    for module in [m for m in sys.modules if m.startswith("ember_variant_provider")]:
        monkeypatch.delitem(sys.modules, module)


def run_variants(root: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["--root", str(root), "variants"]) == 0
    return capsys.readouterr().out


def legacy_indexes(dist: Path) -> dict[str, bytes]:
    return {p.relative_to(dist).as_posix(): p.read_bytes() for p in sorted((dist / "whl").rglob("*"))
            if p.is_file() and "variants" not in p.parts}


def test_each_cpu_and_cuda_wheel_becomes_a_variant_with_the_archs_the_manifest_records(release_dist, capsys):
    legacy = legacy_indexes(release_dist / "dist")
    out = run_variants(release_dist, capsys)
    folder = release_dist / "dist" / "whl" / "variants" / "ember"
    names = sorted(p.name for p in folder.glob("*.whl"))
    assert names == sorted([f"ember-1.7.0-cp311-cp311-manylinux_2_31_x86_64-{t}.whl"
                            for t in ("cpu", *RECORDED_ARCHS)] + ["ember-1.7.0-cp311-cp311-manylinux_2_31_x86_64.whl"])
    variants_json = json.loads((folder / "ember-1.7.0-variants.json").read_text())
    VariantsJson(variants_json)  # variantlib's own validation of the index file
    assert variants_json["providers"] == {"ember": {"plugin-api": "ember_variant_provider.plugin:EmberVariantPlugin",
                                                    "requires": ["ember-variant-provider"]}}
    assert variants_json["variants"]["cpu"] == {"ember": {"platform": ["cpu"]}}
    cu118 = variants_json["variants"]["cu118"]["ember"]
    assert cu118["platform"] == ["cuda"] and cu118["cuda_runtime"] == ["11.8"]
    assert sorted(cu118["arch"]) == sorted([*RECORDED_ARCHS["cu118"][1], "compute_90"])
    # The wheel carries the same description in its .dist-info.
    with zipfile.ZipFile(folder / "ember-1.7.0-cp311-cp311-manylinux_2_31_x86_64-cu130.whl") as zf:
        inner = json.loads(zf.read("ember-1.7.0.dist-info/variant.json"))
        assert zf.read("ember-1.7.0.dist-info/METADATA").splitlines()[2] == b"Version: 1.7.0"
    assert inner["variants"] == {"cu130": variants_json["variants"]["cu130"]}
    assert f"whl/variants/ember/ember-1.7.0-variants.json: {(folder / 'ember-1.7.0-variants.json').stat().st_size} " \
           f"bytes" in out
    # The record next to the manifest names each file and the artifact it was made from.
    recorded = json.loads((release_dist / "dist" / "variant-wheels.json").read_text())["files"]
    cu102 = next(f for f in recorded if f.get("label") == "cu102")
    assert cu102["source"]["name"] == "ember-1.7.0+cu102-cp311-cp311-manylinux_2_31_x86_64.whl"
    assert "ember :: arch :: compute_75" in cu102["properties"]
    # The legacy per-variant indexes stay as they were, byte for byte.
    assert legacy_indexes(release_dist / "dist") == legacy and len(legacy) == 28


def test_a_variant_is_a_repack_every_other_file_byte_for_byte(release_dist, capsys):
    run_variants(release_dist, capsys)
    dist = release_dist / "dist"
    for tag in ("cpu", *RECORDED_ARCHS):
        source = next((dist / "whl" / tag / "ember").glob("*.whl"))
        variant = dist / "whl" / "variants" / "ember" / f"ember-1.7.0-cp311-cp311-manylinux_2_31_x86_64-{tag}.whl"
        with zipfile.ZipFile(source) as a, zipfile.ZipFile(variant) as b:
            payload_a = {n: a.read(n) for n in a.namelist() if ".dist-info/" not in n}
            payload_b = {n: b.read(n) for n in b.namelist() if ".dist-info/" not in n}
            assert payload_a == payload_b and len(payload_a) == 3
            metadata = {n.split("/", 1)[1] for n in b.namelist() if ".dist-info/" in n}
            assert metadata == {"METADATA", "WHEEL", "RECORD", "variant.json"}
            assert a.read("ember-1.7.0+" + tag + ".dist-info/WHEEL") == b.read("ember-1.7.0.dist-info/WHEEL")
    # A second run rewrites nothing: the same bytes under the same names.
    before = {p.name: p.read_bytes() for p in (dist / "whl" / "variants" / "ember").iterdir()}
    run_variants(release_dist, capsys)
    assert {p.name: p.read_bytes() for p in (dist / "whl" / "variants" / "ember").iterdir()} == before


def test_an_installer_without_variants_resolves_a_plain_wheel_from_every_index(release_dist, capsys, tmp_path):
    run_variants(release_dist, capsys)
    whl = release_dist / "dist" / "whl"
    for index in ("variants", "cpu", "cu118"):
        dest = tmp_path / index
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                               "--index-url", (whl / index).as_uri(), "--python-version", "3.11",
                               "--platform", "manylinux_2_31_x86_64", "--only-binary", ":all:", "-d", str(dest),
                               "ember"], capture_output=True, text=True, env=plain_pip_env())
        assert done.returncode == 0, done.stderr
        (got,) = [p.name for p in dest.iterdir()]
        expected = {"variants": "ember-1.7.0-cp311-cp311-manylinux_2_31_x86_64.whl"}.get(
            index, f"ember-1.7.0+{index}-cp311-cp311-manylinux_2_31_x86_64.whl")
        assert got == expected, done.stdout
    # uv, which does not read variants either, picks the same plain wheel.
    uv = Path(sys.executable).with_name("uv")
    done = subprocess.run([str(uv), "pip", "install", "--dry-run", "--no-deps", "--python", sys.executable,
                           "--python-version", "3.11", "--python-platform", "x86_64-manylinux_2_31",
                           "--index-url", (whl / "variants").as_uri(), "-v", "ember"], capture_output=True, text=True,
                          env={**plain_pip_env(), "UV_CACHE_DIR": str(tmp_path / "uv-cache")})
    assert done.returncode == 0, done.stderr
    assert "Selecting: ember==1.7.0 [compatible] (ember-1.7.0-cp311-cp311-manylinux_2_31_x86_64.whl)" in done.stderr


def test_a_cuda_wheel_without_recorded_archs_is_refused_in_one_line(release_dist, capsys):
    manifest = release_dist / "dist" / "manifest.json"
    data = json.loads(manifest.read_text())
    for artifact in data["artifacts"]:
        artifact.pop("cuda_archs", None)
    manifest.write_text(json.dumps(data))
    assert main(["--root", str(release_dist), "variants"]) == 2
    err = capsys.readouterr().err
    assert "cuda_archs: missing" in err and "Traceback" not in err and len(err.strip().splitlines()) <= 3
    assert not (release_dist / "dist" / "whl" / "variants").exists()  # nothing written


@pytest.mark.parametrize("machine", sorted(EXPECTED))
def test_the_provider_makes_variantlib_pick_the_build_a_recorded_machine_runs(machine, variant_index,
                                                                             provider_on_path):
    from ember_variant_provider.choice import choose

    variants_json = json.loads((variant_index / "dist" / "whl" / "variants" / "ember" /
                                "ember-1.7.0-variants.json").read_text())
    choice = choose(variants_json, MACHINES / f"{machine}.json")
    label, why = EXPECTED[machine]
    assert (choice.label, why in choice.why) == (label, True), choice
    # variantlib's own entry point (what an installer calls) agrees, and never ranks a variant
    # whose code the machine's GPUs cannot all run.
    ranked = [v.label for v in get_variants_by_priority(variants_json=variants_json) if not v.is_null_variant()]
    assert ranked == list(choice.ranked)
    assert ranked[-1] == "cpu"
    print(f"| {machine} | {choice.label} | {choice.why} |")


def test_a_variant_whose_code_cannot_run_on_the_gpu_is_never_chosen(variant_index, provider_on_path):
    from ember_variant_provider.choice import choose

    variants_json = json.loads((variant_index / "dist" / "whl" / "variants" / "ember" /
                                "ember-1.7.0-variants.json").read_text())
    # The K40 (3.5): cu102 and cu118 carry sm_37 (a 3.7 or newer minor of major 3) and PTX of 7.5
    # or 9.0, none of which a 3.5 GPU runs; cu124 and cu130 start at sm_50.
    k40 = choose(variants_json, MACHINES / "k40-old-driver.json")
    assert k40.ranked == ("cpu",)
    assert "none runs on the Tesla K40m (3.5)" in k40.dropped["cu102"], k40.dropped
    # cu118 needs a newer driver than CUDA 10.2 as well; cu102 alone is ruled out by its archs.
    assert "needs a driver for CUDA 11.8; this one supports CUDA 10.2" == k40.dropped["cu118"]
    # An RTX 3090 (8.6) and a GTX 1080 (6.1): a fat binary's driver picks per GPU, so a build fits
    # when each runs some code it carries (cu124: sm_86 on the one, sm_60 on the other).
    mixed = choose(variants_json, MACHINES / "rtx3090-gtx1080-cuda12.json")
    assert mixed.ranked == ("cu124", "cu118", "cu102", "cpu")
    # With a CUDA 13 driver, cu130 (sm_75 and newer, PTX 12.0) still has nothing the GTX 1080 runs.
    newer = choose(variants_json, MACHINES / "rtx4090-gtx1080-cuda13.json")
    assert newer.ranked == ("cu124", "cu118", "cu102", "cpu")
    assert "none runs on the NVIDIA GeForce GTX 1080 (6.1)" in newer.dropped["cu130"], newer.dropped
    # The H100 with a 12.8 driver: cu130 needs a CUDA 13 driver; cu102 has no SASS for 9.0, but its
    # compute_75 PTX is compiled by the driver at first use: it runs, ranked after the SASS builds.
    h100 = choose(variants_json, MACHINES / "h100-cuda12.json")
    assert h100.ranked == ("cu124", "cu118", "cu102", "cpu")
    assert h100.dropped == {"cu130": "needs a driver for CUDA 13.0; this one supports CUDA 12.8"}


def test_the_no_driver_recording_is_what_nvml_says_here(provider_on_path):
    # No GPU on this machine: the live NVML path must give the description the recording holds.
    from ember_variant_provider.machine import nvml_description

    recorded = json.loads((MACHINES / "no-driver.json").read_text())
    assert nvml_description() == {"nvml": None, "error": recorded["error"]}


def test_the_install_command_prints_the_index_and_the_commands_for_each_recorded_machine(variant_index,
                                                                                       provider_on_path):
    guide = variant_index / "dist" / "whl" / "variants" / "install.json"
    for machine in sorted(EXPECTED):
        install_command_for(machine, guide)


def install_command_for(machine: str, guide: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "ember_variant_provider", "--guide", str(guide),
                           "--machine", str(MACHINES / f"{machine}.json"), "--platform", "linux-x86_64"],
                          capture_output=True, text=True, env=os.environ)
    assert done.returncode == 0, done.stderr
    label, why = EXPECTED[machine]
    lines = {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in done.stdout.splitlines()}
    assert lines["build"].startswith(f"{label}: ") and why in lines["build"], done.stdout
    index = f"http://127.0.0.1:8083/whl/nightly/{label}/"
    assert lines["index"] == index
    assert lines["pip"].endswith(f"--index-url {index}") and lines["pip"].startswith("pip3 install ember")
    assert lines["uv"].startswith("uv pip install ember") and lines["uv"].endswith(f"--index-url {index}")
    if label == "cpu":  # the manifest holds the CPU build's conda package and image: the page's commands
        page = get_started(load_spec(guide.parents[3]).release, read_manifest(guide.parents[2] / "manifest.json"))
        for installer in ("conda", "docker"):
            (answer,) = [a for a in page.answers if (a.platform, a.installer, a.variant, a.channel)
                         == ("linux-x86_64", installer, "cpu", "nightly")]
            assert answer.command and lines[installer] == answer.command, done.stdout
        assert lines["conda"].startswith("conda install -c ") and lines["docker"].startswith("docker pull ")
    else:  # and nothing but wheels of the CUDA builds
        assert lines["conda"].startswith("none: Not built: the manifest holds no CUDA"), done.stdout
        assert lines["docker"].startswith("none: "), done.stdout
    print(done.stdout)


def test_the_install_command_says_what_is_wrong_in_one_line(provider_on_path, tmp_path):
    bad = tmp_path / "install.json"
    bad.write_text("{}")
    for args, message in ((["--guide", str(bad)], "platforms: missing"),
                          ([], "--guide: missing"),
                          (["--guide", str(tmp_path / "nope.json")], "not a readable install guide")):
        done = subprocess.run([sys.executable, "-m", "ember_variant_provider", *args], capture_output=True, text=True,
                              env={k: v for k, v in os.environ.items() if k != "EMBER_INSTALL_GUIDE"})
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_the_built_wheels_of_the_fixture_release_repack_byte_for_byte_and_pip_installs_a_plain_one(
        minirelease_build, tmp_path, capsys):
    """Real built wheels (fixcext: an extension, its native core and the libpng auditwheel vendored)."""
    from support.minirelease import own_copy

    root = own_copy(minirelease_build, tmp_path / "release")
    with (root / "release.yaml").open("a") as f:
        f.write("wheel_variants:\n  namespace: fixtures\n  provider: fixtures-provider\n"
                "  plugin_api: fixtures_provider:Plugin\n")
    assert main(["--root", str(root), "variants"]) == 0
    dist = root / "dist"
    manifest = json.loads((dist / "manifest.json").read_text())
    native = [a for a in manifest["artifacts"] if a["component"] == "fixcext" and a["package_type"] == "wheel"]
    assert len(native) == 2  # 3.9 and 3.13
    folder = dist / "whl" / "variants" / "fixcext"
    for artifact in native:
        source = dist / artifact["path"]
        plain = artifact["name"].replace("+cpu", "")
        variant = folder / (plain[: -len(".whl")] + "-cpu.whl")
        with zipfile.ZipFile(source) as a, zipfile.ZipFile(variant) as b, zipfile.ZipFile(folder / plain) as c:
            payload = {n: a.read(n) for n in a.namelist() if ".dist-info/" not in n}
            assert any(n.endswith(".so") for n in payload) and any(".libs/libpng" in n for n in payload)
            assert {n: b.read(n) for n in b.namelist() if ".dist-info/" not in n} == payload
            assert {n: c.read(n) for n in c.namelist() if ".dist-info/" not in n} == payload
            assert any(n.endswith(".dist-info/variant.json") for n in b.namelist())
            assert not any(n.endswith(".dist-info/variant.json") for n in c.namelist())
    variants_json = json.loads((folder / f"fixcext-{native[0]['version'].split('+')[0]}-variants.json").read_text())
    assert variants_json["variants"] == {"cpu": {"fixtures": {"platform": ["cpu"]}}}
    # pip, which knows nothing of variants, resolves the plain wheel from the variants index.
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps",
                           "--report", str(report), "--index-url", (dist / "whl" / "variants").as_uri(),
                           "--python-version", "3.13", "--platform", "manylinux_2_31_x86_64", "--only-binary", ":all:",
                           "--target", str(tmp_path / "target"), "fixcext"],
                          capture_output=True, text=True, env=plain_pip_env())
    assert done.returncode == 0, done.stderr
    (installed,) = json.loads(report.read_text())["install"]
    name = installed["download_info"]["url"].rsplit("/", 1)[1]
    assert name == next(a["name"] for a in native if "cp313" in a["name"]).replace("+cpu", ""), name


def test_the_static_tree_publishes_the_variants_index_beside_the_per_variant_ones(release_dist, capsys, tmp_path):
    run_variants(release_dist, capsys)
    args = ["--root", str(release_dist), "publish", "--channel", "test", "--target", "wheels-tree"]
    assert main(args) == 0, capsys.readouterr()
    capsys.readouterr()
    served = release_dist / "dist" / "site" / "whl" / "test"
    built = release_dist / "dist" / "whl" / "variants" / "ember"
    assert (served / "variants" / "ember" / "ember-1.7.0-variants.json").read_bytes() == \
        (built / "ember-1.7.0-variants.json").read_bytes()
    page = json.loads((served / "variants" / "ember" / "index.json").read_text())
    assert sorted(f["filename"] for f in page["files"]) == sorted(
        p.name for p in built.iterdir() if p.suffix == ".whl" or p.name.endswith("-variants.json"))
    assert (served / "cu118" / "ember" / "ember-1.7.0+cu118-cp311-cp311-manylinux_2_31_x86_64.whl").is_file()
    # What is served resolves for an installer without variants, from either index.
    for index, expected in (("variants", "ember-1.7.0-cp311-cp311-manylinux_2_31_x86_64.whl"),
                            ("cu118", "ember-1.7.0+cu118-cp311-cp311-manylinux_2_31_x86_64.whl")):
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--index-url",
                               (served / index).as_uri(), "--python-version", "3.11", "--platform",
                               "manylinux_2_31_x86_64", "--only-binary", ":all:", "-d", str(tmp_path / index), "ember"],
                              capture_output=True, text=True, env=plain_pip_env())
        assert done.returncode == 0, done.stderr
        assert [p.name for p in (tmp_path / index).iterdir()] == [expected]
    # Publishing again sends nothing: every file, variants included, is there with its bytes.
    assert main(args) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "wheels-tree" in line)
    # variants: 5 variant wheels, the plain one and the pure one; per variant: 5 ember wheels and the pure one in each
    assert [cell.strip() for cell in row.split("│")[2:4]] == ["0", "17"], row
