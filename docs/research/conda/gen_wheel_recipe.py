"""Write a rattler-build v1 recipe that repacks one pure-Python wheel as a noarch: python package.
Deps come from the wheel's Requires-Dist (markers for extras dropped; python_version markers made unconditional)."""
import sys, zipfile, hashlib, re, json
from pathlib import Path
from email.parser import Parser

def conda_dep(req: str):
    req, _, marker = req.partition(";")
    if "extra ==" in marker or "sys_platform == \"win32\"" in marker:
        return None
    m = re.match(r"\s*([A-Za-z0-9_.\-]+)\s*(\[.*?\])?\s*\(?([^)]*)\)?", req)
    name, spec = m.group(1).lower().replace("_", "-"), m.group(3).replace(" ", "")
    return f"{name} {spec}".strip()

def main(whl: Path, out_root: Path):
    z = zipfile.ZipFile(whl)
    meta_name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    meta = Parser().parsestr(z.read(meta_name).decode())
    eps = []
    ep_name = meta_name.replace("METADATA", "entry_points.txt")
    if ep_name in z.namelist():
        sec = None
        for line in z.read(ep_name).decode().splitlines():
            line = line.strip()
            if line.startswith("["): sec = line
            elif line and sec == "[console_scripts]": eps.append(line.replace(" ", "").replace("=", " = ", 1))
    name, version = meta["Name"].lower().replace("_", "-"), meta["Version"]
    deps = sorted(filter(None, (conda_dep(r) for r in meta.get_all("Requires-Dist") or [])))
    py = "python " + (meta.get("Requires-Python") or ">=3").replace(" ", "")
    sha = hashlib.sha256(whl.read_bytes()).hexdigest()
    top = sorted({n.split("/")[0] for n in z.namelist() if not n.split("/")[0].endswith((".dist-info", ".data"))})
    imp = next((t.removesuffix(".py") for t in top if not t.startswith("_")), top[0].removesuffix(".py"))
    d = out_root / name; d.mkdir(parents=True, exist_ok=True)
    j = json.dumps
    (d / "recipe.yaml").write_text(f"""# generated from {whl.name}
package:
  name: {name}
  version: {j(version)}
source:
  - path: {whl.resolve()}
    sha256: {sha}
    file_name: {whl.name}
build:
  number: 0
  noarch: python
  script:
    - $PYTHON $(ls $PREFIX/lib/python3.*/ensurepip/_bundled/pip-*.whl)/pip install --no-deps --no-index --no-compile --disable-pip-version-check ./{whl.name}
    - rm -rf $PREFIX/bin
  python:
    entry_points: {j(eps)}
requirements:
  host:
    - python
  run:
{chr(10).join('    - ' + j(x) for x in [py] + deps)}
tests:
  - python:
      imports: [{imp}]
      pip_check: false
about:
  summary: {j(name + ' ' + version + ' repacked from its PyPI wheel')}
  description: {j('Bytes from the PyPI wheel ' + whl.name + ' (sha256 ' + sha + ')')}
extra:
  shipyard:
    repacked_from: {j('pypi:' + whl.name)}
    sha256: {sha}
""")
    print(d / "recipe.yaml")

for w in sys.argv[2:]:
    main(Path(w), Path(sys.argv[1]))
