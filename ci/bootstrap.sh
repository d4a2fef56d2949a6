#!/usr/bin/env bash
# Prepare a fresh Debian 12 machine for shipyard: the system packages its builds and tests
# use, and a tools venv (.venv) holding nox and uv. Idempotent: a second run installs nothing.
#
#   bash ci/bootstrap.sh          what the builds need (every variant's wheels, conda packages and
#                                 mobile targets, and the components' own test suites they run)
#   bash ci/bootstrap.sh --all    that and what shipyard's own suite and the image, repro and
#                                 report sessions add (docker, clang, chromium, diffoscope, ...);
#                                 the nox sessions that need them run this themselves
#
# A CI job installs shipyard from an index and only its lane's packages (`shipyard ci bootstrap
# <lane>`, the sets in src/shipyard/resources/ci_lane_packages.toml); this script is for a machine
# that works on shipyard's own checkout.
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
# What the tools venv holds: nox (and the PyYAML the noxfile reads) and uv.
VENV_PACKAGES=("nox>=2024.4" "PyYAML>=6")
case "${1:-}" in
  "") ;;
  --all) APT_PACKAGES+=("${ALL_ONLY_PACKAGES[@]}") ;;
  *)
    echo "ci/bootstrap.sh: argument: unknown; give --all, or none for the builds (a CI lane's packages:" \
         "shipyard ci bootstrap <lane>) (got $1)" >&2
    exit 2 ;;
esac
# The uv shipyard depends on (pyproject.toml), the one place that names its range.
UV_REQUIREMENT="$(grep -o '"uv[<>=!~][^"]*"' pyproject.toml | head -1 | tr -d '"')"

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  install=(apt-get install -y -qq --no-install-recommends "${missing[@]}")
  # Package lists fetched within the hour are used as they are; an install that fails on them
  # updates them and tries once more.
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
if [[ ! -x .venv/bin/uv ]] || [[ ! -x .venv/bin/nox ]]; then
  echo "bootstrap: creating .venv with nox and uv ($python)"
  if "$python" -m pip --version >/dev/null 2>&1; then
    # No pip inside (ensurepip alone took 48 s of a cold bootstrap here): the Python's own pip puts
    # uv in, and uv the rest.
    [[ -x .venv/bin/python ]] || "$python" -m venv --without-pip .venv
    "$python" -m pip --python .venv/bin/python install --quiet --disable-pip-version-check "$UV_REQUIREMENT"
  else
    [[ -x .venv/bin/python ]] || "$python" -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check "$UV_REQUIREMENT"
  fi
  .venv/bin/uv pip install --quiet --python .venv/bin/python "${VENV_PACKAGES[@]}"
fi
echo "bootstrap: ready"
