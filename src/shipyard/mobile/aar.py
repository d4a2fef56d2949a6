"""Android archive (AAR) for one Android ABI: the shared library under jni/<abi>/, the C
header, and a prefab module so Gradle's native builds can find_package(ember_lite)."""

from __future__ import annotations

import io
import json
import time
import zipfile
from pathlib import Path

from packaging.version import Version

from shipyard.plumbing.atomic_files import write_atomic

# Zip entries carry no time zone; 1980-01-01 is the earliest time a zip can hold.
_ZIP_EPOCH_FLOOR = 315532800

_MANIFEST = """<?xml version="1.0" encoding="utf-8"?>
<manifest xmlns:android="http://schemas.android.com/apk/res/android"
    package="org.ember.lite">
    <uses-sdk android:minSdkVersion="{min_sdk}" />
</manifest>
"""


def _zip_time(epoch: int) -> tuple[int, int, int, int, int, int]:
    t = time.gmtime(max(epoch, _ZIP_EPOCH_FLOOR))
    return (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)


def _write_zip(entries: dict[str, bytes], epoch: int, executable: frozenset[str] = frozenset()) -> bytes:
    """Deterministic zip: sorted entries, fixed times and permissions."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=_zip_time(epoch))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # unix, so the mode below is honoured
            info.external_attr = (0o755 if name in executable else 0o644) << 16
            archive.writestr(info, entries[name])
    return buffer.getvalue()


def empty_classes_jar(epoch: int) -> bytes:
    """A valid jar without classes (the runtime has no Java API)."""
    return _write_zip({"META-INF/MANIFEST.MF": b"Manifest-Version: 1.0\r\nCreated-By: shipyard\r\n\r\n"}, epoch)


def write_aar(*, output: Path, abi: str, shared_library: Path, header: Path, version: str,
              min_sdk: int, ndk_major: int, epoch: int) -> Path:
    """Assemble the AAR for `abi` at `output` (reproducible: same inputs, same bytes)."""
    library = shared_library.read_bytes()
    header_bytes = header.read_bytes()
    module = "prefab/modules/ember_lite"
    entries = {
        "AndroidManifest.xml": _MANIFEST.format(min_sdk=min_sdk).encode(),
        "classes.jar": empty_classes_jar(epoch),
        "R.txt": b"",
        f"jni/{abi}/libember_lite.so": library,
        "headers/ember_lite.h": header_bytes,
        "prefab/prefab.json": json.dumps({"schema_version": 2, "name": "ember_lite",
                                          # prefab takes CMake's numeric major.minor.patch: a
                                          # nightly's 1.7.0.dev20261201 is 1.7.0 there.
                                          "version": Version(version).base_version,
                                          "dependencies": []}, sort_keys=True).encode(),
        f"{module}/module.json": json.dumps({"export_libraries": [], "library_name": "libember_lite"},
                                            sort_keys=True).encode(),
        f"{module}/include/ember_lite.h": header_bytes,
        f"{module}/libs/android.{abi}/abi.json": json.dumps(
            {"abi": abi, "api": min_sdk, "ndk": ndk_major, "stl": "none", "static": False},
            sort_keys=True).encode(),
        f"{module}/libs/android.{abi}/libember_lite.so": library,
    }
    data = _write_zip(entries, epoch, executable=frozenset(
        {f"jni/{abi}/libember_lite.so", f"{module}/libs/android.{abi}/libember_lite.so"}))
    write_atomic(output, data)
    return output
