"""CUDA toolkits assembled into shipyard's toolchain cache: real .debs, real wheels, real nvcc.

The slow tests install into $SHIPYARD_CACHE/toolchains when SHIPYARD_CACHE is set (so repeated
runs download nothing), else into one temporary cache shared by the session.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import time
from pathlib import Path

import pytest

from shipyard.cli import main
from shipyard.errors import SpecError, ToolchainMissing, ToolError
from shipyard.host.apt_sources import debian_mirror
from shipyard.host.toolchains.cuda_recipes import InstalledCudaToolkit, cuda_toolkit_recipes
from shipyard.host.toolchains.cuda_toolkit import find_installed_cuda_toolkits, install_cuda_toolkit
from shipyard.host.toolchains.cuobjdump import cuda_device_code, cuda_sass_archs
from shipyard.host.toolchains.discover import discover
from shipyard.plumbing import command
from shipyard.release.cuda_archs import DeviceCode, gencode_flags, parse_arch_list, ptx_arch, sm_name
from shipyard.release.cuda_archs import supported_archs as arch_table

ARCHS = {
    "11.8": parse_arch_list("3.7;5.0;6.0;7.0;7.5;8.0;8.6;9.0"),
    "12.4": parse_arch_list("5.0;6.0;7.0;7.5;8.0;8.6;9.0"),
    "13.0": parse_arch_list("7.5;8.0;8.6;9.0;10.0;12.0"),
}

KERNEL = r"""
#include <cuda_runtime.h>
__global__ void scale(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + expf(x[i]);
}
extern "C" int ember_scale(float* y, const float* x, float a, int n) {
  scale<<<(n + 255) / 256, 256>>>(y, x, a, n);
  return (int)cudaGetLastError();
}
"""

MAIN = r"""
#include <cstdio>
#include <cuda_runtime_api.h>
extern "C" int ember_scale(float*, const float*, float, int);
int main() {
  int n = -1;
  cudaError_t err = cudaGetDeviceCount(&n);
  std::printf("cudart %d: %s\n", CUDART_VERSION, cudaGetErrorName(err));
  return 0;
}
"""

debian_host = pytest.mark.skipif(
    platform.system() != "Linux" or platform.machine() != "x86_64" or not shutil.which("apt-get"),
    reason="CUDA toolkits are assembled from Debian amd64 packages (needs x86_64 Debian with apt-get)")


def _dead_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Send apt's and pip's HTTP(S) to a closed local port: any download now fails."""
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)


def _build(toolkit: InstalledCudaToolkit, archs: tuple[str, ...], work: Path, *, ccbin: bool = True,
           ptx: bool = False) -> Path:
    """Compile KERNEL for `archs` (with `ptx`, plus the highest arch's PTX), link it with g++ into a
    library and an executable, run it."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "kernel.cu").write_text(KERNEL)
    (work / "main.cpp").write_text(MAIN)
    host = ["-ccbin", str(toolkit.host_cxx)] if ccbin else []
    command.run([toolkit.nvcc, *host, "-Xcompiler", "-fPIC", *gencode_flags(archs, ptx=ptx),
                 "-c", "kernel.cu", "-o", "kernel.o"], cwd=work, timeout=900)
    command.run([toolkit.host_cxx, "-shared", "-o", "libkernel.so", "kernel.o",
                 f"-L{toolkit.lib_dir}", "-lcudart", f"-Wl,-rpath,{toolkit.lib_dir}"], cwd=work)
    command.run([toolkit.host_cxx, "main.cpp", "-o", "app", f"-I{toolkit.include_dir}", f"-L{work}",
                 "-lkernel", f"-L{toolkit.lib_dir}", "-lcudart", f"-Wl,-rpath,{work}:{toolkit.lib_dir}"],
                cwd=work)
    ran = command.run([work / "app"], cwd=work)
    assert ran.stdout.startswith("cudart "), ran.stdout
    return work / "libkernel.so"


@pytest.fixture(scope="session")
def toolkit_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.environ.get("SHIPYARD_CACHE"):
        from shipyard.host.toolchains.discover import toolchain_cache

        return toolchain_cache()
    return tmp_path_factory.mktemp("toolchains")


@pytest.fixture(scope="session")
def cuda11(toolkit_cache: Path) -> InstalledCudaToolkit:
    return install_cuda_toolkit("11.8", ARCHS["11.8"], toolkit_cache)


@pytest.fixture(scope="session")
def cuda12(toolkit_cache: Path) -> InstalledCudaToolkit:
    return install_cuda_toolkit("12.4", ARCHS["12.4"], toolkit_cache)


@pytest.fixture(scope="session")
def cuda13(toolkit_cache: Path) -> InstalledCudaToolkit:
    return install_cuda_toolkit("13.0", ARCHS["13.0"], toolkit_cache)


# --- without downloads ------------------------------------------------------------------------------

def test_arch_ranges_live_in_the_arch_table_only(monkeypatch) -> None:
    import tomllib
    from importlib import resources

    text = resources.files("shipyard.resources").joinpath("cuda_toolkits.toml").read_text()
    for version, table in tomllib.loads(text)["toolkits"].items():
        assert not {k for k in table if k.startswith("arch")}, f"{version} repeats cuda_archs.toml"
    table = arch_table()
    for recipe in cuda_toolkit_recipes():
        archs = table[recipe.version]
        assert (recipe.arch_min, recipe.arch_max) == (archs[0], archs[-1]), recipe.version
    # An edit of cuda_archs.toml is what the recipes (and the refusal before a download) follow.
    monkeypatch.setattr("shipyard.host.toolchains.cuda_recipes.arch_table", lambda: {**table, "11.8": ("5.0", "8.0")})
    recipe = next(r for r in cuda_toolkit_recipes() if r.version == "11.8")
    assert (recipe.arch_min, recipe.arch_max, recipe.in_range("3.7")) == ("5.0", "8.0", False)


def test_which_toolkits_cannot_be_had_here_is_the_recipes_to_say(repo, monkeypatch) -> None:
    import dataclasses

    from shipyard.host.toolchains.discover import discover
    from shipyard.host.toolchains.resolve import resolve
    from shipyard.release.matrix import expand
    from shipyard.release.validate import load_spec

    release = load_spec(repo).release
    host = dataclasses.replace(discover(), cuda_toolkits=())
    cells = {c.variant: c for c in expand(release) if c.platform == host.host_platform and c.component == "ember"}
    assert "none can be obtained on this machine (neither Debian nor PyPI carries a CUDA 10.2 nvcc)" in str(
        resolve(cells["cuda10.2"], release, host))
    assert "shipyard toolchain install cuda12" in str(resolve(cells["cuda12"], release, host))
    recipes = tuple(dataclasses.replace(r, unobtainable="gone from every mirror") if r.version == "12.4" else r
                    for r in cuda_toolkit_recipes())
    monkeypatch.setattr("shipyard.host.toolchains.cuda_recipes.cuda_toolkit_recipes", lambda: recipes)
    assert "no CUDA 12.4 toolkit, and none can be obtained on this machine (gone from every mirror)" in str(
        resolve(cells["cuda12"], release, host))


def test_mirror_comes_from_the_machines_deb822_sources(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\n"
        "# http://snapshot.debian.org/archive/debian/20250520T000000Z\n"
        "URIs: http://mirror.example.org/debian/\n"
        "Suites: bookworm bookworm-updates\n"
        "Components: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        "\n"
        "Types: deb\n"
        "URIs: http://mirror.example.org/debian-security\n"
        "Suites: bookworm-security\n"
        "Components: main\n")
    assert debian_mirror(tmp_path) == "http://mirror.example.org/debian"


def test_mirror_skips_security_and_falls_back(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "security.sources").write_text(
        "Types: deb\nURIs: http://deb.debian.org/debian-security\n"
        "Suites: bookworm-security\nComponents: main\n")
    assert debian_mirror(tmp_path) == "http://deb.debian.org/debian"
    (tmp_path / "sources.list").write_text(
        "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
        "http://ftp.example.net/debian bookworm main\n")
    assert debian_mirror(tmp_path) == "http://ftp.example.net/debian"


def test_unsupported_arch_is_refused_before_any_download(tmp_path: Path) -> None:
    with pytest.raises(ToolchainMissing, match=r"CUDA 11\.8 cannot compile SASS for 3\.0.*CUDA 10\.2"):
        install_cuda_toolkit("11.8", ["3.0", "8.6"], tmp_path)
    with pytest.raises(ToolchainMissing, match=r"cannot compile SASS for 10\.0.*3\.5-9\.0.*CUDA 13\.0"):
        install_cuda_toolkit("11.8", ["8.6", "10.0"], tmp_path)
    with pytest.raises(ToolchainMissing, match=r"CUDA 12\.4 cannot compile SASS for 3\.7"):
        install_cuda_toolkit("12.4", ["3.7"], tmp_path)
    with pytest.raises(SpecError, match="major.minor"):
        install_cuda_toolkit("11.8", ["86"], tmp_path)
    assert not (tmp_path / "cuda-11.8").exists() and not (tmp_path / "cuda-12.4").exists()


@pytest.mark.parametrize("version", ["10.2", "11.0"])
def test_unobtainable_toolkits_say_where_they_build(version: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_HOME", raising=False)
    with pytest.raises(ToolchainMissing) as caught:
        install_cuda_toolkit(version, ["7.5"], tmp_path)
    message = str(caught.value)
    assert f"CUDA {version}" in message and "cannot be obtained on this machine" in message
    assert "CI runner or a builder image" in message and "CUDA_HOME" in message
    assert not any(tmp_path.iterdir())


def _fake_nvcc(home: Path, version: str) -> None:
    """`home`/bin/nvcc that answers `--version` as CUDA `version`'s does (and nothing more)."""
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "nvcc").write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {version}, V{version}.0'\n")
    (home / "bin" / "nvcc").chmod(0o755)


def test_cuda_home_of_another_version_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "cuda-13.0"
    _fake_nvcc(home, "13.0")
    monkeypatch.setenv("CUDA_HOME", str(home))
    with pytest.raises(ToolchainMissing, match=rf"{home} holds CUDA 13\.0"):
        install_cuda_toolkit("10.2", ["7.5"], tmp_path / "cache")


def test_find_installed_skips_broken_entries(tmp_path: Path) -> None:
    assert find_installed_cuda_toolkits(tmp_path) == []
    (tmp_path / "cuda-11.8").mkdir()
    (tmp_path / "cuda-11.8" / "toolchain.json").write_text("{not json")
    (tmp_path / "cuda-12.4").mkdir()
    (tmp_path / "cuda-12.4" / "toolchain.json").write_text(json.dumps({
        "schema": 1, "version": "12.4", "nvcc": "bin/nvcc", "cuobjdump": "bin/cuobjdump",
        "include_dir": "include", "lib_dir": "lib64", "host_cxx": "/usr/bin/g++-12",
        "supported_archs": ["9.0"], "verified_archs": ["9.0"], "identity": "x", "components": []}))
    assert find_installed_cuda_toolkits(tmp_path) == []


def test_cuobjdump_needs_a_binary(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="no such file"):
        cuda_sass_archs(tmp_path / "missing.so", Path("/bin/true"))


def test_ptx_goes_with_the_highest_arch_by_number() -> None:
    assert ptx_arch(parse_arch_list("7.5;8.0;8.6;9.0;10.0;12.0")) == "12.0"  # 12.0 > 9.0, not by text
    assert ptx_arch(("9.0", "3.7")) == "9.0"
    assert gencode_flags(("8.6", "10.0"), ptx=True)[-2:] == ["-gencode", "arch=compute_100,code=compute_100"]
    assert "compute_86,code=compute_86" not in " ".join(gencode_flags(("8.6", "10.0"), ptx=True))
    with pytest.raises(ValueError, match="empty arch list"):
        ptx_arch(())


def _wheel_with_fatbin(tmp_path: Path) -> Path:
    """A wheel holding one ELF library with a .nv_fatbin section (what the arch check looks for)."""
    import zipfile

    (tmp_path / "empty.c").write_text("int fixture_symbol;\n")
    (tmp_path / "blob").write_bytes(b"\0" * 16)
    command.run(["gcc", "-shared", "-o", "libdev.so", "empty.c"], cwd=tmp_path)
    command.run(["objcopy", "--add-section", ".nv_fatbin=blob", "libdev.so"], cwd=tmp_path)
    wheel = tmp_path / "devpkg-1.0+cu118-cp311-cp311-manylinux_2_35_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(tmp_path / "libdev.so", "devpkg/libdev.so")
    return wheel


@pytest.mark.parametrize(("sass", "ptx", "expected"), [
    ("sm_80 sm_90", "sm_90", []),
    ("sm_80 sm_90", "", ["CUDA +PTX: missing PTX for sm_90, the highest arch of the list; embed it "
                         "(-gencode arch=compute_90,code=compute_90) so that newer GPUs can JIT-compile the kernels"]),
    ("sm_80 sm_90", "sm_80 sm_90", ["CUDA +PTX: PTX for sm_80: only the highest arch of the list (sm_90) ships PTX"]),
    ("sm_80 sm_86 sm_90", "sm_90", ["CUDA archs: SASS for archs not in the list: sm_86"]),
    ("sm_90", "sm_90", ["CUDA archs: missing SASS for sm_80"]),
])
def test_arch_check_wants_the_sass_list_plus_one_ptx(tmp_path: Path, sass: str, ptx: str,
                                                      expected: list[str]) -> None:
    from shipyard.wheel import checks

    wheel = _wheel_with_fatbin(tmp_path)
    found = DeviceCode(frozenset(sass.split()), frozenset(ptx.split()))
    failures = [str(f) for f in checks.check_cuda_archs(wheel, ("8.0", "9.0"), lambda _: found)]
    assert failures == [f"{wheel.name}: {line}" for line in expected]


# --- every toolkit from a registry ------------------------------------------------------------------

def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_no_recipe_names_a_folder_of_one_machine() -> None:
    import tomllib
    from importlib import resources

    text = resources.files("shipyard.resources").joinpath("cuda_toolkits.toml").read_text()
    for version, table in tomllib.loads(text)["toolkits"].items():
        assert "home" not in table, f"{version}: home = {table['home']!r} exists on one machine only"
        assert not [s for s in _strings(table) if s.startswith(("/", "~"))], version
    for recipe in cuda_toolkit_recipes():
        # A toolkit not assembled from a registry is one no registry carries, and says so.
        assert recipe.from_registry or recipe.unobtainable, recipe.version


def test_cuda_13_comes_from_pypi_whatever_the_host_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from shipyard.host.toolchains.cuda_recipes import cuda_runtime_wheel, plan_cuda_toolkit

    # A CUDA 13.0 on the host (CUDA_HOME) changes nothing: a runner without one gets the same toolkit.
    home = tmp_path / "cuda-13.0"
    _fake_nvcc(home, "13.0")
    monkeypatch.setenv("CUDA_HOME", str(home))
    plan = plan_cuda_toolkit("13.0", "7.5;8.0;8.6;9.0;10.0;12.0")
    assert plan.home is None and plan.recipe.source == "pypi"
    names = {w.split("==")[0] for w in plan.recipe.wheels}
    assert {"nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-runtime", "nvidia-cuda-cuobjdump"} <= names
    assert all("==" in w for w in plan.recipe.wheels)  # exact pins: the same toolkit everywhere
    assert cuda_runtime_wheel("13.0").startswith("nvidia-cuda-runtime==13.0.")


def _fake_entry(cache: Path, version: str, components: list[str]) -> Path:
    """A cache entry whose nvcc answers `--version` as CUDA `version`'s does, proved for 7.5."""
    entry = cache / f"cuda-{version}"
    _fake_nvcc(entry, version)
    (entry / "toolchain.json").write_text(json.dumps({
        "schema": 1, "version": version, "nvcc": "bin/nvcc", "cuobjdump": "bin/cuobjdump",
        "include_dir": "include", "lib_dir": "lib64", "host_cxx": "/bin/sh", "supported_archs": ["7.5"],
        "verified_archs": ["7.5"], "identity": "x", "components": components}))
    return entry


def test_an_entry_made_another_way_than_the_recipe_says_is_assembled_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from shipyard.host.toolchains.cuda_recipes import cuda_toolkit_recipe

    # No index and no config: pip cannot fetch anything, so an install that downloads fails at once.
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "no-wheels"))
    pins = [f"wheel:{w}" for w in cuda_toolkit_recipe("13.0").wheels]
    # The entry the recipe asks for is used as it is, offline.
    same = _fake_entry(tmp_path / "same", "13.0", pins)
    assert install_cuda_toolkit("13.0", ["7.5"], tmp_path / "same").root == same
    # One linked from the host's /usr/local/cuda-13.0 (what shipyard made before 13.0 came from PyPI)
    # is assembled again, and stays in place until a new one is proved.
    linked = _fake_entry(tmp_path / "linked", "13.0", ["home:/usr/local/cuda-13.0", pins[-1]])
    with pytest.raises(ToolError, match="pip download"):
        install_cuda_toolkit("13.0", ["7.5"], tmp_path / "linked")
    assert (linked / "toolchain.json").is_file()


# --- real installs ----------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.cuda_toolkit
@debian_host
@pytest.mark.parametrize("version", ["11.8", "12.4", "13.0"])
def test_toolkit_builds_exactly_the_listed_sass(version: str, request: pytest.FixtureRequest,
                                                tmp_path: Path) -> None:
    toolkit: InstalledCudaToolkit = request.getfixturevalue({"11.8": "cuda11", "12.4": "cuda12",
                                                              "13.0": "cuda13"}[version])
    archs = ARCHS[version]
    assert set(archs) <= set(toolkit.verified_archs)
    assert f"release {version}," in command.run([toolkit.nvcc, "--version"]).stdout
    library = _build(toolkit, archs, tmp_path / "build", ptx=True)
    # This toolkit's cuobjdump sees the SASS of every arch and the one PTX of the highest.
    assert cuda_device_code(library, toolkit.cuobjdump) == DeviceCode(
        frozenset(sm_name(a) for a in archs), frozenset({sm_name(ptx_arch(archs))}))
    # The entry is a CUDA_HOME: headers and libcudart where build systems look for them.
    assert (toolkit.root / "include" / "cuda_runtime.h").is_file()
    assert (toolkit.root / "lib64" / "libcudart.so").exists()
    # nvcc's own view of what it compiles is what the project's arch table says.
    assert toolkit.supported_archs == arch_table()[version]


@pytest.mark.slow
@pytest.mark.cuda_toolkit
@debian_host
@pytest.mark.parametrize("fixture", ["cuda11", "cuda12"])
def test_assembled_nvcc_picks_its_own_host_compiler(fixture: str, request: pytest.FixtureRequest,
                                                    tmp_path: Path) -> None:
    # The system's default gcc (12) is newer than CUDA 11.8 accepts; without -ccbin the assembled
    # nvcc still compiles, because its profile puts the recorded host compiler first.
    toolkit: InstalledCudaToolkit = request.getfixturevalue(fixture)
    library = _build(toolkit, ("8.0",), tmp_path / "build", ccbin=False)
    assert cuda_sass_archs(library, toolkit.cuobjdump) == {"sm_80"}


@pytest.mark.slow
@pytest.mark.cuda_toolkit
@debian_host
def test_second_install_is_instant_and_offline(cuda11: InstalledCudaToolkit, toolkit_cache: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = cuda11.root / "toolchain.json"
    before = manifest.stat().st_mtime_ns
    _dead_network(monkeypatch)
    steps: list[str] = []
    start = time.monotonic()
    again = install_cuda_toolkit("11.8", ARCHS["11.8"], toolkit_cache, progress=steps.append)
    assert time.monotonic() - start < 5
    assert again == cuda11
    assert steps == [f"CUDA 11.8 already installed at {cuda11.root}"]
    assert manifest.stat().st_mtime_ns == before


@pytest.mark.slow
@pytest.mark.cuda_toolkit
@debian_host
def test_new_arch_on_installed_toolkit_is_proved_offline(cuda11: InstalledCudaToolkit, toolkit_cache: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    _dead_network(monkeypatch)
    steps: list[str] = []
    more = install_cuda_toolkit("11.8", ["8.9"], toolkit_cache, progress=steps.append)
    assert "8.9" in more.verified_archs and set(ARCHS["11.8"]) <= set(more.verified_archs)
    assert more.identity == cuda11.identity
    assert [s.split(" (")[0] for s in steps] in (
        ["verify sm_89"], [f"CUDA 11.8 already installed at {more.root}"])
    installed = {t.version: t for t in find_installed_cuda_toolkits(toolkit_cache)}
    assert installed["11.8"].verified_archs == more.verified_archs


@pytest.mark.slow
@pytest.mark.cuda_toolkit
@debian_host
def test_installed_toolkit_refuses_archs_it_cannot_compile(cuda11: InstalledCudaToolkit,
                                                           toolkit_cache: Path) -> None:
    with pytest.raises(ToolchainMissing, match=r"CUDA 11\.8 cannot compile SASS for 10\.0"):
        install_cuda_toolkit("11.8", ["10.0"], toolkit_cache)
    with pytest.raises(ToolchainMissing, match=r"CUDA 11\.8 cannot compile SASS for 3\.0"):
        install_cuda_toolkit("11.8", ["3.0"], toolkit_cache)


@pytest.mark.slow
@pytest.mark.cuda_toolkit
@debian_host
def test_cuobjdump_of_another_generation_is_refused(cuda11: InstalledCudaToolkit,
                                                    cuda13: InstalledCudaToolkit, tmp_path: Path) -> None:
    new = _build(cuda13, ("9.0",), tmp_path / "cu13")
    old = _build(cuda11, ("3.7",), tmp_path / "cu11")
    with pytest.raises(ToolError, match="cuobjdump installed beside the nvcc"):
        cuda_sass_archs(new, cuda11.cuobjdump)
    with pytest.raises(ToolError, match="sm_37"):
        cuda_sass_archs(old, cuda13.cuobjdump)
    assert cuda_sass_archs(tmp_path / "cu11" / "app", cuda11.cuobjdump) == set()


@pytest.mark.slow
@pytest.mark.cuda_toolkit
@debian_host
def test_discovery_finds_the_installed_toolkits(cuda11: InstalledCudaToolkit, cuda12: InstalledCudaToolkit,
                                                toolkit_cache: Path) -> None:
    found = {t.version: t for t in find_installed_cuda_toolkits(toolkit_cache)}
    assert found["11.8"].identity == cuda11.identity and found["12.4"].nvcc == cuda12.nvcc
    assert cuda11.identity != cuda12.identity
    assert any(c.startswith("deb:nvidia-cuda-toolkit=11.8.89~") for c in cuda11.components)
    assert "wheel:nvidia-cuda-runtime-cu12==12.4.127" in cuda12.components


@pytest.mark.slow
@pytest.mark.cuda_toolkit
@debian_host
def test_toolchain_install_leaves_the_process_seeing_a_toolkit_another_one_installed(
        cuda11: InstalledCudaToolkit, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        request: pytest.FixtureRequest) -> None:
    """This process looked at the host before the toolkit was there; another process (a parallel
    nox session, another test worker) then installed it. `shipyard toolchain install` finds it
    ("already installed"), and a build in the same process must find it too: it said "no CUDA
    11.8 toolkit" from the stale look, in a whole run on a bare machine."""
    monkeypatch.setenv("SHIPYARD_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    discover.cache_clear()
    request.addfinalizer(discover.cache_clear)
    if (outside := discover().cuda_toolkit("11.8")) is not None:
        pytest.skip(f"this host has CUDA 11.8 outside shipyard's cache ({outside.root})")
    (tmp_path / "cache" / "toolchains").mkdir(parents=True)
    (tmp_path / "cache" / "toolchains" / "cuda-11.8").symlink_to(cuda11.root)  # the other process's install
    assert main(["--root", str(repo), "toolchain", "install", "cuda11"]) == 0
    found = discover().cuda_toolkit("11.8")
    assert found is not None and found.nvcc == tmp_path / "cache" / "toolchains" / "cuda-11.8" / "bin" / "nvcc", found


@pytest.mark.slow
@pytest.mark.cuda_toolkit
@debian_host
def test_failed_install_leaves_nothing_and_apt_untouched(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # A "g++-11" that is really g++-12: nvcc 11.8 refuses it, so the proof fails after a real
    # cold download, unpack and assembly.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "g++-11").symlink_to(shutil.which("g++-12") or pytest.skip("needs g++-12"))
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    apt_state = [Path("/etc/apt/sources.list.d"), Path("/var/lib/apt/lists")]
    before = {p: sorted((c.name, c.stat().st_mtime_ns) for c in p.iterdir()) for p in apt_state if p.is_dir()}
    cache = tmp_path / "cache"
    steps: list[str] = []
    with pytest.raises(ToolError, match=r"verify CUDA 11\.8: compile failed") as caught:
        install_cuda_toolkit("11.8", ["8.0"], cache, progress=steps.append)
    assert "gcc versions later than 11 are not supported" in caught.value.output
    assert [s.split(":")[0].split(" (")[0] for s in steps] == [
        "download debs", "download wheels", "unpack", "assemble", "verify sm_80"]
    assert [p.name for p in cache.iterdir() if not p.name.endswith(".lock")] == []
    after = {p: sorted((c.name, c.stat().st_mtime_ns) for c in p.iterdir()) for p in apt_state if p.is_dir()}
    assert after == before
