import sys, datetime, hashlib
from rattler_build import assemble_package, FileEntry
out = sys.argv[1]
ts = datetime.datetime.fromtimestamp(1700000000, tz=datetime.timezone.utc)
o = assemble_package(name="asm-demo", version="1.0", target_platform="noarch", build_string="cpu_0",
    output_dir=out, files_dir="stage", noarch="generic", timestamp=ts,
    summary="repacked demo", description="bytes from: stage/ (test)", compression_threads=1,
    files=[FileEntry.from_paths("stage/share/x/a.txt", "info/shipyard/features.json")])
print(o, hashlib.sha256(open(o.path,'rb').read()).hexdigest())
