"""The `s3` target kind (#51 item 5): the static tree's layout in an S3 bucket, through boto3,
against moto's S3 server on loopback. moto is a stand-in for an S3-compatible store (it speaks the
S3 API, conditional writes and checksums included, and checks no credentials); no real store is
reachable from here. What users of the bucket would read is what is asserted: the objects, the
pages' entries and their sha256, a re-publish that changes nothing, a name that never changes its
bytes, and two publishers merging into one page."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import zstandard
from support.connect_proxy import connect_proxy
from support.oidc_standin import oidc_standin
from support.release_copy import point_release_yaml
from support.s3_standin import BUCKET, STATIC_TARGET, S3StandIn, s3_standin
from support.synthetic_release import build_conda_packages, features, make_wheel, record, write_manifest

from shipyard.ci.workflow import workflows
from shipyard.cli import main
from shipyard.plumbing.retry import RetryPolicy
from shipyard.publish.credentials import Credentials
from shipyard.publish.journal import Journal
from shipyard.publish.s3_objects import S3Objects
from shipyard.publish.target import TargetContext
from shipyard.release.validate import load_spec
from shipyard.wheel.index import root_pages

VERSION = "1.7.0.dev20261206"

pytest.importorskip("moto.server", reason="moto (a test dependency) is not installed: pip install -e '.[test]'")


@pytest.fixture(scope="module")
def s3() -> Iterator[S3StandIn]:
    with s3_standin() as running:
        yield running


def _root(tmp_path: Path, s3: S3StandIn, prefix: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "root"
    point_release_yaml(root, {STATIC_TARGET: s3.target(prefix)})
    for name, value in s3.credentials().items():
        monkeypatch.setenv(name, value)
    return root


def _dist(folder: Path, projects: tuple[str, ...], payload: str = "", version: str = VERSION) -> Path:
    dist = folder / "dist"
    records = []
    for project in projects:
        for variant, tag in (("cpu", "cpu"), ("cuda11", "cu118")):
            wheel = make_wheel(dist / "whl" / tag / project, project, f"{version}+{tag}", payload=payload)
            records.append(record(dist, wheel, component=project, package_type="wheel", variant=variant, tag=tag,
                                  tests=features(), version=version))
    write_manifest(dist, records, version)
    return dist


def _publish(root: Path, dist: Path, state: Path) -> int:
    return main(["--root", str(root), "publish", "--channel", "nightly", "--target", "wheels-tree",
                 "--dist", str(dist), "--state", str(state)])


def _page(client, key: str) -> dict:  # type: ignore[no-untyped-def]
    return json.loads(client.get_object(Bucket=BUCKET, Key=key)["Body"].read())


def test_a_release_goes_to_the_bucket_in_the_trees_layout_and_a_name_never_changes_its_bytes(
        s3, tmp_path, monkeypatch, capsys):
    client = s3.client
    root = _root(tmp_path, s3, "one/whl/", monkeypatch)
    dist = _dist(tmp_path / "a", ("uocore", "uovision"))
    assert _publish(root, dist, tmp_path / "state") == 0, capsys.readouterr()
    out = " ".join(capsys.readouterr().out.split())
    assert f"s3://{BUCKET}/one/whl/nightly/" in out and f"{VERSION} on nightly: 4 files published" in out, out
    manifest = json.loads((dist / "manifest.json").read_text())
    for artifact in manifest["artifacts"]:
        tag, project, name = artifact["variant_tag"], artifact["component"], artifact["name"]
        body = client.get_object(Bucket=BUCKET, Key=f"one/whl/nightly/{tag}/{project}/{name}")["Body"].read()
        assert hashlib.sha256(body).hexdigest() == artifact["sha256"]
        page = _page(client, f"one/whl/nightly/{tag}/{project}/index.json")
        assert {f["filename"]: f["hashes"]["sha256"] for f in page["files"]} == {name: artifact["sha256"]}
        html = client.get_object(Bucket=BUCKET, Key=f"one/whl/nightly/{tag}/{project}/index.html")["Body"].read()
        assert f"{quote(name)}#sha256={artifact['sha256']}".encode() in html
    root_page = _page(client, "one/whl/nightly/cpu/index.json")
    assert [p["name"] for p in root_page["projects"]] == ["uocore", "uovision"]
    # Unchanged: nothing is written again.
    assert _publish(root, dist, tmp_path / "state2") == 0
    assert f"{VERSION} on nightly: 0 files published, 4 already there" in " ".join(capsys.readouterr().out.split())
    # Other bytes under a published name: exit 8 naming both, and what is served stays.
    other = _dist(tmp_path / "b", ("uocore",), payload="other bytes")
    assert _publish(root, other, tmp_path / "state3") == 8
    err = " ".join(capsys.readouterr().err.split())
    first = next(a for a in manifest["artifacts"] if a["component"] == "uocore" and a["variant_tag"] == "cpu")
    assert first["sha256"] in err and "a published file name never changes its bytes" in err, err
    body = client.get_object(Bucket=BUCKET, Key=f"one/whl/nightly/cpu/uocore/{first['name']}")["Body"].read()
    assert hashlib.sha256(body).hexdigest() == first["sha256"]


def test_two_publishers_of_different_projects_keep_each_others_files_on_a_shared_page(s3, tmp_path, monkeypatch):
    """The root page of a tag is written only if it is still the page read (If-Match its ETag): a
    publisher whose page another changed in between reads it again and merges."""
    root = _root(tmp_path, s3, "two/whl/", monkeypatch)
    target = load_spec(root).release.publish["wheels-tree"]
    ctx = TargetContext(target, root, Credentials(username="test", password=secrets.token_urlsafe(18)), RetryPolicy(),
                        Journal(tmp_path / "journal.jsonl"), str, lambda _: None)
    objects = S3Objects(ctx)
    key = "two/whl/nightly/cpu/index.json"
    reads = []

    def made_from(page):  # type: ignore[no-untyped-def]
        reads.append(page)
        if len(reads) == 1:  # another publisher writes its project in between this read and this write
            s3.client.put_object(Bucket=BUCKET, Key=key,
                                 Body=json.dumps({"meta": {"api-version": "1.1"}, "projects": [{"name": "theirs"}]}))
        names = sorted({p["name"] for p in (page or {}).get("projects", [])} | {"mine"})
        return {key: (root_pages(names)["index.json"].encode(), "application/json")}

    objects.merge_json(key, made_from)
    assert len(reads) == 2 and reads[0] is None
    assert [p["name"] for p in _page(s3.client, key)["projects"]] == ["mine", "theirs"]


def test_a_promotion_copies_the_release_within_the_bucket_byte_for_byte(s3, tmp_path, monkeypatch, capsys):
    root = _root(tmp_path, s3, "three/whl/", monkeypatch)
    dist = _dist(tmp_path / "a", ("uocore",), version="1.7.0")
    assert main(["--root", str(root), "publish", "--channel", "nightly", "--target", "wheels-tree", "--dist",
                 str(dist), "--state", str(tmp_path / "state")]) == 0, capsys.readouterr()
    assert main(["--root", str(root), "promote", "1.7.0", "--from", "nightly", "--to", "test", "--target",
                 "wheels-tree", "--dist", str(dist), "--state", str(tmp_path / "state")]) == 0, capsys.readouterr()
    for artifact in json.loads((dist / "manifest.json").read_text())["artifacts"]:
        folder = f"three/whl/test/{artifact['variant_tag']}/uocore"
        page = _page(s3.client, f"{folder}/index.json")
        assert [(f["filename"], f["hashes"]["sha256"]) for f in page["files"]] == [(artifact["name"],
                                                                                     artifact["sha256"])]
        assert hashlib.sha256(s3.object_bytes(f"{folder}/{artifact['name']}")).hexdigest() == artifact["sha256"]


CONDA_TARGET = ("    kind: conda\n    url: http://127.0.0.1:8082/conda/\n    path: dist/site/conda\n"
                "    token_env: SHIPYARD_CONDA_TOKEN\n")


@pytest.mark.slow
def test_a_conda_channel_in_the_bucket_is_what_a_solver_reads_from_it(s3, tmp_path, monkeypatch, capsys):
    """`layout: conda`: the package once, then repodata.json (and .zst) merged; rattler solves
    from the bucket's URL (moto serves it over HTTP as a bucket's website would)."""
    from rattler import Channel, Gateway, solve

    [package] = build_conda_packages(tmp_path / "built", ["cpu"])
    root = _root(tmp_path, s3, "four/whl/", monkeypatch)
    text = (root / "release.yaml").read_text().replace(CONDA_TARGET, s3.target("four/conda/", layout="conda"))
    (root / "release.yaml").write_text(text)
    dist = tmp_path / "dist"
    placed = dist / "conda" / "noarch" / package.name
    placed.parent.mkdir(parents=True)
    shutil.copyfile(package, placed)
    write_manifest(dist, [record(dist, placed, component="ember", package_type="conda", variant="cpu", tag="cpu",
                                 tests=features())])
    assert main(["--root", str(root), "publish", "--channel", "nightly", "--target", "conda-channel", "--dist",
                 str(dist), "--state", str(tmp_path / "state")]) == 0, capsys.readouterr()
    repodata = json.loads(s3.object_bytes("four/conda/nightly/noarch/repodata.json"))
    entry = repodata["packages.conda"][package.name]
    assert entry["sha256"] == hashlib.sha256(package.read_bytes()).hexdigest()
    assert json.loads(zstandard.ZstdDecompressor().decompressobj().decompress(
        s3.object_bytes("four/conda/nightly/noarch/repodata.json.zst"))) == repodata
    records = asyncio.run(solve([Channel(f"{s3.endpoint}/{BUCKET}/four/conda/nightly")], [entry["name"]],
                                platforms=["linux-64", "noarch"], gateway=Gateway(cache_dir=tmp_path / "cache")))
    assert [(r.name.normalized, r.sha256.hex() if isinstance(r.sha256, bytes) else str(r.sha256))
            for r in records] == [(entry["name"], entry["sha256"])]
    # Unchanged: nothing again; the channel still lists the package once.
    assert main(["--root", str(root), "publish", "--channel", "nightly", "--target", "conda-channel", "--dist",
                 str(dist), "--state", str(tmp_path / "state2")]) == 0
    assert "0 files published, 1 already there" in " ".join(capsys.readouterr().out.split())


def test_a_role_assumed_with_the_jobs_oidc_token_publishes_without_an_access_key(s3, tmp_path, monkeypatch, capsys):
    """role_arn: GitHub's ID token (the stand-in's, for audience sts.amazonaws.com) traded at the
    store's STS (moto's) for the role's temporary credentials; no access key anywhere."""
    with oidc_standin() as oidc:
        monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_URL", oidc.request_url)
        monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN", oidc.request_token)
        root = tmp_path / "root"
        role = "arn:aws:iam::123456789012:role/shipyard-publish"
        point_release_yaml(root, {STATIC_TARGET: s3.target("five/whl/").split("    username_env")[0]
                                  + f"    role_arn: {role}\n"})
        dist = _dist(tmp_path / "a", ("uocore",))
        assert _publish(root, dist, tmp_path / "state") == 0, capsys.readouterr()
        out, err = capsys.readouterr()
        assert oidc.request_token not in out + err and not any(jwt in out + err for jwt in oidc.issued)
        [jwt] = oidc.issued
        claims = json.loads(base64.urlsafe_b64decode(jwt.split(".")[1] + "=="))
        assert claims["aud"] == "sts.amazonaws.com"
    name = json.loads((dist / "manifest.json").read_text())["artifacts"][0]["name"]
    assert s3.object_bytes(f"five/whl/nightly/cpu/uocore/{name}")
    # The publish job of the generated workflow may ask for that token.
    workflow = workflows(load_spec(root))[Path(".github/workflows/release.yml")]
    assert workflow["jobs"]["publish"]["permissions"]["id-token"] == "write"


def test_a_role_named_by_a_repository_variable_is_read_before_any_upload_and_then_assumed(
        s3, tmp_path, monkeypatch, capsys):
    """role_arn_env: release.yaml names the variable (ember's: SHIPYARD_S3_ROLE_ARN, a repository
    variable the publish job passes), not the account. Unset or not an ARN: one line naming the key
    and the variable, exit 2, nothing in the bucket; set: the role is assumed as role_arn's is."""
    with oidc_standin() as oidc:
        monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_URL", oidc.request_url)
        monkeypatch.setenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN", oidc.request_token)
        root = tmp_path / "root"
        point_release_yaml(root, {STATIC_TARGET: s3.target("six/whl/").split("    username_env")[0]
                                  + "    role_arn_env: SHIPYARD_S3_ROLE_ARN\n"})
        dist = _dist(tmp_path / "a", ("uorole",))
        monkeypatch.delenv("SHIPYARD_S3_ROLE_ARN", raising=False)
        for value, says in ((None, "the environment variable SHIPYARD_S3_ROLE_ARN is not set"),
                            ("role/shipyard-publish", "SHIPYARD_S3_ROLE_ARN holds no role ARN")):
            if value is not None:
                monkeypatch.setenv("SHIPYARD_S3_ROLE_ARN", value)
            assert _publish(root, dist, tmp_path / "state") == 2
            lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
            assert len(lines) == 1 and "publish.wheels-tree.role_arn_env: " in lines[0] and says in lines[0], lines
            assert not list(s3.client.list_objects_v2(Bucket=BUCKET, Prefix="six/").get("Contents", []))
        monkeypatch.setenv("SHIPYARD_S3_ROLE_ARN", "arn:aws:iam::123456789012:role/shipyard-publish")
        assert _publish(root, dist, tmp_path / "state") == 0, capsys.readouterr()
        assert len(oidc.issued) == 1
    name = json.loads((dist / "manifest.json").read_text())["artifacts"][0]["name"]
    assert s3.object_bytes(f"six/whl/nightly/cpu/uorole/{name}")
    publish = workflows(load_spec(root))[Path(".github/workflows/release.yml")]["jobs"]["publish"]
    assert publish["permissions"]["id-token"] == "write"
    step = next(s for s in publish["steps"] if "shipyard publish" in s.get("run", ""))
    assert step["env"]["SHIPYARD_S3_ROLE_ARN"] == "${{ vars.SHIPYARD_S3_ROLE_ARN }}"


def test_an_s3_target_says_what_it_lacks_or_holds_too_much_of():
    from pydantic import ValidationError

    from shipyard.release.destinations import PublishTarget

    base = {"name": "tree", "kind": "s3", "url": "https://download.example.org/whl/"}
    for extra, says in (({}, "an s3 target needs bucket"),
                        ({"bucket": BUCKET, "role_arn": "arn:aws:iam::123456789012:role/r", "username_env": "A",
                          "password_env": "B"}, "from role_arn (the job's OIDC token) or from username_env"),
                        ({"bucket": BUCKET, "username_env": "A"}, "names both username_env and password_env"),
                        ({"bucket": BUCKET, "role_arn": "role/r"}, "role_arn"),
                        ({"bucket": BUCKET, "role_arn": "arn:aws:iam::123456789012:role/r", "role_arn_env": "R"},
                         "names its role once: role_arn (the ARN) or role_arn_env"),
                        ({"bucket": BUCKET, "role_arn_env": "R", "username_env": "A", "password_env": "B"},
                         "from role_arn (the job's OIDC token) or from username_env"),
                        ({"bucket": BUCKET, "endpoint_url": "s3.example.org"}, "endpoint_url")):
        with pytest.raises(ValidationError, match=re.escape(says)):
            PublishTarget(**base, **extra)
    with pytest.raises(ValidationError, match="belong to an s3 target"):
        PublishTarget(name="idx", kind="devpi", url="https://devpi.example.org/", username_env="A", password_env="B",
                      bucket=BUCKET)
    with pytest.raises(ValidationError, match="role_arn and role_arn_env belong to an s3 target"):
        PublishTarget(name="idx", kind="devpi", url="https://devpi.example.org/", username_env="A", password_env="B",
                      role_arn_env="R")
    assert PublishTarget(**base, bucket=BUCKET, layout="conda").route == "s3-conda"


def test_the_bucket_is_reached_through_the_proxy_the_environment_names(s3, tmp_path, monkeypatch, capsys):
    """#52 item 4 for the s3 kind: HTTP_PROXY (proxy.py on loopback) carries boto3's requests."""
    for name in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    root = _root(tmp_path, s3, "six/whl/", monkeypatch)
    with connect_proxy(tmp_path) as (proxy, log):
        monkeypatch.setenv("HTTP_PROXY", proxy)
        assert _publish(root, _dist(tmp_path / "a", ("uocore",)), tmp_path / "state") == 0, capsys.readouterr()
        carried = log.read_text()
    assert s3.endpoint.removeprefix("http://") in carried, carried


def test_a_rate_limit_is_waited_for_as_its_retry_after_asks(s3, tmp_path, monkeypatch, capsys):
    """#52 item 5 for the s3 kind: a bare HTTP 429 (a proxy's or a CDN's, no S3 error code) is tried
    again after the wait its Retry-After asks (2 s here), within the policy's tries. Fails on the
    code before: botocore's own retry tried again after its jittered backoff (under 1 s on a first
    retry), before the wait the store asked for."""
    import time

    from support.fault_proxy import FaultProxy

    at: list[float] = []

    def plan(number: int, line: str) -> str:
        at.append(time.monotonic())
        return "429" if len(at) in (1, 3) else "pass"

    port = int(s3.endpoint.rsplit(":", 1)[1])
    with FaultProxy(port, plan, retry_after=2) as proxy:
        root = _root(tmp_path, S3StandIn(proxy.url, s3.client), "seven/whl/", monkeypatch)
        code = _publish(root, _dist(tmp_path / "a", ("ratecore",)), tmp_path / "state")
        assert code == 0, capsys.readouterr()
        assert proxy.injected["429"] == 2, proxy.injected
    waits = [round(at[1] - at[0], 2), round(at[3] - at[2], 2)]  # from each 429 to the try after it
    assert min(waits) >= 2.0, waits
    page = _page(s3.client, "seven/whl/nightly/cpu/ratecore/index.json")
    assert [f["filename"] for f in page["files"]] == [f"ratecore-{VERSION}+cpu-py3-none-any.whl"]


def test_a_store_that_keeps_failing_is_given_up_on_in_one_line_naming_the_tries(s3, tmp_path, monkeypatch, capsys):
    """botocore retries a 503 itself (standard mode): `--tries` bounds its attempts, all of them,
    and the one line says it gave up and on what. Before: botocore's `max_attempts` counted retries
    (one try more than asked) and the line said `503` alone, as if nothing had been tried again."""
    from support.fault_proxy import FaultProxy

    port = int(s3.endpoint.rsplit(":", 1)[1])
    with FaultProxy(port, lambda number, line: "503") as proxy:
        root = _root(tmp_path, S3StandIn(proxy.url, s3.client), "eight/whl/", monkeypatch)
        code = main(["--root", str(root), "publish", "--channel", "nightly", "--target", "wheels-tree", "--dist",
                     str(_dist(tmp_path / "a", ("downcore",))), "--state", str(tmp_path / "state"), "--tries", "2",
                     "--first-pause", "0.05"])
        assert proxy.injected["503"] == 2, proxy.injected
    err = capsys.readouterr().err
    assert code == 7, err
    assert f"s3://{BUCKET}: gave up after 2 tries; last response: 503" in err, err


def test_an_index_whose_answer_breaks_mid_body_is_read_again(s3, tmp_path, monkeypatch, capsys):
    """The fault suite's find (seeds of `nox -s faults -- 200`): a GET whose body breaks while it
    is read fails after botocore returned, outside its retries. The GET and the read are tried
    again together. Fails on the code before: a traceback (exit 1) from the unchanged re-publish."""
    from support.fault_proxy import FaultProxy

    armed: list[str] = []  # the index pages whose first GET was cut

    def plan(number: int, line: str) -> str:
        method, path = (line.split(" ") + ["", ""])[:2]
        if armed and method == "GET" and path.split("?")[0].endswith("/index.json") and path not in armed:
            armed.append(path)
            return "cut-body"
        return "pass"

    port = int(s3.endpoint.rsplit(":", 1)[1])
    with FaultProxy(port, plan) as proxy:
        root = _root(tmp_path, S3StandIn(proxy.url, s3.client), "nine/whl/", monkeypatch)
        dist = _dist(tmp_path / "a", ("cutcore",))
        assert _publish(root, dist, tmp_path / "state") == 0, capsys.readouterr()
        armed.append("armed")
        code = _publish(root, dist, tmp_path / "state2")
        out = capsys.readouterr()
        assert code == 0, out
        assert proxy.injected["cut-body"] >= 1, proxy.injected
    assert "Traceback" not in out.err
