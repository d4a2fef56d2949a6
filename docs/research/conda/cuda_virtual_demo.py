"""Simulated __cuda virtual packages: the CUDA mutex refuses a driver that is too old (run_constraints __cuda >=11.8)."""
import asyncio
from rattler import Channel, solve, Gateway, GenericVirtualPackage, PackageName, Version, VirtualPackage
from rattler.package import BuildString
from rattler.exceptions import SolverError
def vp(v): return GenericVirtualPackage(PackageName("__cuda"), Version(v), BuildString("0"))
async def main():
    g = Gateway(cache_dir="/tmp/mutex-cache")
    base = [v.into_generic() for v in VirtualPackage.detect()]
    for cuda in ("11.2", "12.4"):
        try:
            r = await solve([Channel("http://127.0.0.1:18765/")], ["python 3.11.*", "ember", "ember-variant ==1.0 cu118"], gateway=g, virtual_packages=base + [vp(cuda)])
            print(f"__cuda={cuda}:", [f"{x.name.normalized}={x.build}" for x in r if "ember" in x.name.normalized])
        except SolverError as e:
            print(f"__cuda={cuda}: UNSAT", " / ".join(l.strip() for l in str(e).splitlines()[0:5]))
asyncio.run(main())
