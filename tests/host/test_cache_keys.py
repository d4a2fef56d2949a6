"""Cache keys: every interpreter is keyed by its full version and its binary's hash."""

from __future__ import annotations

from pathlib import Path

from shipyard.host.toolchains.discover import find_interpreters
from shipyard.host.toolchains.resolve import Toolchain
from shipyard.plumbing.build_cache import cache_key


def _python_on_path(folder: Path, version: str, build: str) -> None:
    """A stand-in `python3.11` that answers shipyard's probe like a real one would."""
    folder.mkdir()
    exe = folder / "python3.11"
    exe.write_text(f"#!/bin/sh\n# build {build}\necho {version}\necho\n")
    exe.chmod(0o755)


def test_interpreters_on_path_with_one_minor_but_another_patch_or_binary_get_other_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    found = {}
    for name, version, build in (("old", "3.11.7", "a"), ("patched", "3.11.9", "a"), ("rebuilt", "3.11.9", "b")):
        _python_on_path(tmp_path / name, version, build)
        monkeypatch.setenv("PATH", f"{tmp_path / name}:/usr/bin:/bin")
        [interpreter] = [i for i in find_interpreters() if i.version == "3.11"]
        assert interpreter.path == tmp_path / name / "python3.11"
        assert interpreter.full_version == version  # asked, not guessed from the file name
        found[name] = interpreter
    toolchains = {name: Toolchain(i, None, None, None).identity for name, i in found.items()}
    assert len(set(toolchains.values())) == 3, toolchains
    # The same for the wheel's and the test run's keys, which name the interpreter.
    wheel_keys = {cache_key(kind="wheel", sources="s", spec_section={}, toolchain=t, python="3.11")
                  for t in toolchains.values()}
    test_keys = {cache_key(kind="test", sources="s", spec_section={}, toolchain=i.identity, python="3.11")
                 for i in found.values()}
    assert len(wheel_keys) == len(test_keys) == 3
    assert found["patched"].identity.startswith("3.11.9/") and found["patched"].identity != found["rebuilt"].identity
