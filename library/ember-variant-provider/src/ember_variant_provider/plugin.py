"""The variant provider plugin (PEP 825): the `ember` namespace's features and what this machine supports.

Features, in the order an installer ranks them (the first decides first):
- `platform`: `cuda` when the driver runs some published code on every GPU, and always `cpu`.
- `arch`, `arch_2`, `arch_3`, `arch_4` (several values each, the same list in all four): the SASS
  (`sm_XY`) and PTX (`compute_XY`) the variant's binaries carry. An installer matches a variant
  when each of its features has one value the machine supports (any one value of a feature; every
  feature), and a build fits a machine when each GPU runs some code it carries: the machine gives
  each of its GPU models (compute capabilities) a feature of its own, with what that model runs
  (archs.py), so each model must run one of the variant's archs. A machine with more models than
  features reports the CPU build only.
- `cuda_runtime`: the runtime the variant was built with; the machine supports what its driver runs.

Each list is ordered most preferred first: CUDA over CPU, a GPU's own SASS over older SASS over
PTX, the newest runtime the driver runs first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ember_variant_provider.archs import all_arch_values, all_runtime_values, runnable_archs, runnable_runtimes
from ember_variant_provider.machine import Machine, current_machine

NAMESPACE = "ember"
PLATFORM, ARCH, RUNTIME = "platform", "arch", "cuda_runtime"
# One feature per GPU model of a machine (see above); shipyard writes a variant's archs under each.
ARCH_FEATURES = (ARCH, "arch_2", "arch_3", "arch_4")


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
    models = gpu_models(machine)
    runtimes = runnable_runtimes(machine.driver_cuda)
    if not runtimes or len(models) > len(ARCH_FEATURES):
        return cpu
    # The models in turn over the features: each model has at least one of them.
    return [VariantFeatureConfig(PLATFORM, ["cuda", "cpu"]),
            *(VariantFeatureConfig(name, runnable_archs(models[n % len(models)]), multi_value=True)
              for n, name in enumerate(ARCH_FEATURES)),
            VariantFeatureConfig(RUNTIME, runtimes)]


def gpu_models(machine: Machine) -> list[tuple[int, int]]:
    """The machine's distinct compute capabilities, oldest first."""
    return sorted({g.compute_capability for g in machine.gpus})


class EmberVariantPlugin:
    """The plugin object variantlib loads (`plugin-api: ember_variant_provider.plugin:EmberVariantPlugin`)."""

    namespace = NAMESPACE
    # What this machine supports depends on the machine: never usable as a build-time plugin.
    all_properties_compatible = False

    @classmethod
    def get_all_configs(cls) -> list[VariantFeatureConfig]:
        return [VariantFeatureConfig(PLATFORM, ["cuda", "cpu"]),
                *(VariantFeatureConfig(name, all_arch_values(), multi_value=True) for name in ARCH_FEATURES),
                VariantFeatureConfig(RUNTIME, all_runtime_values())]

    @classmethod
    def get_supported_configs(cls) -> list[VariantFeatureConfig]:
        return supported_configs(current_machine())
