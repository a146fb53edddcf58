#!/usr/bin/env bash
# Every script a user runs answers --help and -h (exit 0 within a deadline, printing "usage", starting
# no work) and refuses an unknown flag (exit 2, printing "usage", starting no work). "No work": the
# scripts run with stand-ins for apt-get, dpkg, cmake, ctest, ninja, make, ip, iperf3 and gnuplot first
# on PATH, which refuse to run and record the call (so a script that ignores --help cannot install
# packages or start a build here), and within a deadline. The scripts are found by glob, so a new one is
# covered at once:
# scripts/*, bench/*.sh and *.py, examples/**/*.sh and *.py, tests/**/*.sh; a file without a "#!" line is
# sourced by others (bench/scenario_common.sh) and skipped. Each runs under the interpreter its "#!"
# line names; Python scripts must name /usr/bin/python3 (Debian's, with numpy and torch).
#   tests/scripts_help.sh --source DIR [--build DIR]
# --build: the tree whose pccl-bench checks the flags that scripts forward to it (PCCL_BUILD_DIR).
set -euo pipefail

usage() {
  cat <<EOF
usage: $0 --source DIR [--build DIR]
  Runs every script of the source tree with --help, -h and an unknown flag and checks the answers.
EOF
}
source_dir= build_dir=
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --source) [ $# -ge 2 ] || { usage >&2; exit 2; }; source_dir=$2; shift 2 ;;
    --build) [ $# -ge 2 ] || { usage >&2; exit 2; }; build_dir=$2; shift 2 ;;
    *) echo "scripts_help: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
[ -n "$source_dir" ] || { usage >&2; exit 2; }
[ -z "$build_dir" ] || export PCCL_BUILD_DIR="$(cd "$build_dir" && pwd)"
cd "$source_dir"
DEADLINE_S=30
BOGUS=--pccl-no-such-flag
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pccl-scripts-help.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Stand-ins for the commands that do work: each records its call in $tmp/work and fails.
mkdir "$tmp/bin"
for c in apt-get apt dpkg cmake ctest ninja make ip iperf3 gnuplot; do
  printf '#!/bin/sh\necho "%s $*" >> "%s"\necho "scripts_help: %s refused (a --help or bad flag must not start work)" >&2\nexit 97\n' \
    "$c" "$tmp/work" "$c" > "$tmp/bin/$c"
  chmod +x "$tmp/bin/$c"
done
export PATH="$tmp/bin:$PATH"

shopt -s nullglob globstar
files=(scripts/* bench/*.sh bench/*.py examples/**/*.sh examples/**/*.py tests/**/*.sh)
failures=0 checked=0
fail() {
  echo "FAIL: $1: $2"
  sed 's/^/    /' "$tmp/out" | head -n 8
  failures=$((failures + 1))
}
# check WHAT STATUS WANT_STATUS: judges one run from its exit status, its output and the recorded work.
check() {
  local what=$1 status=$2 want=$3
  if [ -s "$tmp/work" ]; then
    fail "$what" "started work: $(head -n 1 "$tmp/work")"
  elif [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    fail "$what" "still running after $DEADLINE_S s: it started work"
  elif [ "$status" -ne "$want" ]; then
    fail "$what" "exit $status, want $want"
  elif ! grep -qi "usage" "$tmp/out"; then
    fail "$what" "printed no usage"
  fi
  rm -f "$tmp/work"
}

for f in "${files[@]}"; do
  [ -f "$f" ] || continue
  IFS= read -r first < "$f" || true
  case "$first" in
    '#!'*) ;;
    *) echo "skip: $f (no #! line: sourced by other scripts)"; continue ;;
  esac
  read -r -a interpreter <<< "${first#'#!'}"
  if [[ "$f" == *.py ]] && [ "${interpreter[*]}" != /usr/bin/python3 ]; then
    echo "FAIL: $f: its #! line is '$first', not '#!/usr/bin/python3'"
    failures=$((failures + 1))
    continue
  fi
  checked=$((checked + 1))
  for flag in --help -h "$BOGUS"; do
    want=0
    [ "$flag" = "$BOGUS" ] && want=2
    status=0
    timeout -k 5 "$DEADLINE_S" "${interpreter[@]}" "$f" "$flag" < /dev/null > "$tmp/out" 2>&1 || status=$?
    check "$f $flag" "$status" "$want"
  done
done

[ "$checked" -gt 0 ] || { echo "FAIL: no script found under $(pwd)"; exit 1; }
if [ "$failures" -gt 0 ]; then
  echo "$failures failure(s) in $checked scripts"
  exit 1
fi
echo "PASS: $checked scripts answer --help and -h with their usage and refuse $BOGUS with exit 2"
