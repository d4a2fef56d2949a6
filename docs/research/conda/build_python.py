import sys, time, os
from pathlib import Path
from rattler_build import Stage0Recipe, VariantConfig, ToolConfiguration
os.environ["PATH"] = str(Path("venv/bin").resolve()) + ":" + os.environ["PATH"]
recipe = Stage0Recipe.from_file("recipes/python/recipe.yaml")
vc = VariantConfig.from_file("recipes/python/variants.yaml")
t=time.time()
res = recipe.run_build(variant_config=vc, output_dir=Path(sys.argv[1]).resolve(), channels=[],
        tool_config=ToolConfiguration(test_strategy="skip", compression_threads=1), package_format="conda:3")
for r in res: print(r, r.packages, [l for l in r.log if 'warn' in l.lower()][:20])
print("took", time.time()-t)
