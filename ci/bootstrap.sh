#!/usr/bin/env bash
# Prepare a fresh Debian 12 machine for shipyard: the system packages its builds and tests
# use, and a tools venv (.venv) holding nox and uv. Idempotent: a second run installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  git cmake ninja-build g++ g++-11            # native builds; nvcc 11.8 needs gcc <= 11
  libpng-dev libjpeg62-turbo-dev               # embervision links them; auditwheel vendors them
  g++-aarch64-linux-gnu g++-arm-linux-gnueabihf qemu-user   # mobile cross builds and their tests
  g++-mingw-w64-x86-64 wine64                  # Windows DLLs of ember's core, tested under wine
  clang                                        # ember's core must build with clang -Werror too
  docker.io debootstrap docker-registry apache2-utils       # images, the local registry, htpasswd
  shellcheck                                   # actionlint checks the workflows' run: scripts with it
  chromium                                     # the report test renders dist/report/index.html headless
  diffoscope-minimal                           # nox -s repro: shows where two builds of an artifact differ
)

# `ci/bootstrap.sh <set>` installs only a CI lane's packages (the workflows' Linux lanes name
# theirs, src/shipyard/ci/steps.py); no argument installs everything above, for a dev machine.
# python3-dev: a job container builds against Debian's python3, which has no headers without it.
declare -A APT_SETS=(
  [wheel-linux]="git cmake ninja-build g++ g++-11 libpng-dev libjpeg62-turbo-dev python3-dev"
  [conda-linux]="git cmake ninja-build g++ g++-11 libpng-dev libjpeg62-turbo-dev python3-dev"
  [wheel-pure]="git"                          # a pure wheel, tested against the native lanes' wheels
  [conda-pure]="git"
)
if (($#)); then
  if [[ -z "${APT_SETS[$1]+set}" ]]; then
    echo "ci/bootstrap.sh: set: unknown; name one of: ${!APT_SETS[*]}, or none for everything (got $1)" >&2
    exit 2
  fi
  read -r -a APT_PACKAGES <<< "${APT_SETS[$1]}"
fi

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The tools venv runs nox; nox then makes one venv per session with shipyard in it.
python=""
for candidate in /root/.pyenv/versions/3.11*/bin/python3 /root/.pyenv/versions/3.12*/bin/python3 python3; do
  if command -v "$candidate" >/dev/null 2>&1; then python="$candidate"; break; fi
done
# uv beside nox: nox then makes its session venvs with uv, in seconds instead of half a minute.
if [[ ! -x .venv/bin/nox || ! -x .venv/bin/uv ]]; then
  echo "bootstrap: creating .venv with nox and uv ($python)"
  [[ -x .venv/bin/python ]] || "$python" -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check "nox>=2024.4" "PyYAML>=6" "uv>=0.8,<0.14"
fi
echo "bootstrap: ready"
