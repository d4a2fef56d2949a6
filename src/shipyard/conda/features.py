"""Features and their statuses in conda packages, and reading them back from a channel.

Each package shipyard builds carries, in `info/about.json`'s `extra` (a v1 recipe's top-level
`extra:` mapping lands there; `about.extra` is rejected by rattler-build), the features of its
platform with their stable / beta / prototype statuses, in one schema that the build writes
(`package_extra`) and `shipyard conda features` reads:

    {"shipyard": {"component": "ember", "variant": "cuda11", "variant_tag": "cu118",
                  "platform": "linux-x86_64",
                  "features": [{"id": "ember.fft", "title": "…", "status": "beta"}, …]}}

No cell id: one recipe renders several packages (libember and ember for every Python) from one
`extra`. The feature part is the wheel's `_features.json` document
(`wheel.labels.features_document`): a noarch package, which serves several platforms and every
variant, has variant and variant_tag "any", no `platform`, and each feature's `status` is a
mapping platform -> status. The mutex has component null and no features. Packages without
`extra.shipyard` (the bootstrap channel's python, numpy, …) carry no features.

`list_channel_features` reads a channel's repodata.json per subdir and then only each package's
about.json: over HTTP with range reads (py-rattler's `AboutJson.from_remote_url`), locally from
the archive's info section, so a listing never downloads the packages.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import requests

from shipyard.errors import ChannelReadError
from shipyard.redaction import redact
from shipyard.release.spec import Spec
from shipyard.wheel.labels import features_document

EXTRA_KEY = "shipyard"
_PARALLEL_READS = 8
_TIMEOUT = 30


def package_extra(spec: Spec, *, component: str | None, platform: str | Sequence[str], variant: str,
                  variant_tag: str) -> dict[str, Any]:
    """The `extra` mapping of a conda package shipyard builds: its component, variant and the
    features of its platform (a sequence of platforms for a noarch package) with their statuses,
    from the spec; a package of no component (the mutex) has no features."""
    features = features_document(spec, component, platform) if component is not None else {"features": []}
    return {EXTRA_KEY: {"component": component, "variant": variant, "variant_tag": variant_tag, **features}}


@dataclass(frozen=True)
class ChannelFeature:
    id: str
    title: str
    status: str
    platform: str | None  # set when the package serves several platforms with different statuses


@dataclass(frozen=True)
class PackageFeatures:
    subdir: str
    file_name: str
    name: str
    version: str
    build: str
    features: tuple[ChannelFeature, ...]
    variant_tag: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def features_from_extra(extra: dict[str, Any] | None) -> tuple[ChannelFeature, ...]:
    """The features an about.json `extra` declares (none when shipyard did not build it)."""
    document = (extra or {}).get(EXTRA_KEY)
    if not isinstance(document, dict):
        return ()
    out: list[ChannelFeature] = []
    for entry in document.get("features") or ():
        status = entry.get("status")
        if isinstance(status, dict):
            for platform, one in sorted(status.items()):
                out.append(ChannelFeature(entry["id"], entry.get("title", ""), str(one), platform))
        else:
            out.append(ChannelFeature(entry["id"], entry.get("title", ""), str(status), None))
    return tuple(out)


def list_channel_features(channel: str) -> list[PackageFeatures]:
    """Every package of `channel` (http(s):// or file:// URL, or a folder) with its features."""
    scheme = urlsplit(channel).scheme
    if scheme in ("http", "https"):
        base = channel if channel.endswith("/") else channel + "/"
        return asyncio.run(_remote(base))
    folder = Path(unquote(urlsplit(channel).path)) if scheme == "file" else Path(channel)
    if not folder.is_dir():
        raise ChannelReadError(f"{channel}: no such channel folder; pass a channel URL (http://…/, file:///…) "
                               f"or the path of a folder holding noarch/repodata.json")
    return asyncio.run(_local(folder))


def _subdirs_to_try() -> list[str]:
    from rattler.platform import Subdir

    return sorted({"noarch", *(str(s) for s in Subdir.all())})


def _records(repodata: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    merged = {**repodata.get("packages", {}), **repodata.get("packages.conda", {})}
    return sorted(merged.items())


def _entry(subdir: str, file_name: str, record: dict[str, Any], extra: dict[str, Any] | None) -> PackageFeatures:
    document = (extra or {}).get(EXTRA_KEY)
    tag = document.get("variant_tag") if isinstance(document, dict) else None
    return PackageFeatures(subdir=subdir, file_name=file_name, name=record["name"], version=str(record["version"]),
                           build=record["build"], features=features_from_extra(extra), variant_tag=tag)


async def _local(folder: Path) -> list[PackageFeatures]:
    from rattler.package_streaming import PackageArchive

    found: list[PackageFeatures] = []
    for repodata in sorted(folder.glob("*/repodata.json")):
        subdir = repodata.parent.name
        for file_name, record in _records(json.loads(repodata.read_bytes())):
            path = repodata.parent / file_name
            try:
                about = await (await PackageArchive.from_path(path)).about_json()
            except Exception as exc:  # py-rattler's own error types
                raise ChannelReadError(f"{path}: cannot read info/about.json ({type(exc).__name__}: {exc}); "
                                       f"the channel lists a package it does not hold: re-index it") from exc
            found.append(_entry(subdir, file_name, record, about.extra))
    if not found and not (folder / "noarch" / "repodata.json").is_file():
        raise ChannelReadError(f"{folder}: no noarch/repodata.json, so not an indexed conda channel; "
                               f"publish into it with shipyard (or index it with rattler-index)")
    return found


async def _remote(base: str) -> list[PackageFeatures]:
    from rattler.networking import Client
    from rattler.package import AboutJson

    listed: list[tuple[str, str, dict[str, Any]]] = []
    with requests.Session() as session:
        for subdir in _subdirs_to_try():
            url = f"{base}{subdir}/repodata.json"
            try:
                response = session.get(url, timeout=_TIMEOUT)
            except requests.RequestException as exc:
                raise ChannelReadError(f"{redact(url)}: cannot be fetched ({type(exc).__name__}); check that the "
                                       f"channel's server runs and the URL is right") from exc
            if response.status_code == 404:
                if subdir == "noarch":
                    raise ChannelReadError(f"{redact(url)}: not found (404), so no conda channel at "
                                           f"{redact(base)}; check the URL")
                continue
            if response.status_code != 200:
                raise ChannelReadError(f"{redact(url)}: HTTP {response.status_code}; "
                                       + ("check the channel token in the URL (/t/<token>/)"
                                          if response.status_code in (401, 403) else "check the channel's server"))
            listed += [(subdir, name, record) for name, record in _records(response.json())]
    client = Client()
    gate = asyncio.Semaphore(_PARALLEL_READS)

    async def about(subdir: str, name: str) -> dict[str, Any] | None:
        url = f"{base}{subdir}/{name}"
        async with gate:
            try:
                found = await AboutJson.from_remote_url(client, url)
            except Exception as exc:  # py-rattler's own error types
                raise ChannelReadError(f"{redact(url)}: cannot read its info/about.json "
                                       f"({type(exc).__name__}: {redact(str(exc))})") from exc
        return found.extra if found is not None else None

    extras = await asyncio.gather(*(about(subdir, name) for subdir, name, _ in listed))
    return [_entry(subdir, name, record, extra) for (subdir, name, record), extra in zip(listed, extras, strict=True)]
