"""Which conda packages a CUDA variant builds and runs with: the one place that holds conda-forge's
CUDA major boundary, read by the variant config the recipes render with (conda/variants.py) and
by the bootstrap channel that stands in for conda-forge here (conda/bootstrap_plan.py).

Up to CUDA 11, conda-forge ships the runtime as one package, `cudatoolkit X.Y`, and its CUDA
compiler package is `nvcc_<subdir>` (a wrapper around a toolkit installed outside conda). From
CUDA 12 the toolkit is split: `cuda-version X.Y` ties every CUDA package to one release,
`cuda-cudart` is the runtime and `cuda-nvcc_<subdir>` the compiler package. conda-forge has no
`cuda-cudart 11.x` or `cudatoolkit 12.x`: a recipe that asks for either cannot be built there.
"""

from __future__ import annotations

from dataclasses import dataclass

# The first CUDA major whose conda-forge packages are the split cuda-* ones.
SPLIT_TOOLKIT_MAJOR = 12

# The values of the variant key `cuda_runtime`, which the recipes branch on.
CUDATOOLKIT = "cudatoolkit"
CUDA_CUDART = "cuda-cudart"


@dataclass(frozen=True)
class CudaCondaPackages:
    """conda-forge's packages for one CUDA version (`cuda_version` "11.8", "12.4")."""

    cuda_version: str
    runtime: str  # CUDATOOLKIT or CUDA_CUDART: the variant key `cuda_runtime`
    compiler: str  # conda-forge's `cuda_compiler` variant value: compiler('cuda') is <it>_<subdir>

    @property
    def split(self) -> bool:
        return self.runtime == CUDA_CUDART

    def compiler_package(self, subdir: str) -> str:
        """What `${{ compiler('cuda') }}` renders to for `subdir`: nvcc_linux-64, cuda-nvcc_linux-64."""
        return f"{self.compiler}_{subdir}"

    def runtime_packages(self) -> tuple[str, ...]:
        """The names a CUDA package's host and run requirements hold, in the recipes' order."""
        return ("cuda-version", CUDA_CUDART) if self.split else (CUDATOOLKIT,)


def cuda_conda_packages(cuda_version: str) -> CudaCondaPackages:
    """The packages of CUDA `cuda_version` ("10.2", "11.8", "12.4", "13.0")."""
    major = int(cuda_version.split(".", 1)[0])
    if major >= SPLIT_TOOLKIT_MAJOR:
        return CudaCondaPackages(cuda_version, CUDA_CUDART, "cuda-nvcc")
    return CudaCondaPackages(cuda_version, CUDATOOLKIT, "nvcc")
