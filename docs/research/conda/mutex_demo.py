"""Which ember does the solver pick, and what it refuses (channel served over HTTP)."""
import asyncio, sys
from rattler import Channel, solve, install, Gateway, VirtualPackage
from rattler.exceptions import SolverError
URL = sys.argv[1]
CASES = [
    ["python 3.11.*", "ember", "ember-variant ==1.0 cu118"],
    ["python 3.11.*", "ember * *_cu118_*"],
    ["python 3.11.*", "ember * *_cpu_*"],
    ["python 3.11.*", "ember"],
    ["python 3.11.*", "ember * *_cpu_*", "libember * cu118_*"],
    ["python 3.11.*", "ember * *_cpu_*", "ember-variant ==1.0 cu118"],
    ["python 3.11.*", "ember * *_cu118_*", "pytest", "numpy"],
]
async def main():
    g = Gateway(cache_dir="/tmp/mutex-cache")
    for specs in CASES:
        try:
            recs = await solve([Channel(URL)], specs, gateway=g, virtual_packages=VirtualPackage.detect())
            print("OK   ", specs, "->", sorted(f"{r.name.normalized}={r.build}" for r in recs if "ember" in r.name.normalized or "cuda" in r.name.normalized))
        except SolverError as e:
            print("UNSAT", specs, "->", " / ".join(l.strip() for l in str(e).splitlines()[:6]))
asyncio.run(main())
