"""Normalising repack of a .conda that rattler-build wrote: the build timestamp becomes SOURCE_DATE_EPOCH,
the build's absolute output directory becomes a fixed token, tar members lose owner and mtime. File contents,
paths.json and the member order are kept: only what says *when* and *where* it was built changes."""
import io, json, os, re, sys, tarfile, time, zipfile
from pathlib import Path
import zstandard

def _retar(data: bytes, epoch: int, out_dir: str) -> bytes:
    src = tarfile.open(fileobj=io.BytesIO(zstandard.ZstdDecompressor().decompress(data, max_output_size=1 << 34)))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as dst:
        for m in src.getmembers():
            payload = src.extractfile(m).read() if m.isfile() else None
            if m.name == "info/index.json":
                d = json.loads(payload); d["timestamp"] = epoch * 1000
                payload = (json.dumps(d, indent=2, sort_keys=True) + "\n").encode()
            elif m.name == "info/recipe/rendered_recipe.yaml":
                t = payload.decode()
                t = re.sub(r"(?m)^(\s*timestamp:).*$", r"\1 " + time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch)), t)
                t = re.sub(r"rattler-build_([A-Za-z0-9_.\-]+?)_\d{9,}", r"rattler-build_\1", t)
                payload = t.replace(out_dir, "/shipyard-output").encode()
            m.mtime, m.uid, m.gid, m.uname, m.gname = epoch, 0, 0, "", ""
            if payload is not None:
                m.size = len(payload)
            dst.addfile(m, io.BytesIO(payload) if payload is not None else None)
    return zstandard.ZstdCompressor(level=19, threads=0).compress(buf.getvalue())

def normalize(pkg: Path, epoch: int, out_dir: str) -> None:
    zin = zipfile.ZipFile(pkg)
    entries = [(i.filename, zin.read(i)) for i in zin.infolist()]
    tmp = pkg.with_suffix(".conda.tmp")
    stamp = time.gmtime(max(epoch, 315532800))[:6]          # zip dates start in 1980
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as zout:
        for name, data in entries:
            if name.endswith(".tar.zst"):
                data = _retar(data, epoch, out_dir)
            info = zipfile.ZipInfo(name, date_time=stamp); info.external_attr = 0o644 << 16
            zout.writestr(info, data)
    os.replace(tmp, pkg)

if __name__ == "__main__":
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    out_dir = sys.argv[1]
    for p in sys.argv[2:]:
        normalize(Path(p), epoch, out_dir)
