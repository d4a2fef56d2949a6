"""What this machine is, as NVML reports it: the driver's CUDA version and each GPU's compute capability.

NVML's answers are first written down as a machine description (a small JSON-able dict, the
shape of `machines/*.json`), and everything else reads only that description. A recorded
description (`EMBER_VARIANT_MACHINE=FILE`, or `--machine FILE`) therefore runs exactly the code
a machine with a driver runs, from the description on.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Where a recorded description comes from instead of NVML (the plugin runs in an installer's
# subprocess: an environment variable is what reaches it).
MACHINE_ENV = "EMBER_VARIANT_MACHINE"


@dataclass(frozen=True)
class Gpu:
    name: str
    compute_capability: tuple[int, int]

    @property
    def cc(self) -> str:
        return f"{self.compute_capability[0]}.{self.compute_capability[1]}"


@dataclass(frozen=True)
class Machine:
    """The driver's CUDA version (None: no driver) and the GPUs; `note` says why there are none."""

    driver_cuda: tuple[int, int] | None
    gpus: tuple[Gpu, ...]
    note: str = ""

    @property
    def has_cuda(self) -> bool:
        return self.driver_cuda is not None and bool(self.gpus)

    def describe(self) -> str:
        if not self.has_cuda:
            return f"no CUDA GPU ({self.note or 'NVML reports none'})"
        gpus = ", ".join(f"{g.name} (compute capability {g.cc})" for g in self.gpus)
        assert self.driver_cuda is not None
        return f"{gpus}; driver supports CUDA {self.driver_cuda[0]}.{self.driver_cuda[1]}"


def nvml_description() -> dict[str, Any]:
    """This machine as NVML reports it, as a description; without NVML or a driver, why not."""
    try:
        import pynvml
    except ImportError as exc:  # the provider's own dependency: only a broken install lacks it
        return {"nvml": None, "error": f"nvidia-ml-py is not installed ({exc})"}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return {"nvml": None, "error": f"NVML: {exc}"}
    try:
        devices = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            devices.append({"name": name.decode() if isinstance(name, bytes) else str(name),
                            "cuda_compute_capability": [int(major), int(minor)]})
        return {"nvml": {"cuda_driver_version": int(pynvml.nvmlSystemGetCudaDriverVersion_v2()),
                         "devices": devices}}
    except pynvml.NVMLError as exc:
        return {"nvml": None, "error": f"NVML: {exc}"}
    finally:
        pynvml.nvmlShutdown()


def machine_from_description(description: dict[str, Any]) -> Machine:
    """The machine a description (NVML's answers, live or recorded) stands for. NVML encodes the
    driver's CUDA version as major * 1000 + minor * 10 (12040 is 12.4)."""
    nvml = description.get("nvml")
    if not nvml:
        return Machine(None, (), str(description.get("error") or "no NVML"))
    version = int(nvml["cuda_driver_version"])
    gpus = tuple(Gpu(str(d["name"]), (int(d["cuda_compute_capability"][0]), int(d["cuda_compute_capability"][1])))
                 for d in nvml.get("devices", []))
    return Machine((version // 1000, version % 1000 // 10), gpus, "" if gpus else "the driver reports no GPU")


def read_description(path: Path) -> dict[str, Any]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a machine description is a JSON object")
    return data


def current_machine() -> Machine:
    """The recorded machine `EMBER_VARIANT_MACHINE` names, else this one through NVML."""
    recorded = os.environ.get(MACHINE_ENV)
    return machine_from_description(read_description(Path(recorded)) if recorded else nvml_description())
