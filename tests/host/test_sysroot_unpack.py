"""A sysroot's .debs are unpacked one per core: the tree and its owners record must be the ones
a serial unpack in the .debs' order gives, also where two .debs hold the same path."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from shipyard.host.toolchains import sysroot


def _deb(folder: Path, package: str, files: dict[str, bytes]) -> Path:
    root = folder / package
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / "DEBIAN").mkdir()
    (root / "DEBIAN" / "control").write_text(f"Package: {package}\nVersion: 1.0-1\nArchitecture: amd64\n"
                                             f"Maintainer: t <t@example.invalid>\nDescription: test\n")
    deb = folder / f"{package}_1.0-1_amd64.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", root, deb], check=True, capture_output=True)
    return deb


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_parallel_unpack_gives_the_serial_tree_and_owners_where_debs_overlap(tmp_path):
    debs = []
    for i in range(12):
        files = {f"usr/lib/libp{i}.so.1": f"library {i}".encode() * 2000}
        if i in (2, 5, 9):  # the same header in three packages: the last one unpacked wins
            files["usr/include/shared.h"] = f"from package {i}\n".encode()
        debs.append(_deb(tmp_path / "debs", f"pkg{i:02d}", files))

    serial = tmp_path / "serial"
    serial.mkdir()
    for deb in debs:
        subprocess.run(["dpkg-deb", "-x", deb, serial], check=True)
    sysroot.record_deb_owners(debs, "bullseye", tmp_path / "serial-owners.json")

    for attempt in range(3):  # the threads finish in another order each time
        parallel = tmp_path / f"parallel{attempt}"
        parallel.mkdir()
        listings = sysroot._deb_listings(debs, "bullseye")
        sysroot._unpack_debs(debs, [files for _, files in listings], parallel)
        sysroot._write_owners(listings, tmp_path / f"owners{attempt}.json")
        assert _tree(parallel) == _tree(serial)
        assert (parallel / "usr/include/shared.h").read_text() == "from package 9\n"
        owners = json.loads((tmp_path / f"owners{attempt}.json").read_text())
        assert owners == json.loads((tmp_path / "serial-owners.json").read_text())
        assert owners["files"]["usr/include/shared.h"] == "pkg09"
