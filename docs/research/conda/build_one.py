import sys, time, os
from pathlib import Path
from rattler_build import Stage0Recipe, VariantConfig, ToolConfiguration
os.environ["PATH"] = str(Path("venv/bin").resolve()) + ":" + os.environ["PATH"]
recipe_file, out, *chans = sys.argv[1:]
t = time.time()
res = Stage0Recipe.from_file(recipe_file).run_build(variant_config=VariantConfig(), output_dir=Path(out).resolve(), channels=chans,
        tool_config=ToolConfiguration(test_strategy="native", compression_threads=1), package_format="conda:3")
for r in res: print(r.name, r.version, r.build_string, r.platform, "%.1fs" % r.build_time)
