import sys, time
from pathlib import Path
from rattler_build import Stage0Recipe, VariantConfig, ToolConfiguration
recipe = Stage0Recipe.from_file("recipes/hello/recipe.yaml")
vc = VariantConfig.from_file("recipes/hello/variants.yaml")
print("combinations:", vc.combinations())
for rv in recipe.render(vc):
    print("rendered", rv.variant, rv.hash_info)
chan = sys.argv[1:] or []
t=time.time()
res = recipe.run_build(variant_config=vc, output_dir=Path("out").resolve(), channels=chan,
                       tool_config=ToolConfiguration(test_strategy="skip", compression_threads=1),
                       no_build_id=False)
for r in res: print(r, r.packages)
print("took", time.time()-t)
