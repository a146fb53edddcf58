#!/usr/bin/env bash
# The whole test suite under sanitizers (pccl-bench, the DiLoCo example and the GPU modules are left out
# of these trees; the chaos phase is 20 s, PCCL_CHAOS_SECONDS). Any report fails the run: halt_on_error
# is set for all three sanitizers. Suppressions: none are needed. Part of the test command
# (scripts/test.sh; PCCL_SANITIZE=0 skips).
#   build-asan/  ASan+UBSan with gcc at -O1 -g1 (line numbers in every report, half the compile time of
#                -O2 -g). PCCL_ASAN_COMPILER=clang builds it with clang instead (its shared sanitizer
#                runtime, cmake/Warnings.cmake): clang's UBSan and -O1 find two library problems gcc's
#                do not (pcclGetErrorString loads an out-of-range pcclResult_t; libpccl exports std::
#                template instances of pccl types), so it is not the default until they are fixed.
#   build-tsan/  TSan with gcc at RelWithDebInfo's -O2 (-g1: less to compile than -g): with build/
#                (Release, -O3) CI compiles both optimisation levels users build by default.
# Both with warnings as errors, less the two gcc documents as false alarms under sanitizers
# (-Wmaybe-uninitialized, -Wtsan; cmake/Warnings.cmake). The test programs themselves are compiled at
# -O0 (PCCL_TEST_OPTIMIZATION): still instrumented, and 3-4x faster to compile than at -O1/-O2 under a
# sanitizer (test_wire.cpp: 103 s -> 27 s of CPU under ASan+UBSan, 44 s -> 13 s under TSan); the
# library is what is compiled at the optimisation levels users build.
# With "all", the TSan tree compiles at the lowest priority while the ASan suite runs (on the cores the
# tests leave idle); --build-only builds and runs nothing (scripts/test.sh builds the ASan tree that way
# beside the release-only tests).
#   scripts/sanitize.sh [--build-only] [--low-priority] [address|thread|all]     (default all)
set -euo pipefail
usage() {
  cat <<'EOF'
usage: scripts/sanitize.sh [--build-only] [--low-priority] [address|thread|all]
  Builds the test suite under ASan+UBSan (build-asan/) and/or TSan (build-tsan/) and runs all of it
  (default all). --build-only: builds, runs nothing. --low-priority: at nice 19, its autogroup too.
  Environment: PCCL_JOBS (parallel compiles, default 2), PCCL_TEST_JOBS (parallel tests, default 2),
  PCCL_CHAOS_SECONDS (default 20), PCCL_ASAN_COMPILER=gcc|clang (default gcc),
  PCCL_SANITIZE_LINKER=lld|bfd|gold|default (the linker, default lld; default: the compiler's own),
  PCCL_TEST_OPTIMIZATION (flags of the test programs, default -O0).
EOF
}
build_only=0
low_priority=0
which=all
for arg in "$@"; do
  case "$arg" in
    -h | --help) usage; exit 0 ;;
    --build-only) build_only=1 ;;
    --low-priority) low_priority=1 ;;
    address | thread | all) which=$arg ;;
    *) echo "sanitize.sh: unknown argument $arg" >&2; usage >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
if [ "$low_priority" = 1 ]; then
  # The lowest priority for this script and what it starts. With the kernel's autogroups, nice counts
  # only within a session: a script started in a session of its own (setsid) lowers its session's too,
  # or it would take half the CPU from the tests beside it.
  renice -n 19 -p $$ > /dev/null 2>&1 || true
  if [ "$(ps -o sid= -p $$ 2> /dev/null | tr -d ' ')" = "$$" ] && [ -w /proc/self/autogroup ]; then
    echo 19 > /proc/self/autogroup 2> /dev/null || true  # only a session of its own: not the caller's
  fi
fi
JOBS=${PCCL_JOBS:-2}
TEST_JOBS=${PCCL_TEST_JOBS:-2}
LINKER=${PCCL_SANITIZE_LINKER:-lld}
bash scripts/deps.sh
[ "${PCCL_ASAN_COMPILER:-gcc}" != clang ] || bash scripts/deps.sh clang libclang-rt-dev
[ "$LINKER" != lld ] || bash scripts/deps.sh lld

build_tree() {  # build_tree address|thread: configures and builds the tree (its log: DIR/build.log)
  local dir san cc=gcc cxx=g++ opt start
  case "$1" in
    address)
      dir=build-asan san=address,undefined opt=-O1
      case "${PCCL_ASAN_COMPILER:-gcc}" in
        gcc) ;;
        clang) cc=clang cxx=clang++ ;;
        *) echo "sanitize.sh: PCCL_ASAN_COMPILER is gcc or clang, not $PCCL_ASAN_COMPILER" >&2; return 2 ;;
      esac ;;
    thread) dir=build-tsan san=thread opt=-O2 ;;
  esac
  start=$(date +%s)
  # lld links these trees' fifty test programs in 32 s instead of ld's 52 s (ASan+UBSan, two cores).
  local fuse=""
  [ "$LINKER" = default ] || fuse=-fuse-ld=$LINKER
  local ld=(-DCMAKE_{EXE,SHARED,MODULE}_LINKER_FLAGS="$fuse")
  # The compilers by name, not CC/CXX: an existing tree built with another compiler is reconfigured.
  cmake -S . -B "$dir" -G Ninja -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$opt -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$opt -g1 -DNDEBUG" "${ld[@]}" \
    -DPCCL_SANITIZE="$san" -DPCCL_WERROR=ON -DPCCL_BUILD_BENCH=OFF -DPCCL_BUILD_DILOCO=OFF \
    -DPCCL_TEST_OPTIMIZATION="${PCCL_TEST_OPTIMIZATION--O0}" >/dev/null
  if ! cmake --build "$dir" -j "$JOBS" > "$dir/build.log" 2>&1; then
    grep -E "error|FAILED" -A5 "$dir/build.log" | head -60
    echo "pccl: the $san tree failed to build ($dir/build.log)" >&2
    return 1
  fi
  echo "pccl: $san tree ($dir) built in $(($(date +%s) - start)) s"
}

test_tree() {  # test_tree address|thread: the whole suite in the built tree, then where its time went
  local dir=build-asan san=address,undefined start rc=0
  [ "$1" = address ] || dir=build-tsan san=thread
  start=$(date +%s)
  PCCL_CHAOS_SECONDS=${PCCL_CHAOS_SECONDS:-20} UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    ctest --test-dir "$dir" --output-on-failure --test-output-truncation middle -j "$TEST_JOBS" --timeout 600 \
      --output-junit ctest-junit.xml || rc=$?
  /usr/bin/python3 scripts/test_times.py "$dir" --timeout 600 || true
  [ "$rc" = 0 ] || { echo "pccl: the $san suite failed" >&2; return 1; }
  echo "pccl: $san suite passed in $(($(date +%s) - start)) s"
}

# background_build address|thread: the tree built at the lowest priority, beside tests (the compiler
# gets the cores the tests leave idle), in a process group of its own: $background.
background_build() {
  setsid -w bash scripts/sanitize.sh --low-priority --build-only "$1" &
  background=$!
}

# raise_priority SESSION: a background build back to normal priority once the command only waits for
# it (at nice 19 it would crawl beside any other work on the machine). Root only; else a no-op.
raise_priority() {
  { echo 0 > "/proc/$1/autogroup"; } 2> /dev/null || true
  renice -n 0 -g "$1" > /dev/null 2>&1 || true
}

if [ "$build_only" = 1 ]; then
  case "$which" in
    address | thread) build_tree "$which" ;;
    all) build_tree address && build_tree thread ;;
  esac
  exit
fi
case "$which" in
  address | thread) build_tree "$which" && test_tree "$which" ;;
  all)
    # The TSan tree compiles while the ASan suite runs.
    build_tree address
    background_build thread
    if ! test_tree address; then
      kill -- -"$background" 2> /dev/null || true
      wait "$background" 2> /dev/null || true
      exit 1
    fi
    raise_priority "$background"
    wait "$background"
    test_tree thread ;;
esac
