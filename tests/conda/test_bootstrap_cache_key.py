"""The bootstrap channel's cache key is pinned: a request for the same inputs must find the channel a
machine already built (rebuilding it takes about 20 minutes), so the request record that keys
`requests/<digest>.json` must keep its bytes across refactors.

The digest below changes, on purpose, only when what it covers changes: the planner's REVISION,
py-rattler-build's version, the recipe templates and Debian library table in
resources/conda_bootstrap/, the CUDA runtime pins of resources/cuda_toolkits.toml. Update it then,
and only then: every machine builds its channel again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shipyard.conda.bootstrap import ensure_bootstrap_channel
from shipyard.errors import ToolError

PINNED_REQUEST = "2a93c7f02591dfa9b8614fc1d02ff755c4a4f3878974d32d08ffef64b5c72ad6"


def _fake_pyenv(root: Path) -> Path:
    """A pyenv root whose only Python 3.11 is a script answering the interpreter probe: its bytes,
    and so its identity in the request, are the same on every machine."""
    exe = root / "versions" / "3.11.7" / "bin" / "python3.11"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\necho 3.11.7\necho\n")
    exe.chmod(0o755)
    return root


def test_the_same_request_finds_the_channel_built_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    channel = cache / "a-channel-built-before"
    for subdir in ("linux-64", "noarch"):
        (channel / subdir).mkdir(parents=True)
        (channel / subdir / "repodata.json").write_text(json.dumps({"packages.conda": {}}))
    (cache / "requests").mkdir()
    (cache / "requests" / f"{PINNED_REQUEST}.json").write_text(json.dumps({"channel": channel.name}))
    # A changed key would go on to resolve: make pip fail at once instead of asking PyPI.
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    lines: list[str] = []
    try:
        found = ensure_bootstrap_channel(pythons=["3.11"], cuda_versions=["11.8"], requirements=["hypothesis>=6"],
                                         cache_root=cache, pyenv=_fake_pyenv(tmp_path / "pyenv"),
                                         progress=lines.append)
    except ToolError as exc:
        pytest.fail(f"the request's cache key changed: it no longer finds requests/{PINNED_REQUEST}.json "
                    f"and resolved again ({exc.args[0][:200]})")
    assert found.cached and found.path == channel
    assert lines == [f"cached: {channel} (0 packages)"]
    assert sorted(p.name for p in (cache / "requests").iterdir()) == [f"{PINNED_REQUEST}.json"]
