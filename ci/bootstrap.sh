#!/usr/bin/env bash
# Prepare a fresh Debian 12 machine for shipyard: the system packages its builds and tests
# use, and a tools venv (.venv) holding nox and uv. Idempotent: a second run installs nothing.
#
#   bash ci/bootstrap.sh          what the builds need (every variant's wheels, conda packages and
#                                 mobile targets, and the components' own test suites they run)
#   bash ci/bootstrap.sh --all    that and what shipyard's own suite and the image, repro and
#                                 report sessions add (docker, clang, chromium, diffoscope, ...);
#                                 the nox sessions that need them run this themselves
#   bash ci/bootstrap.sh SET      only a CI lane's packages (wheel-linux, wheel-pure, conda-linux,
#                                 conda-pure; APT_SETS below)
set -euo pipefail
cd "$(dirname "$0")/.."

# The main job (nox -s build-cpu) starts after these: 190 packages, about 510 MB on a bare Debian 12
# (the full list is about 350 packages, 815 MB, most of it chromium, clang, mingw and wine's libraries).
APT_PACKAGES=(
  git cmake ninja-build g++ g++-11            # native builds; nvcc 11.8 needs gcc <= 11
  libpng-dev libjpeg62-turbo-dev               # embervision links them; auditwheel vendors them
  g++-aarch64-linux-gnu g++-arm-linux-gnueabihf qemu-user   # mobile cross builds; ember's suite runs them under qemu
  g++-mingw-w64-x86-64 wine64                  # Windows DLLs of ember's core; ember's suite tests them under wine
)
ALL_ONLY_PACKAGES=(
  clang                                        # ember's core must build with clang -Werror too
  docker.io debootstrap docker-registry apache2-utils       # images, the local registry, htpasswd
  shellcheck                                   # actionlint checks the workflows' run: scripts with it
  chromium                                     # the report test renders dist/report/index.html headless
  diffoscope-minimal                           # nox -s repro: shows where two builds of an artifact differ
)
# `ci/bootstrap.sh <set>` installs only a CI lane's packages (the workflows' Linux lanes name
# theirs, src/shipyard/ci/steps.py); no argument installs what the builds need, for a dev machine.
# python3-dev: a job container builds against Debian's python3, which has no headers without it.
# No g++-11: a CUDA job's toolkit step installs its toolkit's host compiler (cuda_toolkits.toml).
declare -A APT_SETS=(
  [wheel-linux]="git cmake ninja-build g++ libpng-dev libjpeg62-turbo-dev python3-dev"
  [conda-linux]="git cmake ninja-build g++ libpng-dev libjpeg62-turbo-dev python3-dev"
  [wheel-pure]="git"                          # a pure wheel, tested against the native lanes' wheels
  # libsndfile1: emberaudio's tests load it through soundfile. conda-forge's soundfile brings its
  # own libsndfile; the bootstrap channel that stands in for it here repacks PyPI's soundfile,
  # which loads the system's.
  [conda-pure]="git libsndfile1"
)
# What the tools venv holds: nox (and the PyYAML the noxfile reads) and uv. A CI lane's job runs
# shipyard's commands, never nox, so its venv gets uv alone.
VENV_PACKAGES=("nox>=2024.4" "PyYAML>=6")
case "${1:-}" in
  "") ;;
  --all) APT_PACKAGES+=("${ALL_ONLY_PACKAGES[@]}") ;;
  *)
    if [[ -z "${APT_SETS[$1]+set}" ]]; then
      echo "ci/bootstrap.sh: set: unknown; name one of: ${!APT_SETS[*]}, --all, or none for the builds (got $1)" >&2
      exit 2
    fi
    read -r -a APT_PACKAGES <<< "${APT_SETS[$1]}"
    VENV_PACKAGES=() ;;
esac

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  install=(apt-get install -y -qq --no-install-recommends "${missing[@]}")
  # Package lists fetched within the hour (a CI job's container step has just done so) are used as
  # they are; an install that fails on them updates them and tries once more.
  if [[ -n "$(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' -mmin -60 2>/dev/null | head -1)" ]]; then
    "${install[@]}" >/dev/null || { apt-get update -qq && "${install[@]}" >/dev/null; }
  else
    apt-get update -qq
    "${install[@]}" >/dev/null
  fi
fi

# The tools venv runs nox; nox then makes one venv per session with shipyard in it.
python=""
for candidate in /root/.pyenv/versions/3.11*/bin/python3 /root/.pyenv/versions/3.12*/bin/python3 python3; do
  if command -v "$candidate" >/dev/null 2>&1; then python="$candidate"; break; fi
done
# uv beside nox: nox then makes its session venvs with uv, in seconds instead of half a minute.
if [[ ! -x .venv/bin/uv ]] || { ((${#VENV_PACKAGES[@]})) && [[ ! -x .venv/bin/nox ]]; }; then
  echo "bootstrap: creating .venv with ${VENV_PACKAGES[*]:+nox and }uv ($python)"
  if "$python" -m pip --version >/dev/null 2>&1; then
    # No pip inside (ensurepip alone took 48 s of a cold bootstrap here): the Python's own pip puts
    # uv in, and uv the rest.
    [[ -x .venv/bin/python ]] || "$python" -m venv --without-pip .venv
    "$python" -m pip --python .venv/bin/python install --quiet --disable-pip-version-check "uv>=0.8,<0.14"
  else
    [[ -x .venv/bin/python ]] || "$python" -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check "uv>=0.8,<0.14"
  fi
  if ((${#VENV_PACKAGES[@]})); then
    .venv/bin/uv pip install --quiet --python .venv/bin/python "${VENV_PACKAGES[@]}"
  fi
fi
echo "bootstrap: ready"
