"""py-rattler: index a channel folder, solve and install from file:// and http://, show an unsatisfiable solve."""
import asyncio, sys, time, json, os
from pathlib import Path
from rattler import (Channel, ChannelConfig, Gateway, Platform, MatchSpec, VirtualPackage,
                     solve, install)
from rattler.index import index_fs
from rattler.exceptions import SolverError

ROOT = Path(__file__).resolve().parent

async def main(url: str, prefix: Path):
    t = time.time()
    await index_fs(ROOT / "channel", write_zst=True, write_shards=False, force=True)
    print("indexed in %.2fs:" % (time.time() - t), sorted(p.name for p in (ROOT / "channel/linux-64").iterdir()))
    gateway = Gateway(cache_dir=ROOT / "rattler-cache")   # own cache: repodata is cached per URL
    chan = Channel(url)
    vp = VirtualPackage.detect()
    t = time.time()
    recs = await solve([chan], ["python 3.11.*", "hello-shipyard * cu118*"], gateway=gateway,
                       platforms=[Platform.current(), Platform("noarch")], virtual_packages=vp)
    print("solved in %.2fs:" % (time.time() - t), [f"{r.name.normalized}={r.version}={r.build}" for r in recs])
    t = time.time()
    await install(recs, target_prefix=prefix, cache_dir=ROOT / "pkgs-cache", show_progress=False)
    print("installed in %.2fs into" % (time.time() - t), prefix)
    try:
        await solve([chan], ["python 3.12.*"], gateway=gateway, virtual_packages=vp)
    except SolverError as e:
        print("SolverError:", type(e).__name__, "|", str(e).replace("\n", " / "))
    try:
        await solve([chan, Channel(url.rstrip('/') + "-missing")], ["python 3.11.*"], gateway=gateway)
    except Exception as e:
        print("missing channel:", type(e).__module__, type(e).__name__, "|", str(e)[:300].replace("\n", " / "))

asyncio.run(main(sys.argv[1], Path(sys.argv[2])))
