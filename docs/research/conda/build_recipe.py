import sys, time, os
from pathlib import Path
from rattler_build import Stage0Recipe, VariantConfig, ToolConfiguration
class CB:
    def on_download_start(self,e): pass
    def on_download_progress(self,e): pass
    def on_download_complete(self,e): pass
    def on_build_step(self,e): print('STEP', e.step_name, e.message, flush=True)
    def on_log(self,e): print('LOG', e.level, e.message, flush=True)
os.environ["PATH"] = str(Path("venv/bin").resolve()) + ":" + os.environ["PATH"]
recipe_dir, out, *chans = sys.argv[1:]
recipe = Stage0Recipe.from_file(f"{recipe_dir}/recipe.yaml")
vc = VariantConfig.from_file(f"{recipe_dir}/variants.yaml")
t=time.time()
res = recipe.run_build(variant_config=vc, output_dir=Path(out).resolve(), channels=chans,
        tool_config=ToolConfiguration(test_strategy=os.environ.get("TEST","native"), compression_threads=1), package_format="conda:3", progress_callback=CB())
for r in res:
    print(r, [l for l in r.log if 'warn' in l.lower() or 'overlink' in l.lower() or 'error' in l.lower()][:15])
print("took %.1f" % (time.time()-t))
