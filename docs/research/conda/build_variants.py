"""Render a recipe against a variant file, build each distinct output once (dedupe by name-version-build)."""
import sys, time, os
from pathlib import Path
from rattler_build import Stage0Recipe, VariantConfig, ToolConfiguration
class CB:
    def on_download_start(self,e): pass
    def on_download_progress(self,e): pass
    def on_download_complete(self,e): pass
    def on_build_step(self,e): pass
    def on_log(self,e):
        if os.environ.get('VERBOSE') or e.level != 'info': print('LOG', e.level, e.message, flush=True)
os.environ["PATH"] = str(Path("venv/bin").resolve()) + ":" + os.environ["PATH"]
recipe_file, variants, out, *chans = sys.argv[1:]
rvs = Stage0Recipe.from_file(recipe_file).render(VariantConfig.from_file(variants))
pinned = {n for rv in rvs for n in rv.pin_subpackages}
rvs = sorted(rvs, key=lambda rv: rv.recipe.package.name not in pinned)  # pinned outputs (libember) first
print('order:', [(rv.recipe.package.name, rv.recipe.build.string) for rv in rvs])
seen = set()
for rv in rvs:
    key = (rv.recipe.package.name, rv.recipe.package.version, rv.recipe.build.string)
    if key in seen:
        print("skip duplicate", *key); continue
    seen.add(key)
    r = rv.run_build(tool_config=ToolConfiguration(test_strategy="native", compression_threads=1), output_dir=Path(out).resolve(),
                     channels=chans, package_format="conda:3", progress_callback=CB(), no_build_id=True)
    if os.environ.get("SOURCE_DATE_EPOCH"):   # normalise before any later build consumes it, then re-index
        import normalize_conda, asyncio
        from rattler.index import index_fs
        for p in r.packages: normalize_conda.normalize(Path(p), int(os.environ["SOURCE_DATE_EPOCH"]), str(Path(out).resolve()))
        asyncio.run(index_fs(Path(out).resolve(), write_shards=False, force=True))
    print("built", r.name, r.version, r.build_string, "%.1fs" % r.build_time)
