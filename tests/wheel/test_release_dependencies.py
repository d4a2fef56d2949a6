"""A narrowed build (`--component`) builds what its selection depends on within the release: the
dependency function on shipyard's own release and the fixture release, and which cells a
narrowed build adds (none that the variant's index already holds). No builds: a second or two."""

from __future__ import annotations

import shutil
from pathlib import Path

from support.minirelease import FIXTURE, request

from shipyard.host.toolchains.discover import Inventory
from shipyard.release.validate import load_spec
from shipyard.wheel.cell_selection import dependency_cells
from shipyard.wheel.release_dependencies import release_dependencies, selection_dependencies

REPO = Path(__file__).resolve().parents[2]
HOST = Inventory(host_platform="linux-x86_64", interpreters=(), compilers=(), cuda_toolkits=(), cross_compilers={},
                 emulators={}, wine=None, docker_engine=None, android_ndk=None)


def test_shipyards_own_components_depend_on_ember_as_their_pyproject_says():
    spec = load_spec(REPO)
    assert {name: release_dependencies(spec, name) for name in spec.release.components} == {
        "ember": (), "embervision": (), "emberaudio": ("ember",), "emberelastic": ("ember",),
        "ember-variant-provider": (), "ember-lite": ()}
    # Both pure components need ember; numpy and the test extras are not the release's.
    assert selection_dependencies(spec, ["emberaudio", "emberelastic"]) == {"ember": "emberaudio"}
    assert selection_dependencies(spec, ["emberaudio", "ember"]) == {}


def _fixture_copy(tmp_path: Path) -> Path:
    root = tmp_path / "release"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("dist", ".shipyard", "__pycache__"))
    return root


def test_dependencies_are_matched_by_canonical_name_transitively_and_without_extras(tmp_path):
    root = _fixture_copy(tmp_path)
    assert release_dependencies(load_spec(root), "fixpure") == ("fixcext",)
    pyproject = root / "library" / "fixcext" / "pyproject.toml"
    # fixcext now needs fixcuda (spelled as pip would accept it, on one platform only), and fixpure
    # only for an extra: the first is a dependency within the release, the second is not.
    pyproject.write_text(pyproject.read_text().replace(
        'requires-python = ">=3.9"\n',
        'requires-python = ">=3.9"\ndependencies = ["FixCuda>=0.1; sys_platform == \'win32\'", "numpy"]\n'
        '[project.optional-dependencies]\nall = ["fixpure"]\n'))
    spec = load_spec(root)
    assert release_dependencies(spec, "fixcext") == ("fixcuda",)
    assert selection_dependencies(spec, ["fixpure"]) == {"fixcext": "fixpure", "fixcuda": "fixcext"}


def test_a_narrowed_build_adds_the_cells_of_what_it_depends_on_unless_the_index_holds_them(tmp_path):
    root = _fixture_copy(tmp_path)
    spec = load_spec(root)
    said: list[str] = []
    cells, added = dependency_cells(spec, request(root, pythons=("3.11",), components=("fixpure",)), HOST, said.append)
    assert [c.id for c in cells] == ["fixcext-cpu-linux-x86_64-cp311-wheel"]
    assert added == {"fixcext": "fixpure"}
    assert said == ["also building fixcext: fixpure depends on it"]
    # What the variant's index holds (an earlier run's wheel, or the fragments a CI lane merged
    # before building its pure components) is taken from there, not built again.
    index = root / "dist" / "whl" / "cpu" / "fixcext"
    index.mkdir(parents=True)
    (index / "fixcext-0.3.0+cpu-cp311-cp311-manylinux_2_31_x86_64.whl").write_bytes(b"")
    said.clear()
    assert dependency_cells(spec, request(root, pythons=("3.11",), components=("fixpure",)), HOST,
                            said.append) == ([], {})
    assert said == [f"fixcext: taken from {root / 'dist' / 'whl' / 'cpu'} (fixpure depends on it)"]
    # Another Python's wheel is not that cell's; a selection with no dependency adds nothing.
    assert [c.id for c in dependency_cells(spec, request(root, pythons=("3.12",), components=("fixpure",)), HOST,
                                           said.append)[0]] == ["fixcext-cpu-linux-x86_64-cp312-wheel"]
    assert dependency_cells(spec, request(root, components=("fixcext",)), HOST, said.append) == ([], {})
    assert dependency_cells(spec, request(root), HOST, said.append) == ([], {})
