"""What device code a binary holds (its SASS and PTX archs), read with a toolkit's cuobjdump: the
proof of a new toolkit and the checks of a built wheel both ask it."""

from __future__ import annotations

import re
from pathlib import Path

from shipyard.errors import ToolError
from shipyard.plumbing import command
from shipyard.release.cuda_archs import DeviceCode


def cuda_sass_archs(binary: Path, cuobjdump: Path) -> set[str]:
    """The SASS archs ({"sm_37", "sm_50"}) embedded in `binary`; empty when it holds no device code."""
    return set(cuda_device_code(binary, cuobjdump).sass)


def cuda_device_code(binary: Path, cuobjdump: Path) -> DeviceCode:
    """The SASS and PTX archs embedded in `binary`; empty when it holds no device code.

    Raises ToolError when cuobjdump cannot read the binary (typically: a fatbin from another
    toolkit generation).
    """
    binary = Path(binary)
    if not binary.is_file():
        raise ToolError(f"cuobjdump: no such file: {binary}")
    result = command.run([cuobjdump, "--list-elf", "--list-ptx", binary], check=False, timeout=300,
                         what="cuobjdump --list-elf --list-ptx")
    if result.returncode != 0:
        if "does not contain device code" in result.stderr + result.stdout:
            return DeviceCode()
        raise ToolError(
            f"{cuobjdump} cannot read the device code in {binary} (exit {result.returncode}). A cuobjdump "
            "reads only fatbins its own toolkit generation can: use the cuobjdump installed beside the "
            "nvcc that built the binary (InstalledCudaToolkit.cuobjdump)",
            cmd=list(result.args), returncode=result.returncode, output=result.output)
    return DeviceCode(
        frozenset(re.findall(r"\.(sm_\d+[a-z]?)\.cubin\s*$", result.stdout, flags=re.MULTILINE)),
        frozenset(re.findall(r"\.(sm_\d+[a-z]?)\.ptx\s*$", result.stdout, flags=re.MULTILINE)))
