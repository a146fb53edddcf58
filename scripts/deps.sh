#!/usr/bin/env bash
# Installs pccl's build and test dependencies from Debian 12 packages (skipped when already present).
# With arguments, installs those packages instead (scripts/gpu.sh: the HIP toolchain).
set -euo pipefail
usage() {
  cat <<'EOF'
usage: scripts/deps.sh [--bench | PACKAGE...]
  Installs pccl's build and test dependencies from Debian 12 packages with apt-get, only those missing
  (needs root when something is missing). With PACKAGE arguments, installs those instead.
  --bench: the build dependencies and the benchmark tools: iperf3 (bench/wanem_validate.sh) and
  gnuplot-nox (bench/plot.sh); bench/run_all.sh installs those two itself when they are missing.
EOF
}
bench=0
for arg in "$@"; do
  case "$arg" in
    -h | --help) usage; exit 0 ;;
    --bench) bench=1 ;;
    -*) echo "deps.sh: unknown option $arg" >&2; usage >&2; exit 2 ;;
  esac
done
PACKAGES=(cmake ninja-build g++ gcc pkg-config libasio-dev libsodium-dev libzstd-dev libfmt-dev libcli11-dev catch2 libgloo-dev etcd-server ccache
          python3-venv python3-pip python3-setuptools python3-wheel)
if [ $bench -eq 1 ]; then
  [ $# -eq 1 ] || { echo "deps.sh: --bench takes no PACKAGE" >&2; usage >&2; exit 2; }
  PACKAGES+=(iperf3 gnuplot-nox)
elif [ $# -gt 0 ]; then
  PACKAGES=("$@")
fi
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "pccl: missing packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})" >&2
  exit 1
fi
echo "pccl: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# Another apt-get (a user's, an unattended upgrade) may hold the locks: wait for it rather than fail.
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
