#!/usr/bin/env bash
# ctest "packaging: pip install ...": what a PyTorch user does. Copies the checkout (its files, without
# build trees) to a temporary directory, makes a venv with --system-site-packages (Debian's numpy and
# torch stay visible), runs `pip install --no-build-isolation --no-index .` (offline: setuptools and
# wheel from Debian; setup.py builds libpccl with CMake in a temporary directory), checks that the build
# wrote nothing into the source tree, then, outside the checkout and with neither PCCL_LIBRARY nor
# PYTHONPATH, imports pccl from the venv and runs a master and 3 peer processes doing an all-reduce on
# loopback (_pip_smoke.py). Exits 77 (skipped) without python3-venv, pip, setuptools or wheel.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
python=${PCCL_PYTHON:-/usr/bin/python3}
if ! { "$python" -c "import ensurepip, venv" && "$python" -c "import setuptools, wheel" &&
  "$python" -m pip --version; } > /dev/null 2>&1; then
  echo "pip_install.sh: skipped: $python lacks venv/pip/setuptools/wheel (apt-get install python3-venv python3-pip python3-setuptools python3-wheel)"
  exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pccl-pip-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/src" "$tmp/run"

# The checkout's files: tracked and untracked-but-not-ignored ones (no build trees), or everything but
# build* directories when this is not a git checkout.
if git -C "$src" rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  (cd "$src" && git ls-files -z --cached --others --exclude-standard | tar --null --ignore-failed-read -T - -cf -) 2> /dev/null |
    tar -C "$tmp/src" -xf -
else
  tar -C "$src" --exclude='./build*' --exclude=./.git -cf - . | tar -C "$tmp/src" -xf -
fi
(cd "$tmp/src" && find . -print | sort) > "$tmp/before.txt"

"$python" -m venv --system-site-packages "$tmp/venv"
venv_python="$tmp/venv/bin/python"
# TMPDIR: setup.py's build directory lands in $tmp too, so that with a compiler cache (scripts/test.sh
# sets one through CMAKE_CXX_COMPILER_LAUNCHER) every path it compiles is the same relative to $tmp in
# each run, and the cache serves the next run.
(cd "$tmp/src" && env -u PYTHONPATH -u PCCL_LIBRARY PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
  TMPDIR="$tmp" CCACHE_BASEDIR="$tmp" "$venv_python" -m pip install --no-build-isolation --no-index .)

(cd "$tmp/src" && find . -print | sort) > "$tmp/after.txt"
if ! diff -u "$tmp/before.txt" "$tmp/after.txt"; then
  echo "pip_install.sh: FAIL: the pip build wrote into the source tree (above)" >&2
  exit 1
fi

cp "$src/python/tests/_pip_smoke.py" "$tmp/run/"
cd "$tmp/run"
env -u PYTHONPATH -u PCCL_LIBRARY "$venv_python" -I _pip_smoke.py 3
echo "pip_install.sh: OK"
