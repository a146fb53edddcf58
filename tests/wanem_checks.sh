# Sourced by the pccl-wanem scenario tests (wanem_smoke.sh, wanem_optimize.sh, wanem_regions.sh,
# wanem_fault_ops.sh, wanem_faults.sh); no "#!" line: not a script of its own.
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

# wanem_scenario_start NAME "$@": the start of a scenario test that takes PATH/TO/BUILD_DIR, after the
# caller defined usage(): --help, an unknown option (exit 2) or not exactly one argument; then BUILD_DIR,
# ROOT (the source tree), the namespace check, and a temporary directory $dir removed on exit.
wanem_scenario_start() {
  local name=$1
  shift
  case "${1:-}" in
    -h | --help) usage; exit 0 ;;
    -*) echo "$name: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
  [ $# -eq 1 ] || { usage >&2; exit 2; }
  BUILD_DIR=$(cd "$1" && pwd)
  ROOT=$(cd "$(dirname "${BASH_SOURCE[1]}")/.." && pwd)
  wanem_require_namespaces
  dir=$(mktemp -d "${TMPDIR:-/tmp}/pccl-$name.XXXXXX")
  trap 'rm -rf "$dir"' EXIT
}

# wanem_background_run: after wanem_scenario_start, for a test that runs the emulator in the background:
# $run (the background run's pid, empty when none) is stopped and waited for on exit before $dir is
# removed; `check PATTERN FILE WHAT` prints "ok: WHAT" when a line of FILE matches PATTERN (grep -E),
# else "FAIL: WHAT" and sets fail=1.
wanem_background_run() {
  run=
  fail=0
  trap 'if [ -n "$run" ]; then kill -TERM "$run" 2> /dev/null || true; wait "$run" 2> /dev/null || true; fi; rm -rf "$dir"' EXIT
}
check() {
  if grep -qE "$1" "$2"; then echo "ok: $3"; else echo "FAIL: $3"; fail=1; fi
}
