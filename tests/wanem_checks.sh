# Sourced by the pccl-wanem scenario tests (wanem_smoke.sh, wanem_optimize.sh, wanem_regions.sh); no
# "#!" line: not a script of its own.
# wanem_require_namespaces: exit 77 (ctest: skipped) where this machine cannot make rank namespaces
# (not root, no /dev/net/tun, no iproute2, or namespaces refused).
wanem_require_namespaces() {
  if [ "$(id -u)" != 0 ] || [ ! -c /dev/net/tun ] || ! command -v ip > /dev/null 2>&1; then
    echo "skipped: needs root, /dev/net/tun and iproute2"
    exit 77
  fi
  if ! ip netns add pccl-wanem-check 2> /dev/null; then
    echo "skipped: network namespaces unavailable"
    exit 77
  fi
  ip netns del pccl-wanem-check
}
