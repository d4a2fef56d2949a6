"""Images in `shipyard repro`: one image built from each clone, compared through `docker save`.

An image is identical when its id (the digest of its config) is, or else when every layer's
diff_id is and the configs differ only in NORMALISED_CONFIG: the fields where the classic builder
writes the clock and the build container's random id. A layer whose diff_id differs is compared
entry by entry, once as it is and once without modification times, so that the report says
whether only the clock differs or which files do.

One more part is normalised, and named in the report: the modification time of the directory a
COPY writes into and of its parents (`opt`, `opt/python`). The classic builder of docker.io 20.10
stamps them with the clock when it copies, no RUN step can reach them, and BuildKit's
`rewrite-timestamp`, which would, is not in that engine. Every other entry of such a layer must
be the same, its mtime included. An image that needs this is "identical (normalised)", never
plain "identical".
"""

from __future__ import annotations

import json
import re
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from shipyard.errors import ToolError
from shipyard.plumbing.hashing import sha256_hex

# Config fields (dotted paths; `history.*` is every history entry) that record when and where the
# image was built, not what it is: the time of each step; the id and hostname of the container the
# classic builder ran the last step in; and `Image`, the id of the previous step's image, which is
# the digest of a config holding that step's time (so it differs whenever the clock did, even when
# every layer is the same).
NORMALISED_CONFIG = ("created", "container", "container_config.Hostname", "container_config.Image", "config.Image",
                     "history.*.created")
ENTRIES_SHOWN = 8
# The classic builder's history line for a COPY: `/bin/sh -c #(nop) COPY dir:<hash> in /opt/python/ `.
_COPY_DESTINATION = re.compile(r"#\(nop\)\s+COPY\s+\S+\s+in\s+(\S+)")


@dataclass(frozen=True)
class Entry:
    """One member of a layer: what it is and holds (`content` is a sha256), apart from its mtime."""

    kind: bytes
    mode: int
    owner: tuple[int, int]
    size: int
    link: str
    content: str


@dataclass(frozen=True)
class SavedImage:
    config: dict[str, Any]
    layers: tuple[dict[str, tuple[Entry, int]], ...]  # per layer: path -> (entry, mtime)


@dataclass(frozen=True)
class LayerComparison:
    index: int
    step: str  # the Dockerfile instruction that made it (the config's history)
    identical: bool  # the same diff_id
    mtimes_only: tuple[str, ...]  # entries that differ in nothing but their modification time
    differing: tuple[str, ...]  # entries that differ in content, mode, owner or presence
    copy_directories: tuple[str, ...] = ()  # of mtimes_only: the COPY's destination and its parents

    @property
    def normalised(self) -> bool:
        """Identical but for the clock on the directories a COPY wrote into (see the module's doc)."""
        return (not self.identical and not self.differing and bool(self.mtimes_only)
                and set(self.mtimes_only) <= set(self.copy_directories))

    def describe(self) -> str:
        if self.identical:
            return f"layer {self.index}: identical ({self.step})"
        if self.normalised:
            return (f"layer {self.index}: identical (normalised) ({self.step}): only the mtimes of the directories "
                    f"the COPY writes into differ: {_some(self.mtimes_only)}")
        parts = []
        if self.mtimes_only:
            parts.append(f"{len(self.mtimes_only)} entries differ only in mtime: {_some(self.mtimes_only)}")
        if self.differing:
            parts.append(f"{len(self.differing)} differ in content or metadata: {_some(self.differing)}")
        return f"layer {self.index}: DIFFERENT ({self.step}): {'; '.join(parts) or 'in the tar stream only'}"


def _some(paths: tuple[str, ...]) -> str:
    more = f" and {len(paths) - ENTRIES_SHOWN} more" if len(paths) > ENTRIES_SHOWN else ""
    return ", ".join(paths[:ENTRIES_SHOWN]) + more


@dataclass(frozen=True)
class ImageComparison:
    name: str
    ids: tuple[str, str]
    config_differences: tuple[str, ...]  # dotted config paths that differ after normalising
    layers: tuple[LayerComparison, ...]

    @property
    def identical(self) -> bool:
        return self.ids[0] == self.ids[1] or (not self.config_differences and all(x.identical for x in self.layers))

    @property
    def reproducible(self) -> bool:
        """Identical, or identical but for the documented COPY-directory mtimes."""
        return self.identical or (not self.config_differences
                                  and all(x.identical or x.normalised for x in self.layers))

    def verdict(self) -> str:
        return "identical" if self.identical else "identical (normalised)" if self.reproducible else "DIFFERENT"

    def lines(self) -> list[str]:
        if self.ids[0] == self.ids[1]:
            return [f"image {self.name}: identical (id {self.ids[0][:19]})"]
        same = sum(layer.identical for layer in self.layers)
        normalised = sum(layer.normalised for layer in self.layers)
        lines = [f"image {self.name}: {self.verdict()} after dropping "
                 f"{', '.join(NORMALISED_CONFIG)} from the config (ids {self.ids[0][:19]} and {self.ids[1][:19]}); "
                 f"{same} of {len(self.layers)} layers identical"
                 + (f", {normalised} identical but for the mtimes of the directories a COPY writes into"
                    if normalised else "")]
        if self.config_differences:
            lines.append(f"  config differs in: {', '.join(self.config_differences)}")
        lines += [f"  {layer.describe()}" for layer in self.layers if not layer.identical]
        return lines


def save_image(client: Any, image_id: str, target: Path) -> SavedImage:
    """`docker save` of `image_id` into `target`, read back: its config and every layer's entries."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        image = client.images.get(image_id)
    except Exception as exc:  # the SDK's NotFound / APIError
        raise ToolError(f"image {image_id}: not in the docker engine any more ({exc}); run repro again") from exc
    with target.open("wb") as out:
        for chunk in image.save(named=False):
            out.write(chunk)
    with tarfile.open(target) as saved:
        manifest = json.loads(_member(saved, "manifest.json").read())[0]
        config = json.loads(_member(saved, manifest["Config"]).read())
        layers = tuple(dict(_entries(_member(saved, path))) for path in manifest["Layers"])
    return SavedImage(config, layers)


def _member(archive: tarfile.TarFile, name: str) -> IO[bytes]:
    member = archive.getmember(name)
    while member.issym():  # docker save links a layer that two images share
        member = archive.getmember(str(Path(name).parent.joinpath(member.linkname)).lstrip("/"))
    handle = archive.extractfile(member)
    if handle is None:
        raise ToolError(f"docker save: {name} is not a file in the saved image")
    return handle


def _entries(layer: IO[bytes]) -> Iterator[tuple[str, tuple[Entry, int]]]:
    with tarfile.open(fileobj=layer, mode="r|") as tar:
        for member in tar:
            content = ""
            if member.isfile():
                handle = tar.extractfile(member)
                content = sha256_hex(handle.read() if handle else b"")
            entry = Entry(member.type, member.mode, (member.uid, member.gid), member.size, member.linkname, content)
            yield member.name, (entry, int(member.mtime))


def compare_images(name: str, ids: tuple[str, str], first: SavedImage, second: SavedImage) -> ImageComparison:
    configs = [_normalised(image.config) for image in (first, second)]
    keys = sorted(configs[0].keys() | configs[1].keys())
    differences = tuple(k for k in keys if configs[0].get(k) != configs[1].get(k) and not k.startswith("rootfs."))
    steps = [h.get("created_by", "") for h in first.config.get("history", []) if not h.get("empty_layer")]
    diff_ids = [image.config.get("rootfs", {}).get("diff_ids", []) for image in (first, second)]
    layers = []
    for index, (one, two) in enumerate(zip(first.layers, second.layers, strict=False)):
        step = " ".join(steps[index].split())[:90] if index < len(steps) else "?"
        same = index < min(map(len, diff_ids)) and diff_ids[0][index] == diff_ids[1][index]
        mtimes_only: list[str] = []
        differing: list[str] = []
        if not same:
            for path in sorted(one.keys() | two.keys()):
                if path not in one or path not in two or one[path][0] != two[path][0]:
                    differing.append(path)
                elif one[path][1] != two[path][1]:
                    mtimes_only.append(path)
        copied = _COPY_DESTINATION.search(steps[index]) if index < len(steps) else None
        directories = _with_parents(copied.group(1)) if copied else ()
        copy_directories = tuple(p for p in mtimes_only if p in directories and one[p][0].kind == tarfile.DIRTYPE)
        layers.append(LayerComparison(index, step, same, tuple(mtimes_only), tuple(differing), copy_directories))
    if len(first.layers) != len(second.layers):
        differences += (f"rootfs: {len(first.layers)} layers against {len(second.layers)}",)
    return ImageComparison(name, ids, differences, tuple(layers))


def _with_parents(destination: str) -> tuple[str, ...]:
    """'/opt/python/' -> ('opt', 'opt/python'): the names a layer's tar gives those directories."""
    parts = [p for p in destination.split("/") if p]
    return tuple("/".join(parts[:n]) for n in range(1, len(parts) + 1))


def _normalised(config: dict[str, Any]) -> dict[str, Any]:
    """The config flattened to {dotted path: value}, without NORMALISED_CONFIG."""
    flat: dict[str, Any] = {}

    def walk(prefix: str, value: Any, pattern: str) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(f"{prefix}{key}.", item, f"{pattern}{key}.")
        elif isinstance(value, list) and prefix == "history.":
            for index, item in enumerate(value):
                walk(f"{prefix}{index}.", item, f"{pattern}*.")
        elif pattern.rstrip(".") not in NORMALISED_CONFIG:
            flat[prefix.rstrip(".")] = value

    walk("", config, "")
    return flat
