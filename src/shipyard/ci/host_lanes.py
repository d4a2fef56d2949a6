"""The Windows and macOS lanes: on their runners, with the runner's compilers (MSVC, Xcode clang)
and the libraries the wheels vendor from a named source (vcpkg, Homebrew).

Wheels build with cibuildwheel (pinned, ci/cibuildwheel_config.py): its configuration comes from
`shipyard ci cibuildwheel` (the job's cells, the native core built once in `before-all`, delvewheel or
delocate repairing each wheel), and `shipyard build --wheelhouse` then labels, checks, tests, records
and attests those wheels as on Linux. Conda packages build inside `shipyard conda build`.

Checked on the machine these were written on as generated text only (actionlint, the tests in
tests/ci/test_ci_workflows.py): no Windows or macOS runner was ever run (docs/pipeline.md).
"""

from __future__ import annotations

from shipyard.ci.cibuildwheel_config import CIBUILDWHEEL_PIN
from shipyard.ci.jobs import Lane
from shipyard.ci.runners import CUDA_WINDOWS_RELEASES, VCPKG_TRIPLET, VENDORED_LIBRARY_SOURCES
from shipyard.ci.steps import (
    JOB_ARGS,
    MATRIX_ENV,
    PYTHONS_ENV,
    Job,
    Step,
    build_upload_and_judge,
    checkout,
    for_job,
    host_tools,
    pythons_and_cache,
    signing_env,
)
from shipyard.errors import SpecError
from shipyard.release.kinds import KINDS, WHEEL
from shipyard.release.spec import Spec


def _windows_cuda_step(lane: Lane) -> Step:
    missing = sorted({job.cuda for job in lane.jobs if job.cuda and job.cuda not in CUDA_WINDOWS_RELEASES})
    if missing:
        raise SpecError(f"release.yaml: CUDA {', '.join(missing)} is built on Windows but "
                            f"shipyard.ci.runners.CUDA_WINDOWS_RELEASES has no installer release for it; add "
                            f"the full version (e.g. \"12.4\": \"12.4.1\") or exclude the cells")
    releases = " ".join(f"{k}={v}" for k, v in CUDA_WINDOWS_RELEASES.items())
    return {"name": "CUDA toolkit (NVIDIA network installer: compiler and runtime)", "if": "matrix.cuda != ''",
            "shell": "pwsh", "env": {"CUDA": "${{ matrix.cuda }}", "CUDA_RELEASES": releases},
            "run": "$full = ($env:CUDA_RELEASES -split ' ' | Where-Object { $_ -like \"$($env:CUDA)=*\" }) "
                   "-replace '^.*=', ''\n"
                   "$url = \"https://developer.download.nvidia.com/compute/cuda/$full/network_installers/"
                   "cuda_${full}_windows_network.exe\"\n"
                   "Invoke-WebRequest -Uri $url -OutFile cuda_installer.exe\n"
                   "Start-Process -Wait -FilePath .\\cuda_installer.exe -ArgumentList "
                   "'-s', \"nvcc_$($env:CUDA)\", \"cudart_$($env:CUDA)\", \"visual_studio_integration_$($env:CUDA)\"\n"
                   "$root = \"C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v$($env:CUDA)\"\n"
                   "\"CUDA_HOME=$root\" | Out-File -Append -Encoding utf8 $env:GITHUB_ENV\n"
                   "\"$root\\bin\" | Out-File -Append -Encoding utf8 $env:GITHUB_PATH\n"}


def _msvc_step() -> Step:
    # Only what vcvars64 changed goes to GITHUB_ENV: `set` lists the whole environment, and exporting
    # the rest would pin the runner's own variables (and any a later step sets) to this step's values.
    return {"name": "MSVC environment (vcvars64 of the runner's Visual Studio)", "shell": "pwsh",
            "run": "$vs = & \"${env:ProgramFiles(x86)}\\Microsoft Visual Studio\\Installer\\vswhere.exe\" "
                   "-latest -property installationPath\n"
                   "$before = @{}  # case-insensitive, as Windows' variable names are\n"
                   "Get-ChildItem env: | ForEach-Object { $before[$_.Name] = $_.Value }\n"
                   "cmd /c \"`\"$vs\\VC\\Auxiliary\\Build\\vcvars64.bat`\" >nul && set\" | ForEach-Object {\n"
                   "  if ($_ -match '^([^=]+)=(.*)$' -and $before[$matches[1]] -cne $matches[2]) {\n"
                   "    \"$($matches[1])=$($matches[2])\" | Out-File -Append -Encoding utf8 $env:GITHUB_ENV\n"
                   "  }\n"
                   "}\n"}


def vendoring_components(spec: Spec, lane: Lane) -> list[str]:
    """The lane's components whose wheels vendor libraries (release.yaml's `vendored_libraries`)."""
    if not KINDS[lane.kind].vendors_libraries:
        return []  # conda packages take theirs from release.yaml's conda.channels
    return sorted({name for job in lane.jobs for name in job.components
                   if (c := spec.release.components.get(name)) and c.vendored_libraries})


def vendored_libraries(spec: Spec, lane: Lane) -> list[str]:
    """The libraries the lane's wheels vendor, in name order."""
    names = sorted({lib for name in vendoring_components(spec, lane)
                    for lib in spec.release.components[name].vendored_libraries})
    unknown = [lib for lib in names if lane.os not in VENDORED_LIBRARY_SOURCES.get(lib, {})]
    if unknown:
        raise SpecError(f"release.yaml: vendored_libraries {', '.join(unknown)} have no {lane.os} source; add "
                            f"the vcpkg port or Homebrew formula to shipyard.ci.runners.VENDORED_LIBRARY_SOURCES")
    return names


def _library_step(os_name: str, libraries: list[str], components: list[str]) -> Step:
    packages = " ".join(VENDORED_LIBRARY_SOURCES[lib][os_name] for lib in libraries)
    # Only the jobs of the components that vendor them (a JSON list, read by fromJSON; a native
    # job has one component).
    only = "contains(fromJSON('[" + ", ".join(f'"{c}"' for c in components) + "]'), matrix.components)"
    if os_name == "windows":
        return {"name": f"{', '.join(libraries)} from vcpkg ({VCPKG_TRIPLET}; delvewheel vendors the DLLs)",
                "if": only, "shell": "pwsh", "env": {"PORTS": packages, "TRIPLET": VCPKG_TRIPLET},
                "run": "& \"$env:VCPKG_INSTALLATION_ROOT\\vcpkg.exe\" install --triplet $env:TRIPLET "
                       "@($env:PORTS -split ' ')\n"
                       "if ($LASTEXITCODE -ne 0) { exit $LASTEXITCODE }\n"
                       "$root = Join-Path $env:VCPKG_INSTALLATION_ROOT \"installed\\$env:TRIPLET\"\n"
                       "\"CMAKE_PREFIX_PATH=$root\" | Out-File -Append -Encoding utf8 $env:GITHUB_ENV\n"
                       "# delvewheel finds the DLLs it vendors on PATH\n"
                       "\"$root\\bin\" | Out-File -Append -Encoding utf8 $env:GITHUB_PATH\n"}
    return {"name": f"{', '.join(libraries)} from Homebrew (delocate vendors the dylibs)", "if": only,
            "env": {"FORMULAE": packages},
            "run": "read -r -a formulae <<< \"$FORMULAE\"\n"
                   "brew install --quiet \"${formulae[@]}\"\n"
                   "prefixes=\"\"\n"
                   "for formula in \"${formulae[@]}\"; do prefixes=\"${prefixes:+$prefixes:}$(brew --prefix "
                   "\"$formula\")\"; done\n"
                   "echo \"CMAKE_PREFIX_PATH=$prefixes\" >> \"$GITHUB_ENV\"\n"}


# Where the job's cibuildwheel writes its wheels, which `shipyard build --wheelhouse` takes.
WHEELHOUSE = "wheelhouse"


def _cibuildwheel_steps() -> list[Step]:
    """cibuildwheel, pinned, beside shipyard (with ninja: the native core's CMake generator, as
    here), then one run per component of the job with the configuration shipyard writes for it. A
    failure here is a build that did not finish: the job fails before any upload."""
    return [
        {"name": f"Install {CIBUILDWHEEL_PIN} and ninja beside shipyard",
         "env": {"CIBUILDWHEEL": CIBUILDWHEEL_PIN},
         "run": "python -m uv pip install --python \"$(python -c 'import sys; print(sys.executable)')\" "
                "\"$CIBUILDWHEEL\" ninja\n"},
        {"name": "Build and repair every Python's wheel with cibuildwheel (shipyard ci cibuildwheel)",
         "env": {**MATRIX_ENV, **PYTHONS_ENV, "PLATFORM": "${{ matrix.platform }}"},
         "run": JOB_ARGS +
                "for component in \"${components[@]}\"; do\n"
                "  config=\"$RUNNER_TEMP/cibuildwheel-$component.toml\"\n"
                "  project=$(shipyard ci cibuildwheel --platform \"$PLATFORM\" --variant \"$VARIANT\" "
                "--component \"$component\" \"${python_args[@]}\" --output \"$config\")\n"
                f"  python -m cibuildwheel --config-file \"$config\" --output-dir {WHEELHOUSE} \"$project\"\n"
                "done\n"},
    ]


def host_lane(spec: Spec, lane: Lane, command: str) -> Job:
    """Windows and macOS jobs. shipyard's install brings delvewheel (Windows) or delocate (macOS)
    by its platform markers: cibuildwheel repairs each wheel with it (`shipyard conda build` needs
    neither)."""
    steps = [checkout(), *host_tools(spec)]
    if lane.os == "windows":
        steps.append(_msvc_step())
        if any(job.cuda for job in lane.jobs):
            steps.append(_windows_cuda_step(lane))
    libraries = vendored_libraries(spec, lane)
    if libraries:
        steps.append(_library_step(lane.os, libraries, vendoring_components(spec, lane)))
    steps += pythons_and_cache()
    name = "Build and test every Python"
    if lane.kind == WHEEL.name:
        steps += _cibuildwheel_steps()
        command = f"{command.rstrip()} --wheelhouse {WHEELHOUSE}"
        name = "Label, check, test and record every Python's wheel (shipyard build --wheelhouse)"
    steps += build_upload_and_judge(name, {**MATRIX_ENV, **PYTHONS_ENV, **signing_env(spec)}, for_job(command))
    return {"steps": steps}
