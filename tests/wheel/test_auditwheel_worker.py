"""The auditwheel processes a build shares (wheel/auditwheel_worker.py) repair exactly as
`python -m auditwheel repair` does, one process per wheel, and fail as it fails."""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from shipyard.errors import ToolError
from shipyard.host.toolchains.discover import discover
from shipyard.host.toolchains.resolve import Toolchain, resolve
from shipyard.release.matrix import builder_platform, expand
from shipyard.release.validate import load_spec
from shipyard.wheel.auditwheel_worker import AuditwheelWorkers
from shipyard.wheel.repair import repair_wheel


def test_a_failed_repair_reports_auditwheels_message_and_exit_status_and_the_worker_serves_on(tmp_path):
    missing = tmp_path / "fixcext-0.3.0-cp39-cp39-linux_x86_64.whl"
    with AuditwheelWorkers() as workers:
        for _ in range(2):  # the same worker answers the second request
            with pytest.raises(ToolError) as failed:
                workers.run(["repair", "--plat", "manylinux_2_31_x86_64", "-w", tmp_path / "out", missing],
                            extra_env={}, timeout=300, what=f"auditwheel repair {missing.name}")
            assert failed.value.returncode == 2  # argparse's error status, as the command gives it
            assert f"cannot access {missing}. No such file" in failed.value.output
            assert str(failed.value).startswith(f"auditwheel repair {missing.name} failed (exit 2)")


def test_repairs_asked_at_once_share_the_limited_workers_and_each_gets_its_own_answer(tmp_path):
    names = [tmp_path / f"fixcext-0.3.0-cp3{minor}-cp3{minor}-linux_x86_64.whl" for minor in (9, 10, 11, 12)]

    def repair(workers: AuditwheelWorkers, wheel: Path) -> str:
        try:
            workers.run(["repair", "--plat", "manylinux_2_31_x86_64", "-w", tmp_path / "out", wheel],
                        extra_env={}, timeout=300, what=f"auditwheel repair {wheel.name}")
        except ToolError as exc:
            return exc.output
        return "repaired"

    with AuditwheelWorkers(limit=2) as workers, ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(lambda wheel: repair(workers, wheel), names))
    for wheel, answer in zip(names, answers, strict=True):
        assert f"cannot access {wheel}. No such file" in answer, (wheel, answer)


@pytest.mark.slow
def test_the_shared_worker_repairs_each_pythons_wheel_byte_for_byte_as_auditwheels_own_process(
        minirelease_build, tmp_path, monkeypatch):
    """Both Pythons' raw wheels (libpng to graft from the sysroot, the same core library in each)
    through one worker, one after the other (the second meets what the first remembered), and
    each through `python -m auditwheel`: the same bytes."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # auditwheel's zip timestamps
    spec = load_spec(minirelease_build)
    cells = {c.python: c for c in expand(spec.release) if c.component == "fixcext" and c.variant == "cpu"
             and c.platform == "linux-x86_64"}
    raws = {python: next((minirelease_build / ".shipyard" / "raw" / cell.id).glob("*.whl"))
            for python, cell in cells.items()
            if (minirelease_build / ".shipyard" / "raw" / cell.id).is_dir()}
    assert len(raws) == 2, sorted((minirelease_build / ".shipyard" / "raw").iterdir())
    with AuditwheelWorkers() as workers:
        for python, raw in sorted(raws.items()):
            toolchain = resolve(cells[python], spec.release, discover())
            assert isinstance(toolchain, Toolchain)
            assert toolchain.compiler is not None and toolchain.compiler.sysroot is not None
            args = {"platform_tag": builder_platform(spec.release, cells[python]).wheel_platform_tag,
                    "ldpaths": toolchain.compiler.sysroot.library_dirs}
            shared = repair_wheel(raw, out_dir=tmp_path / "worker" / python, auditwheel=workers, **args)
            alone = repair_wheel(raw, out_dir=tmp_path / "process" / python, **args)
            assert shared.name == alone.name and "manylinux" in shared.name
            assert _sha256(shared) == _sha256(alone), python


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
