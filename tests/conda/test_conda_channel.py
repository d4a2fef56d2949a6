"""The conda channel (#11 items 4, 5, 8): byte-identical packages by a normalising repack, an
atomic indexed channel, features read back from a channel served over HTTP with a token.

Reproducibility fix used: the normalising repack (shipyard.conda.normalize), not
SOURCE_DATE_EPOCH, which rattler-build 0.73 ignores (it only sets it for build scripts).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import re
import secrets
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
import zstandard

from shipyard import cli
from shipyard.conda import channel as channel_module
from shipyard.conda.channel import conda_artifact_record, publish_packages
from shipyard.conda.features import features_from_extra, list_channel_features, package_extra
from shipyard.conda.normalize import normalize_conda_package
from shipyard.conda.serve import serve_channel
from shipyard.errors import ChannelError
from shipyard.plumbing.hashing import sha256_of
from shipyard.record.manifest import FeatureRecord, merge_artifacts, read_manifest
from shipyard.release.spec import Spec
from shipyard.release.validate import load_spec

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "tests" / "fixtures" / "conda" / "featured" / "recipe.yaml"
EPOCH = 1603800000  # 2020-10-27T12:00:00Z, the fixture release's commit time
COMPONENT, PLATFORM = "ember", "linux-x86_64"  # ember has stable and beta features on linux


@dataclass(frozen=True)
class Built:
    spec: Spec
    cpu_first: Path  # one recipe built twice, into different roots at different times
    cpu_second: Path
    cu118: Path  # the same recipe, another variant tag
    extra: dict


def _build(recipe_dir: Path, out: Path, variant_tag: str) -> Path:
    from rattler_build import Stage0Recipe, ToolConfiguration, VariantConfig

    recipe = Stage0Recipe.from_file(recipe_dir / "recipe.yaml")
    results = recipe.run_build(
        variant_config=VariantConfig.from_yaml(f"variant_tag: [{variant_tag}]\n"), output_dir=out, channels=[],
        tool_config=ToolConfiguration(test_strategy="skip", compression_threads=1), package_format="conda")
    [package] = [p for r in results for p in r.packages]
    return Path(package)


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The fixture recipe with shipyard's extra, built three times (real rattler-build builds)."""
    spec = load_spec(REPO)
    extra = package_extra(spec, component=COMPONENT, platform=PLATFORM, variant="cpu", variant_tag="cpu")
    recipe_dir = tmp_path_factory.mktemp("recipe")
    data = yaml.safe_load(RECIPE.read_text())
    data["extra"] = extra
    (recipe_dir / "recipe.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    first = _build(recipe_dir, tmp_path_factory.mktemp("root-a"), "cpu")
    time.sleep(1.1)  # another second: the zip dates differ too
    second = _build(recipe_dir, tmp_path_factory.mktemp("root-b-longer-name"), "cpu")
    cu118 = _build(recipe_dir, tmp_path_factory.mktemp("root-c"), "cu118")
    return Built(spec, first, second, cu118, extra)


def _copy(package: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy2(package, folder / package.name))


def _normalised(package: Path, folder: Path) -> Path:
    copy = _copy(package, folder)
    normalize_conda_package(copy, epoch=EPOCH)
    return copy


def _snapshot(folder: Path) -> dict[str, object]:
    """Every entry under `folder`: symlink targets, file bytes and modes, folders."""
    out: dict[str, object] = {}
    for path in sorted(folder.rglob("*")):
        key = path.relative_to(folder).as_posix()
        if path.is_symlink():
            out[key] = ("link", os.readlink(path))
        elif path.is_file():
            out[key] = ("file", path.read_bytes(), stat.S_IMODE(path.stat().st_mode))
        else:
            out[key] = ("dir",)
    return out


def _repodata(channel: Path, subdir: str = "noarch") -> tuple[dict, dict]:
    plain = json.loads((channel / subdir / "repodata.json").read_bytes())
    packed = json.loads(zstandard.ZstdDecompressor().decompressobj().decompress(
        (channel / subdir / "repodata.json.zst").read_bytes()))
    return plain, packed


# --- reproducibility ---------------------------------------------------------------------------

@pytest.mark.slow
def test_the_repack_puts_the_sbom_under_info_and_stays_reproducible(built: Built, tmp_path: Path) -> None:
    from rattler.package import IndexJson

    from shipyard.supply.sbom import CONDA_SBOM, conda_sbom, read_conda_sbom

    copies = [_copy(p, tmp_path / n) for p, n in ((built.cpu_first, "a"), (built.cpu_second, "b"))]
    for copy in copies:
        assert normalize_conda_package(copy, epoch=EPOCH, info_files={CONDA_SBOM: conda_sbom(copy, epoch=EPOCH)})
    assert copies[0].read_bytes() == copies[1].read_bytes()
    # Idempotent: the SBOM of the repacked package is the same bytes, and replaces itself.
    assert not normalize_conda_package(copies[0], epoch=EPOCH,
                                       info_files={CONDA_SBOM: conda_sbom(copies[0], epoch=EPOCH)})
    index = IndexJson.from_package_archive(copies[0])
    listing = read_conda_sbom(copies[0])
    assert listing is not None and (listing.subject, listing.version) == (index.name.normalized, str(index.version))



@pytest.mark.slow
def test_two_clean_builds_are_byte_identical_after_the_normalising_repack(built: Built, tmp_path: Path) -> None:
    from rattler.package import AboutJson, IndexJson
    from rattler.package_streaming import extract

    assert built.cpu_first.name == built.cpu_second.name
    assert built.cpu_first.read_bytes() != built.cpu_second.read_bytes(), "rattler-build became reproducible?"
    a = _copy(built.cpu_first, tmp_path / "a")
    b = _copy(built.cpu_second, tmp_path / "b")
    assert normalize_conda_package(a, epoch=EPOCH) is True
    assert normalize_conda_package(b, epoch=EPOCH) is True
    assert a.read_bytes() == b.read_bytes()
    assert normalize_conda_package(a, epoch=EPOCH) is False  # idempotent: nothing left to change
    # Still a package py-rattler reads and extracts, with the same payload and metadata.
    index = IndexJson.from_package_archive(a)
    assert int(index.timestamp.timestamp()) == EPOCH
    assert (index.name.normalized, str(index.version), str(index.build)) == (
        "shipyard-featured", "0.1.0", built.cpu_first.name.removesuffix(".conda").split("-")[-1])
    for package, dest in ((a, tmp_path / "x-norm"), (built.cpu_first, tmp_path / "x-raw")):
        extract(package, dest)
    assert (tmp_path / "x-norm/share/shipyard-featured/message.txt").read_text() == "featured cpu\n"
    for name in ("share/shipyard-featured/message.txt", "info/paths.json", "info/about.json"):
        assert (tmp_path / "x-norm" / name).read_bytes() == (tmp_path / "x-raw" / name).read_bytes(), name
    about = AboutJson.from_path(tmp_path / "x-norm/info/about.json")
    assert about.extra == built.extra
    rendered = (tmp_path / "x-norm/info/recipe/rendered_recipe.yaml").read_text()
    assert "timestamp: 2020-10-27T12:00:00Z" in rendered
    assert str(built.cpu_first.parent.parent) not in rendered  # the build root is gone
    raw_rendered = (tmp_path / "x-raw/info/recipe/rendered_recipe.yaml").read_text()
    build_id = re.compile(r"rattler-build_shipyard-featured_\d{9,}")  # the build folder's time, in ms
    assert build_id.search(raw_rendered) and not build_id.search(rendered)


# --- publish ---------------------------------------------------------------------------------

@pytest.mark.slow
def test_publish_indexes_every_package_with_sha256_and_size(built: Built, tmp_path: Path) -> None:
    cpu, cu = _normalised(built.cpu_first, tmp_path / "in"), _normalised(built.cu118, tmp_path / "in")
    assert stat.S_IMODE(built.cpu_first.stat().st_mode) == 0o600  # what rattler-build writes
    channel = tmp_path / "dist" / "conda"
    update = publish_packages(channel, [cpu, cu])
    assert update.added == (f"noarch/{cpu.name}", f"noarch/{cu.name}") and not update.replaced
    assert channel.is_symlink() and os.readlink(channel) == ".conda-gen-1"
    plain, packed = _repodata(channel)
    assert plain == packed
    assert set(plain["packages.conda"]) == {cpu.name, cu.name}
    for name, record in plain["packages.conda"].items():
        published = channel / "noarch" / name
        assert record["sha256"] == sha256_of(published) == sha256_of(tmp_path / "in" / name)
        assert record["size"] == published.stat().st_size
    for path in (channel / "noarch").iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path.name


@pytest.mark.slow
def test_republishing_a_rebuilt_package_swaps_the_channel_atomically(built: Built, tmp_path: Path) -> None:
    channel = tmp_path / "dist" / "conda"
    raw = _copy(built.cpu_first, tmp_path / "raw")  # same file name, other bytes than its normalised self
    cu = _normalised(built.cu118, tmp_path / "in")
    publish_packages(channel, [raw, cu])
    kept_inode = (channel / "noarch" / cu.name).stat().st_ino
    rebuilt = _normalised(built.cpu_first, tmp_path / "in")
    update = publish_packages(channel, [rebuilt])
    assert update.replaced == (f"noarch/{rebuilt.name}",) and update.added == ()
    assert update.packages == tuple(sorted((f"noarch/{rebuilt.name}", f"noarch/{cu.name}")))
    assert os.readlink(channel) == ".conda-gen-2"
    assert sorted(p.name for p in channel.parent.iterdir()) == [".conda-gen-2", ".conda.lock", "conda"]
    assert (channel / "noarch" / rebuilt.name).read_bytes() == rebuilt.read_bytes()
    assert (channel / "noarch" / cu.name).stat().st_ino == kept_inode  # kept as a hard link, not copied
    plain, _ = _repodata(channel)
    assert plain["packages.conda"][rebuilt.name]["sha256"] == sha256_of(rebuilt)
    again = publish_packages(channel, [rebuilt])
    assert again.unchanged == (f"noarch/{rebuilt.name}",) and not again.added and not again.replaced


@pytest.mark.slow
@pytest.mark.parametrize("failure", ["index raises", "verify raises", "damaged package"])
def test_a_failed_publish_leaves_the_channel_as_it_was(built: Built, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch, failure: str) -> None:
    channel = tmp_path / "dist" / "conda"
    publish_packages(channel, [_normalised(built.cu118, tmp_path / "in")])
    before = _snapshot(tmp_path / "dist")
    incoming = _normalised(built.cpu_first, tmp_path / "in")
    expected: type[BaseException] = RuntimeError
    if failure == "index raises":
        def boom(folder: Path) -> None:
            assert (folder / "noarch" / incoming.name).is_file()  # mid-publish: staged, not yet indexed
            raise RuntimeError("injected")
        monkeypatch.setattr(channel_module, "_index", boom)
    elif failure == "verify raises":
        def broken(folder: Path) -> None:
            assert (folder / "noarch" / "repodata.json").is_file()  # indexed, not yet switched
            raise RuntimeError("injected")
        monkeypatch.setattr(channel_module, "verify_index", broken)
    else:
        incoming.write_bytes(incoming.read_bytes()[:200])
        expected = ChannelError
    with pytest.raises(expected):
        publish_packages(channel, [incoming])
    assert _snapshot(tmp_path / "dist") == before
    assert sorted(p.name for p in channel.parent.iterdir()) == [".conda-gen-1", ".conda.lock", "conda"]


@pytest.mark.slow
def test_a_plain_channel_folder_is_migrated_without_losing_a_package(built: Built, tmp_path: Path) -> None:
    from rattler.index import index_fs

    channel = tmp_path / "dist" / "conda"
    old = _normalised(built.cu118, tmp_path / "in")
    _copy(old, channel / "noarch")  # an older layout: a plain folder, indexed in place
    asyncio.run(index_fs(channel, write_zst=True, write_shards=False, force=True))
    new = _normalised(built.cpu_first, tmp_path / "in")
    update = publish_packages(channel, [new])
    assert update.added == (f"noarch/{new.name}",)
    assert channel.is_symlink()
    assert sorted(p.name for p in channel.parent.iterdir()) == [".conda-gen-1", ".conda.lock", "conda"]
    plain, _ = _repodata(channel)
    assert set(plain["packages.conda"]) == {old.name, new.name}
    for package in (old, new):
        assert (channel / "noarch" / package.name).read_bytes() == package.read_bytes()
        assert plain["packages.conda"][package.name]["sha256"] == sha256_of(package)


@pytest.mark.slow
def test_the_manifest_records_a_published_package(built: Built, tmp_path: Path) -> None:
    channel = tmp_path / "dist" / "conda"
    package = _normalised(built.cpu_first, tmp_path / "in")
    publish_packages(channel, [package])
    features = tuple(FeatureRecord(id=i, title=t, status=s)
                     for i, t, s in built.spec.features_for(COMPONENT, PLATFORM))
    record = conda_artifact_record(
        package, channel=channel, cell_id="ember-cpu-linux-x86_64-conda", component=COMPONENT, variant="cpu",
        variant_tag="cpu", platform=PLATFORM, python=None, version="0.1.0", features=features,
        tests=None, build={"cached": False})
    assert (record.package_type, record.path) == ("conda", f"conda/noarch/{package.name}")
    assert (record.sha256, record.size) == (sha256_of(package), package.stat().st_size)
    merge_artifacts(tmp_path / "dist" / "manifest.json", release="ember", version="0.1.0", records=[record])
    manifest = read_manifest(tmp_path / "dist" / "manifest.json")
    assert manifest is not None and manifest.by_cell()["ember-cpu-linux-x86_64-conda"].features == features
    with pytest.raises(ChannelError, match="publish it"):
        conda_artifact_record(_normalised(built.cu118, tmp_path / "other"), channel=channel, cell_id="x",
                              component=COMPONENT, variant="cpu", variant_tag="cpu", platform=PLATFORM,
                              python=None, version="0.1.0", features=(), tests=None, build={})


# --- a served channel ------------------------------------------------------------------------

@pytest.mark.slow
def test_features_are_listed_from_a_channel_served_with_a_token(built: Built, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from rattler import Channel, Gateway, solve

    channel = tmp_path / "dist" / "conda"
    publish_packages(channel, [_normalised(p, tmp_path / "in") for p in (built.cpu_first, built.cu118)])
    expected = built.spec.features_for(COMPONENT, PLATFORM)
    assert {status for _, _, status in expected} >= {"stable", "beta"}
    token = secrets.token_urlsafe(24)
    with serve_channel({"ember": channel}, token=token) as base:
        url = f"{base}ember/"
        assert cli.main(["conda", "features", "--channel", url]) == 0
        table = capsys.readouterr().out
        rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in table.splitlines() if "│" in line]
        listed = {(r[0], r[2], r[3], r[4], r[5]) for r in rows if r[0]}
        builds = {p.name.removesuffix(".conda").split("-")[-1] for p in (built.cpu_first, built.cu118)}
        # Both builds carry the fixture's one extra, which names the cpu variant.
        assert listed == {("shipyard-featured", b, "cpu", fid, status) for b in builds for fid, _, status in expected}
        assert token not in table
        assert cli.main(["conda", "features", "--channel", url, "--json"]) == 0
        as_json = json.loads(capsys.readouterr().out)
        cpu = next(p for p in as_json if p["build"].startswith("cpu_"))
        assert [(f["id"], f["title"], f["status"]) for f in cpu["features"]] == expected
        assert list_channel_features(str(channel)) == list_channel_features(url)  # a folder reads the same

        wrong = f"{base.split('/t/')[0]}/t/wrong-token-wrong-token/ember/"
        assert cli.main(["conda", "features", "--channel", wrong]) == 3
        refused = capsys.readouterr()
        assert "403" in refused.err and "token" in refused.err

        records = asyncio.run(solve([Channel(url)], ["shipyard-featured * cu118_*"],
                                    gateway=Gateway(cache_dir=tmp_path / "gateway")))
        assert [(r.name.normalized, str(r.build)) for r in records] == [
            ("shipyard-featured", built.cu118.name.removesuffix(".conda").split("-")[-1])]
        assert records[0].url == f"{url}noarch/{built.cu118.name}"


def _get(port: int, path: str, method: str = "GET", headers: dict[str, str] | None = None
         ) -> tuple[int, bytes, http.client.HTTPResponse]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request(method, path, headers=headers or {})  # sent as written: no client-side normalising
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, body, response


def test_the_channel_server_refuses_what_is_not_a_file_of_its_channels(tmp_path: Path) -> None:
    folder = tmp_path / "dist" / "conda" / "noarch"
    folder.mkdir(parents=True)
    payload = bytes(range(256)) * 4
    (folder / "repodata.json").write_bytes(payload)
    (tmp_path / "dist" / "secret.txt").write_text("not served")
    token = secrets.token_urlsafe(24)
    with serve_channel({"ember": tmp_path / "dist" / "conda"}, token=token) as base:
        port = int(base.split(":")[2].split("/")[0])
        ok = f"/t/{token}/ember/noarch/repodata.json"
        assert base.startswith("http://127.0.0.1:")
        assert _get(port, ok)[:2] == (200, payload)
        status, body, response = _get(port, ok, headers={"Range": "bytes=10-19"})
        assert (status, body, response.getheader("Content-Range")) == (206, payload[10:20], "bytes 10-19/1024")
        assert _get(port, ok, headers={"Range": "bytes=-5"})[:2] == (206, payload[-5:])
        assert _get(port, ok, headers={"Range": "bytes=2000-"})[0] == 416
        status, body, response = _get(port, ok, method="HEAD")
        assert (status, body, response.getheader("Content-Length")) == (200, b"", "1024")
        refused = {
            f"/t/{token}/../x": 400,
            f"/t/{token}/ember/../secret.txt": 400,
            f"/t/{token}/ember/%2e%2e/secret.txt": 400,
            f"/t/{token}/ember/noarch/": 404,  # no listings
            f"/t/{token}/ember/": 404,
            f"/t/{token}/other/noarch/repodata.json": 404,
            "/ember/noarch/repodata.json": 403,  # no token
            "/t/ember/noarch/repodata.json": 403,
            f"/t/{token[:-1]}{'y' if token.endswith('x') else 'x'}/ember/noarch/repodata.json": 403,  # wrong
        }
        assert {path: _get(port, path)[0] for path in refused} == refused
        assert _get(port, ok, method="POST")[0] == 501
        assert _get(port, "/t/" + token + "/" + "a" * 9000)[0] == 414
        assert _get(port, ok, headers={f"X-Big-{i}": "v" * 1000 for i in range(20)})[0] == 431


@pytest.mark.slow
def test_concurrent_publishes_both_land(built: Built, tmp_path: Path) -> None:
    import threading

    channel = tmp_path / "dist" / "conda"
    packages = [_normalised(p, tmp_path / "in") for p in (built.cpu_first, built.cu118)]
    errors: list[BaseException] = []

    def publish(package: Path) -> None:
        try:
            publish_packages(channel, [package])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=publish, args=(p,)) for p in packages]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    plain, _ = _repodata(channel)
    assert set(plain["packages.conda"]) == {p.name for p in packages}
    assert sorted(p.name for p in channel.parent.iterdir()) == [".conda-gen-2", ".conda.lock", "conda"]


def test_a_noarch_package_carries_each_features_status_per_platform() -> None:
    spec = load_spec(REPO)
    platforms = list(spec.release.platforms)
    extra = package_extra(spec, component=COMPONENT, platform=platforms, variant="any", variant_tag="any")
    listed = {(f.id, f.platform, f.status) for f in features_from_extra(extra)}
    expected = {(fid, platform, status) for platform in platforms
                for fid, _, status in spec.features_for(COMPONENT, platform)}
    assert listed == expected
    assert "prototype" in {status for _, _, status in listed}  # ember's Windows distributed support
    assert features_from_extra({"other": 1}) == () == features_from_extra(None)
