"""PEP 825 wheel variants from the same build: every CPU and CUDA wheel of the manifest repacked
(never rebuilt: wheel/repack.py) as a variant of one package, in one more index beside the
per-variant ones, `dist/whl/variants/`.

- A variant wheel is the wheel under its plain version (all variants are one package version)
  with `variant.json` in its .dist-info, named `<name>-<version>-<tags>-<label>.whl`, the label
  being the variant's tag (cpu, cu118). Its properties, in release.yaml's `wheel_variants.namespace`:
  `platform` (cpu or cuda), `cuda_runtime` (the toolkit it was built with) and `arch`: the SASS
  (`sm_XY`) and PTX (`compute_XY`) its binaries really carry, as the manifest's `cuda_archs`
  records the arch check's reading, never release.yaml's declared list. The same list again under
  `arch_2`, `arch_3` and `arch_4` (ARCH_FEATURES): an installer matches one value per feature and
  every feature, so a provider gives each GPU model of a machine a feature of its own, and a build
  fits when every model runs some code it carries (a fat binary's driver picks per GPU).
- `<name>-<version>-variants.json` per project and version: what a variant-aware installer reads
  first, written by variantlib from the wheels' own variant.json.
- An installer that knows nothing of variants reads the same index and sees only wheels it can
  install: variant file names are not valid wheel names to it (it skips them), and the default
  variant's wheel under the plain version (the PyPI flavour) and the pure wheels are there as
  plain wheels for it.
- `dist/variant-wheels.json`, next to the manifest, records each file and the artifact it was
  made from; `install.json` in the index is the guide `python -m <provider>` reads.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from packaging.utils import canonicalize_name, parse_wheel_filename
from pydantic import AfterValidator, BaseModel, ConfigDict, StrictInt
from variantlib.api import VariantDescription, VariantProperty, make_variant_dist_info
from variantlib.constants import VARIANT_DIST_INFO_FILENAME
from variantlib.models.variant_info import ProviderInfo, VariantInfo
from variantlib.variant_dist_info import VariantDistInfo
from variantlib.variants_json import VariantsJson

from shipyard.errors import UsageError
from shipyard.plumbing.atomic_files import write_atomic
from shipyard.plumbing.confined_paths import check_relative_path
from shipyard.plumbing.hashing import sha256_of
from shipyard.plumbing.identifiers import check_file_name
from shipyard.plumbing.input_files import read_json_input, validated
from shipyard.publish.plain_version import plain_version_wheel
from shipyard.record.manifest import ArtifactRecord, Manifest, artifact_file, recorded_file
from shipyard.release.destinations import WheelVariants
from shipyard.release.kinds import WHEEL
from shipyard.release.spec import Release
from shipyard.wheel.index import add_wheel, write_index
from shipyard.wheel.repack import repack

VARIANTS_INDEX = "variants"  # dist/whl/variants/, beside dist/whl/cpu/, dist/whl/cu118/, …
RECORD_FILE = "variant-wheels.json"  # next to dist/manifest.json
GUIDE_FILE = "install.json"  # in the variants index: what `python -m <provider> --guide` reads
PLATFORM, ARCH, RUNTIME = "platform", "arch", "cuda_runtime"
ARCH_FEATURES = (ARCH, "arch_2", "arch_3", "arch_4")  # the provider's contract: one feature per GPU model


@dataclass(frozen=True)
class VariantFile:
    """One file of the variants index and the artifact it was made from."""

    kind: str  # "variant" (a labelled variant wheel), "plain" (for installers without variants), "variants.json"
    path: Path
    label: str | None = None
    source: ArtifactRecord | None = None
    properties: tuple[str, ...] = ()


def settings_of(release: Release) -> WheelVariants:
    if release.wheel_variants is None:
        raise UsageError("release.yaml: wheel_variants: missing; name the namespace of the variant properties, the "
                         "provider distribution and its plugin_api (docs/installing.md)")
    return release.wheel_variants


def variant_description(record: ArtifactRecord, release: Release) -> VariantDescription:
    """The variant properties of a CPU or CUDA wheel, labelled with its variant tag."""
    namespace = settings_of(release).namespace
    variant = release.variants[record.variant]
    if variant.cuda is None:
        properties = [VariantProperty(namespace, PLATFORM, "cpu")]
    else:
        if record.cuda_archs is None:
            raise UsageError(f"dist/manifest.json: artifact {record.name}: cuda_archs: missing; its variant properties "
                             f"name the archs its binaries carry, which the arch check records: build it again "
                             f"with this shipyard (got none)")
        archs = (*record.cuda_archs.sass, *record.cuda_archs.ptx)
        properties = [VariantProperty(namespace, PLATFORM, "cuda"), VariantProperty(namespace, RUNTIME, variant.cuda),
                      *(VariantProperty(namespace, feature, arch) for feature in ARCH_FEATURES for arch in archs)]
    return VariantDescription(properties=properties, label=record.variant_tag)


def variant_info(release: Release) -> VariantInfo:
    """What every variant of the release shares: its one namespace and the provider that knows it."""
    settings = settings_of(release)
    provider = ProviderInfo(requires=[settings.provider], plugin_api=settings.plugin_api)
    return VariantInfo(namespace_priorities=[settings.namespace], providers={settings.namespace: provider})


def variant_wheel_name(wheel_name: str, label: str) -> str:
    """`ember-1.7.0+cu118-cp311-cp311-manylinux_2_31_x86_64.whl` as the variant `…x86_64-cu118.whl`
    of the plain version."""
    _, version, _, _ = parse_wheel_filename(wheel_name)
    stem = wheel_name[: -len(".whl")].split("-")
    return "-".join([stem[0], version.public, *stem[2:], label]) + ".whl"


def variants_json_name(wheel_name: str) -> str:
    """`<name>-<version>-variants.json` of a (variant) wheel's project and version, as PEP 825 names it."""
    stem = wheel_name.split("-")
    return f"{stem[0]}-{stem[1]}-variants.json"


def build_variant_index(dist: Path, release: Release, manifest: Manifest) -> list[VariantFile]:
    """Repack the manifest's wheels into `dist/whl/variants/`, write each project's variants.json and
    the index pages, and record every file in `dist/variant-wheels.json`. Idempotent."""
    info = variant_info(release)
    index = dist / "whl" / VARIANTS_INDEX
    wheels = [a for a in manifest.artifacts if a.package_type == WHEEL.name]
    if not any(a.variant_tag != "any" for a in wheels):
        raise UsageError(f"{dist / 'manifest.json'}: artifacts: no CPU or CUDA wheel to make variants of; build a "
                         f"variant's wheels first (shipyard build --variant cpu)")
    # The CPU variant is what an installer without variants gets from this index (the PyPI flavour).
    default = next((name for name, v in release.variants.items() if v.cuda is None), None)
    # Every description and every source first: bad input writes nothing.
    described = {r.cell_id: variant_description(r, release) for r in wheels if r.variant_tag != "any"}
    sources = {r.cell_id: _checked(dist, r) for r in wheels}
    files: list[VariantFile] = []
    by_project: dict[Path, list[Path]] = defaultdict(list)
    for record in wheels:
        source = sources[record.cell_id]
        folder = index / canonicalize_name(record.name.split("-", 1)[0])
        if record.variant_tag == "any":  # a pure wheel: the same for every variant, a plain wheel here too
            files.append(VariantFile("plain", add_wheel(source, index), source=record))
            continue
        vdesc = described[record.cell_id]
        dist_info = make_variant_dist_info(vdesc, variant_info=info).encode()
        version = parse_wheel_filename(record.name)[1].public
        target = repack(source, folder / variant_wheel_name(record.name, vdesc.label), version=version,
                        add={VARIANT_DIST_INFO_FILENAME: dist_info})
        by_project[folder].append(target)
        files.append(VariantFile("variant", target, vdesc.label, record, tuple(p.to_str() for p in vdesc.properties)))
        if record.variant == default:
            files.append(VariantFile("plain", plain_version_wheel(source, folder), source=record))
    for folder in sorted(by_project):
        files.extend(write_variants_json(folder))
    write_index(index)
    _write_record(dist, manifest, files)
    return files


def _checked(dist: Path, record: ArtifactRecord) -> Path:
    path = recorded_file(dist, record, record.path, "path")
    return artifact_file(
        path, record,
        missing=lambda: UsageError(f"{dist / 'manifest.json'}: artifact {record.name}: {path} does not exist; build "
                                   f"it again, or pass --dist with the folder that holds it"),
        changed=lambda digest: UsageError(f"{path}: sha256 {digest} is not the manifest's {record.sha256}; the file "
                                          f"changed after it was tested: rebuild it, never repack it"))


def write_variants_json(folder: Path) -> list[VariantFile]:
    """One `<name>-<version>-variants.json` per version of the variant wheels in a project folder,
    merged by variantlib from the variant.json inside each (what an installer finds there). Like an
    index page, it is derived from the wheels present: a publish writes it again in its staged tree."""
    import zipfile

    from variantlib.constants import VALIDATION_WHEEL_NAME_REGEX

    merged: dict[str, VariantsJson] = {}
    for wheel in sorted(folder.glob("*.whl")):
        match = VALIDATION_WHEEL_NAME_REGEX.fullmatch(wheel.name)
        label = match["variant_label"] if match else None
        if label is None:
            continue  # a plain wheel: for installers without variants
        with zipfile.ZipFile(wheel) as zf:
            name = next(n for n in zf.namelist() if n.endswith(f".dist-info/{VARIANT_DIST_INFO_FILENAME}"))
            one = VariantDistInfo(zf.read(name), label)
        # VariantsJson(one) takes the shared part (providers, priorities); merge adds the variant.
        merged.setdefault(variants_json_name(wheel.name), VariantsJson(one)).merge(one)
    written = []
    for out, variants_json in sorted(merged.items()):
        write_atomic(folder / out, variants_json.to_str() + "\n")
        written.append(VariantFile("variants.json", folder / out))
    return written


class SourceRecord(BaseModel):
    model_config = ConfigDict(frozen=True)
    cell_id: str
    name: str
    sha256: str


class VariantFileRecord(BaseModel):
    """One file of the variants index in dist/variant-wheels.json."""

    model_config = ConfigDict(frozen=True)
    kind: str  # variant, plain, variants.json
    name: Annotated[str, AfterValidator(check_file_name)]
    path: Annotated[str, AfterValidator(check_relative_path)]  # relative to the dist folder, inside it
    sha256: str
    size: StrictInt  # strict: `true` or "12" in the record is damage, not a size
    label: str | None = None
    source: SourceRecord | None = None  # the manifest artifact it was made from
    properties: tuple[str, ...] = ()


class VariantWheels(BaseModel):
    model_config = ConfigDict(frozen=True)
    release: str
    version: str
    files: tuple[VariantFileRecord, ...]


RECORD_FIX = "it is written by `shipyard variants`: run that again"


def read_variant_record(dist: Path) -> VariantWheels | None:
    """dist/variant-wheels.json, None when `shipyard variants` did not run; InputError when it is no such record."""
    path = dist / RECORD_FILE
    if not path.exists():
        return None
    data = read_json_input(path, limit="variants record", missing_fix=RECORD_FIX, restore_fix=RECORD_FIX)
    return validated(VariantWheels, data, path, fix=RECORD_FIX)


def _write_record(dist: Path, manifest: Manifest, files: list[VariantFile]) -> None:
    entries = sorted((VariantFileRecord(
        kind=f.kind, name=f.path.name, path=f.path.relative_to(dist).as_posix(), sha256=sha256_of(f.path),
        size=f.path.stat().st_size, label=f.label, properties=f.properties,
        source=None if f.source is None else SourceRecord(cell_id=f.source.cell_id, name=f.source.name,
                                                          sha256=f.source.sha256)) for f in files),
        key=lambda e: e.path)
    record = VariantWheels(release=manifest.release, version=manifest.version, files=tuple(entries))
    write_atomic(dist / RECORD_FILE, json.dumps(record.model_dump(mode="json", exclude_none=True), indent=2,
                                                sort_keys=True) + "\n")
