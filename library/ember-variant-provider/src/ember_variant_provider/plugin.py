"""The variant provider plugin (PEP 825): the `ember` namespace's features and what this machine supports.

Features, in the order an installer ranks them (the first decides first):
- `platform`: `cuda` when the driver runs some published code on every GPU, and always `cpu`.
- `arch` (several values per variant): the SASS (`sm_XY`) and PTX (`compute_XY`) the variant's
  binaries carry; the machine supports what every one of its GPUs runs (archs.py).
- `cuda_runtime`: the runtime the variant was built with; the machine supports what its driver runs.

Each list is ordered most preferred first: CUDA over CPU, a GPU's own SASS over older SASS over
PTX, the newest runtime the driver runs first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ember_variant_provider.archs import all_arch_values, all_runtime_values, runnable_on_all, runnable_runtimes
from ember_variant_provider.machine import Machine, current_machine

NAMESPACE = "ember"
PLATFORM, ARCH, RUNTIME = "platform", "arch", "cuda_runtime"


@dataclass(frozen=True)
class VariantFeatureConfig:
    """One feature and its values (variantlib's VariantFeatureConfigType protocol)."""

    name: str
    values: list[str] = field(default_factory=list)
    multi_value: bool = False


def supported_configs(machine: Machine) -> list[VariantFeatureConfig]:
    """What `machine` runs, as the plugin reports it."""
    cpu = [VariantFeatureConfig(PLATFORM, ["cpu"])]
    if not machine.has_cuda:
        return cpu
    assert machine.driver_cuda is not None
    archs = runnable_on_all(g.compute_capability for g in machine.gpus)
    runtimes = runnable_runtimes(machine.driver_cuda)
    if not archs or not runtimes:
        return cpu
    return [VariantFeatureConfig(PLATFORM, ["cuda", "cpu"]), VariantFeatureConfig(ARCH, archs, multi_value=True),
            VariantFeatureConfig(RUNTIME, runtimes)]


class EmberVariantPlugin:
    """The plugin object variantlib loads (`plugin-api: ember_variant_provider.plugin:EmberVariantPlugin`)."""

    namespace = NAMESPACE
    # What this machine supports depends on the machine: never usable as a build-time plugin.
    all_properties_compatible = False

    @classmethod
    def get_all_configs(cls) -> list[VariantFeatureConfig]:
        return [VariantFeatureConfig(PLATFORM, ["cuda", "cpu"]),
                VariantFeatureConfig(ARCH, all_arch_values(), multi_value=True),
                VariantFeatureConfig(RUNTIME, all_runtime_values())]

    @classmethod
    def get_supported_configs(cls) -> list[VariantFeatureConfig]:
        return supported_configs(current_machine())
