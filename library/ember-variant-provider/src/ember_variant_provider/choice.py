"""The variant this machine should install, as an installer that knows variants picks it, and why.

The ranking is variantlib's (`get_variants_by_priority`: it runs this package's plugin in a
subprocess, as an installer does); this module only says in words why each variant was kept or
dropped, from the same supported properties the plugin reported.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ember_variant_provider.archs import arch_runs_on, runnable_archs
from ember_variant_provider.machine import MACHINE_ENV, Machine, current_machine
from ember_variant_provider.plugin import (
    ARCH,
    ARCH_FEATURES,
    NAMESPACE,
    PLATFORM,
    RUNTIME,
    gpu_models,
    supported_configs,
)


@dataclass(frozen=True)
class Choice:
    label: str  # the chosen variant ("cu124", "cpu")
    why: str
    ranked: tuple[str, ...]  # every variant this machine runs, best first
    dropped: dict[str, str]  # every variant it does not run, and why


def choose(variants_json: dict[str, Any], machine_file: Path | None = None) -> Choice:
    """Rank the variants of a `*-variants.json` for this machine (or the recorded one) with variantlib."""
    from variantlib.api import get_variants_by_priority
    from variantlib.plugins import loader

    previous = os.environ.get(MACHINE_ENV)
    if machine_file is not None:  # the plugin runs in variantlib's subprocess: the environment reaches it
        os.environ[MACHINE_ENV] = str(Path(machine_file).resolve())
    try:
        # variantlib memoises a plugin's answers per process; the machine may have changed since
        # (another --machine), and an answer about another machine is wrong.
        loader.VARIANT_PROVIDER_CACHE_TABLE.clear()
        ranked = tuple(v.label for v in get_variants_by_priority(variants_json=variants_json)
                       if not v.is_null_variant())
        machine = current_machine()
    finally:
        if previous is None:
            os.environ.pop(MACHINE_ENV, None)
        else:
            os.environ[MACHINE_ENV] = previous
    reasons = {label: reason(props.get(NAMESPACE, {}), machine)
               for label, props in variants_json.get("variants", {}).items()}
    if not ranked:
        raise LookupError(f"no published variant runs here ({machine.describe()}): "
                          + "; ".join(f"{label}: {why}" for label, why in sorted(reasons.items())))
    dropped = {label: why for label, why in reasons.items() if label not in ranked}
    others = f"; ranked first of {', '.join(ranked)}" if len(ranked) > 1 else ""
    return Choice(ranked[0], reasons[ranked[0]] + others, ranked, dropped)


def reason(props: dict[str, list[str]], machine: Machine) -> str:
    """Why a variant with these `ember` properties runs on `machine` or not, in words."""
    if props.get(PLATFORM) == ["cpu"]:
        return "the CPU build runs on any machine"
    supported = {c.name: c.values for c in supported_configs(machine)}
    if not machine.has_cuda:
        return f"a CUDA build, and this machine has {machine.describe()}"
    models = gpu_models(machine)
    if len(models) > len(ARCH_FEATURES):
        return (f"this machine has {len(models)} GPU models; the provider tells at most {len(ARCH_FEATURES)} apart "
                f"({machine.describe()})")
    runtime = (props.get(RUNTIME) or ["?"])[0]
    assert machine.driver_cuda is not None
    driver = f"{machine.driver_cuda[0]}.{machine.driver_cuda[1]}"
    if runtime not in supported.get(RUNTIME, []):
        return f"needs a driver for CUDA {runtime}; this one supports CUDA {driver}"
    archs = props.get(ARCH, [])
    carried = ", ".join(archs) or "no device code"
    blind = [g for g in machine.gpus if not any(arch_runs_on(a, g.compute_capability) for a in archs)]
    if blind:
        names = ", ".join(f"{g.name} ({g.cc})" for g in blind)
        return (f"carries {carried}: none runs on the {names} (SASS sm_XY needs the same major and a minor of "
                f"at least Y, PTX compute_XY a GPU of X.Y or newer)")
    # The code the driver runs on each GPU: the first of that GPU's preferences the build carries.
    runs = []
    for gpu in machine.gpus:
        arch = next(a for a in runnable_archs(gpu.compute_capability) if a in archs)
        kind = "SASS" if arch.startswith("sm_") else "PTX, compiled by the driver at first use,"
        runs.append((f"{arch} {kind}", f"{gpu.name} ({gpu.cc})"))
    said = "; ".join(f"its {code} runs on {', '.join(g for c, g in runs if c == code)}"
                     for code in dict.fromkeys(code for code, _ in runs))
    return f"{said}; built with CUDA {runtime}, the driver supports {driver}"
