"""py-rattler-build 0.73.0: rendering two variant tags at once, the ember cu118 output is built depending on the
cpu libember (the last sibling of that name), although render() reports the right pin. Run: venv/bin/python sibling_bug.py"""
import os
from pathlib import Path
os.environ["PATH"] = str(Path("venv/bin").resolve()) + ":" + os.environ["PATH"]
from rattler_build import Stage0Recipe, VariantConfig, ToolConfiguration, Package
vc = VariantConfig.from_file("recipes/variants-311.yaml")
rvs = Stage0Recipe.from_file("recipes/ember/recipe.yaml").render(vc)
for rv in rvs:
    if rv.recipe.package.name == "ember":
        print("rendered", rv.recipe.build.string, {k: v.build_string for k, v in rv.pin_subpackages.items()})
for r in Stage0Recipe.from_file("recipes/ember/recipe.yaml").run_build(variant_config=vc, output_dir="/tmp/sib",
        channels=["file://" + str(Path("channel").resolve())], tool_config=ToolConfiguration(test_strategy="skip")):
    if r.name == "ember":
        print("built   ", r.build_string, [d for d in Package.from_file(r.packages[0]).depends if d.startswith("libember")])
