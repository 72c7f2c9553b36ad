#!/usr/bin/env bash
# gpu-check.sh — the real-GPU check behind `make gpu-check` (see gpu/gpu.mk).
# On a machine with an NVIDIA GPU and driver: builds everything, then
#   1. runs the whole Criterion suite against the real libcuda.so.1 (GPOOL_TEST_REAL_GPU=1:
#      tests that need the simulator skip with a visible reason);
#   2. gpool-bench replay (cuda, cuda-async, gpool) on every trace and hotpath, and
#      build/gpu/gpu-latency (alloc+free of 4 KiB, 1 MiB, 64 MiB);
#   3. build/gpu/gpu-datapath: a PTX kernel writes vidmem, pinned and mapped blocks, the host
#      verifies; a peer copy with two or more GPUs;
#   4. gpu/torch_check.py and gpu/cupy_check.py when torch / cupy import, and python/tests;
#   5. writes a markdown summary to $GPU_CHECK_OUT (default build/gpu-check.md), appends a
#      short entry to docs/gpu-results.md (GPU_CHECK_RECORD=0 to skip) and exits non-zero on
#      any failure.
# Environment: BUILD (build), MAKE (make), DEPS_PREFIX (staged deps, scripts/stage-deps.sh),
# GPU_CHECK_TRACES (traces to replay; default bench/traces/*.csv), GPU_CHECK_STEP_TIMEOUT
# (seconds per step, default 300: a hung step is killed and the rest still run).
set -u
cd "$(dirname "$0")/.." || exit 2
BUILD=${BUILD:-build}
MAKE=${MAKE:-make}
OUT=${GPU_CHECK_OUT:-build/gpu-check.md}
STEP_TIMEOUT=${GPU_CHECK_STEP_TIMEOUT:-300}
unset GPOOL_CONF GPOOL_SIM_FAIL # default configuration
# GPU_CHECK_DRIVER=FILE runs everything on that driver instead (only to test this script on the
# simulated driver: build/sim/libcuda.so.1); otherwise the real libcuda.so.1.
if [ -n "${GPU_CHECK_DRIVER:-}" ]; then export GPOOL_LIBCUDA=$GPU_CHECK_DRIVER; else unset GPOOL_LIBCUDA; fi

# ---- is there a GPU and a driver? (fast, before building anything) ----------------------------
find_libcuda() {
  if command -v ldconfig >/dev/null 2>&1 && ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
    return 0
  fi
  local d
  for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/nvidia/lib64 \
           /usr/lib/wsl/lib ${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH//:/ }}; do
    [ -e "$d/libcuda.so.1" ] && return 0
  done
  return 1
}
have_gpu=0
# nvidia-smi can hang on a GPU in a bad state: every call of it has a time limit
if [ -e /proc/driver/nvidia/version ] || { command -v nvidia-smi >/dev/null 2>&1 &&
     timeout -k 5 30 nvidia-smi -L >/dev/null 2>&1; } || ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
  find_libcuda && have_gpu=1
fi
[ -n "${GPU_CHECK_DRIVER:-}" ] && have_gpu=1
if [ $have_gpu = 0 ]; then
  echo "gpu-check: no NVIDIA GPU/driver found (no /proc/driver/nvidia or nvidia-smi device, or no libcuda.so.1)" >&2
  exit 2
fi

if [ -n "${DEPS_PREFIX:-}" ]; then
  # absolute: it becomes the rpath of everything built, and the tests run from other folders
  DEPS_PREFIX=$(cd "$DEPS_PREFIX" && pwd) || { echo "gpu-check: DEPS_PREFIX: no such folder" >&2; exit 2; }
  triplet=$(${CC:-cc} -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)
  export LD_LIBRARY_PATH="$DEPS_PREFIX/usr/lib/$triplet${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export CPATH="$DEPS_PREFIX/usr/include${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$DEPS_PREFIX/usr/lib/$triplet${LIBRARY_PATH:+:$LIBRARY_PATH}"
fi
# scripts/deps.sh (run by the build when $BUILD/.deps-ok is missing) also wants pkg-config and
# gnuplot, which this check does not use, and tries apt-get as root: on a GPU host without network
# or package manager that fails the build. When the headers the build needs are there (staged or
# installed), mark the dependencies as checked.
have_header() { echo "#include <$1>" | ${CC:-cc} -E -x c - >/dev/null 2>&1; }
if [ -f "${CUDA_HOME:-/usr/local/cuda}/include/cuda.h" ] && have_header jemalloc/jemalloc.h &&
   have_header hwloc.h && have_header criterion/criterion.h; then
  mkdir -p "$BUILD" && touch "$BUILD/.deps-ok"
fi

mkdir -p "$(dirname "$OUT")" "$BUILD/gpu-check"
LOG="$BUILD/gpu-check"
failures=0
md() { printf '%s\n' "$*" >>"$OUT"; }
run_step() { # name logfile command...: runs with a timeout, returns its status
  local name=$1 log=$2 rc
  shift 2
  echo "gpu-check: $name" >&2
  # SIGTERM at the limit, SIGKILL 10 s later (a process stuck in the driver may ignore TERM)
  timeout -k 10 "$STEP_TIMEOUT" "$@" >"$log" 2>&1
  rc=$?
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    echo "gpu-check: $name: killed after the step limit of ${STEP_TIMEOUT} s (exit $rc)" >>"$log"
  fi
  return $rc
}
fail() { failures=$((failures + 1)); md "- **FAIL** $*"; }
pass() { md "- PASS $*"; }
skip() { md "- SKIP $*"; }

gpu_line=$(timeout -k 5 30 nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true)
: >"$OUT"
md "# gpool gpu-check"
md ""
md "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
[ -n "${GPU_CHECK_DRIVER:-}" ] && md "- **driver: $GPU_CHECK_DRIVER (GPU_CHECK_DRIVER: a test run of this script, not a GPU result)**"
md "- host: $(uname -n) ($(uname -sr))"
if git rev-parse --git-dir >/dev/null 2>&1; then
  md "- commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD 2>/dev/null || echo ' (modified tree)')"
else
  md "- commit: unknown (not a git checkout)"
fi
if [ -n "$gpu_line" ]; then
  while IFS= read -r l; do md "- GPU: $l"; done <<<"$gpu_line"
else
  md "- GPU: (nvidia-smi unavailable)"
fi
md ""

# ---- build ------------------------------------------------------------------------------------
md "## Build"
if run_step build "$LOG/build.log" "$MAKE" BUILD="$BUILD" DEPS_PREFIX="${DEPS_PREFIX:-}" all tests gpu-tools; then
  pass "make all tests gpu-tools"
else
  fail "build (see $LOG/build.log)"
  md '```'; tail -30 "$LOG/build.log" >>"$OUT"; md '```'
  echo "gpu-check: build failed; summary in $OUT" >&2
  exit 1
fi
md ""

# ---- 1. the suite on the real driver ----------------------------------------------------------
md "## 1. Criterion suite on the real driver (GPOOL_TEST_REAL_GPU=1)"
md ""
md "| test binary | tested | passing | failing | crashing | skipped |"
md "|---|---|---|---|---|---|"
for t in "$BUILD"/tests/test_*; do
  [ -x "$t" ] || continue
  b=$(basename "$t")
  GPOOL_TEST_REAL_GPU=1 GPOOL_TEST_BUILD="$(cd "$BUILD" && pwd)" \
    run_step "suite: $b" "$LOG/$b.log" "$t" --jobs 1 --verbose
  rc=$?
  syn=$(grep -a 'Synthesis:' "$LOG/$b.log" | tail -1)
  num() { echo "$syn" | sed -n "s/.*$1: \([0-9]*\).*/\1/p"; }
  tested=$(num Tested) passing=$(num Passing) failing=$(num Failing) crashing=$(num Crashing)
  skipped=$(grep -ac '\[SKIP\]' "$LOG/$b.log")
  md "| $b | ${tested:-?} | ${passing:-?} | ${failing:-?} | ${crashing:-?} | $skipped |"
  if [ $rc -ne 0 ]; then
    failures=$((failures + 1))
    failed_suites="${failed_suites:-}$b (exit $rc, log $LOG/$b.log); "
  fi
done
[ -n "${failed_suites:-}" ] && md "" && md "**FAIL**: ${failed_suites}"
skips=$(grep -ah '\[SKIP\]' "$LOG"/test_*.log 2>/dev/null | sed 's/^.*\[SKIP\] *//' | sort | uniq -c | head -40)
if [ -n "$skips" ]; then
  md ""; md "Skipped tests and why:"; md '```'; md "$skips"; md '```'
fi
md ""

# ---- 2. benchmarks ----------------------------------------------------------------------------
md "## 2. Benchmarks on the GPU"
md ""
traces=${GPU_CHECK_TRACES:-$(ls bench/traces/*.csv 2>/dev/null)}
for tr in $traces; do
  b=$(basename "$tr" .csv)
  if run_step "replay $b" "$LOG/replay-$b.log" "$BUILD/gpool-bench" replay "$tr" --device 0 \
       --strategy cuda --strategy cuda-async --strategy gpool; then
    md "### replay $b"; md '```'; cat "$LOG/replay-$b.log" >>"$OUT"; md '```'
  else
    fail "gpool-bench replay $tr (log $LOG/replay-$b.log)"
    md '```'; tail -20 "$LOG/replay-$b.log" >>"$OUT"; md '```'
  fi
done
if run_step hotpath "$LOG/hotpath.log" "$BUILD/gpool-bench" hotpath --device 0; then
  md "### hotpath"; md '```'; cat "$LOG/hotpath.log" >>"$OUT"; md '```'
else
  fail "gpool-bench hotpath (log $LOG/hotpath.log)"
fi
if run_step latency "$LOG/latency.log" "$BUILD/gpu/gpu-latency" --iters 1000; then
  cat "$LOG/latency.log" >>"$OUT"
else
  fail "gpu-latency (log $LOG/latency.log)"
  md '```'; tail -20 "$LOG/latency.log" >>"$OUT"; md '```'
fi
# cold start: the measured cost of each driver entry point replaces bench/drvcost.c's estimates
# in compare's estimated first-pass driver time (GPOOL_BENCH_DRV_COSTS). compare fits
# capacities, so it runs on the simulated driver: simulated call counts, measured costs.
if run_step drvcost "$LOG/drvcost.log" "$BUILD/gpu/gpu-drvcost" --iters 200 --out "$LOG/drvcost.txt"; then
  cat "$LOG/drvcost.log" >>"$OUT"
  if GPOOL_BENCH_DRV_COSTS="$LOG/drvcost.txt" GPOOL_LIBCUDA="$BUILD/sim/libcuda.so.1" \
       run_step "compare first pass" "$LOG/compare-first.log" \
       "$BUILD/gpool-bench" compare $traces --strategy gpool --strategy bfc; then
    md "### first-pass driver calls (simulated) and time (costs measured on this GPU)"; md '```'
    sed -n '/first-pass driver calls by entry point/,/^fit ratio/p' "$LOG/compare-first.log" >>"$OUT"
    md '```'
  else
    fail "gpool-bench compare with measured costs (log $LOG/compare-first.log)"
  fi
else
  fail "gpu-drvcost (log $LOG/drvcost.log)"
  md '```'; tail -20 "$LOG/drvcost.log" >>"$OUT"; md '```'
fi
md ""

# ---- 3. data path -----------------------------------------------------------------------------
md "## 3. Data path"
run_step datapath "$LOG/datapath.log" "$BUILD/gpu/gpu-datapath"
rc=$?
grep -a '^- ' "$LOG/datapath.log" >>"$OUT"
if [ $rc -ne 0 ]; then
  failures=$((failures + 1))
  md "- **FAIL** gpu-datapath exited $rc (log $LOG/datapath.log)"
fi
md ""

# ---- 3b. IPC between two processes (gpu/ipc.c, docs/ipc.md) ----------------------------------
md "## 3b. IPC"
run_step ipc "$LOG/ipc.log" "$BUILD/gpu/gpu-ipc"
rc=$?
grep -a '^- ' "$LOG/ipc.log" >>"$OUT"
if [ $rc -ne 0 ]; then
  failures=$((failures + 1))
  md "- **FAIL** gpu-ipc exited $rc (log $LOG/ipc.log)"
fi
md ""

# ---- 4. frameworks ----------------------------------------------------------------------------
md "## 4. Frameworks"
for fw in torch cupy; do
  script=gpu/${fw}_check.py
  if ! timeout -k 5 120 python3 -c "import $fw" >/dev/null 2>&1; then
    skip "$fw: python3 cannot import $fw"
  elif [ ! -f "$script" ]; then
    skip "$fw: $script is not in this tree yet"
  elif run_step "$fw" "$LOG/$fw.log" python3 "$script" --build "$(cd "$BUILD" && pwd)"; then
    pass "$fw: $script"
    md '```'; tail -20 "$LOG/$fw.log" >>"$OUT"; md '```'
  else
    fail "$fw: $script (log $LOG/$fw.log)"
    md '```'; tail -30 "$LOG/$fw.log" >>"$OUT"; md '```'
  fi
done
# the Python package's suite on the real driver: gpool.torch / gpool.cupy tests run where they import
if ! python3 -c "import pytest" >/dev/null 2>&1; then
  skip "python/tests: python3 has no pytest"
elif run_step python "$LOG/python.log" env GPOOL_TEST_REAL_GPU=1 GPOOL_TEST_BUILD="$(cd "$BUILD" && pwd)" \
    GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384 python3 -m pytest -q -rs -p no:cacheprovider python/tests; then
  pass "python/tests (pytest)"; md '```'; tail -12 "$LOG/python.log" >>"$OUT"; md '```'
else
  fail "python/tests (log $LOG/python.log)"; md '```'; tail -30 "$LOG/python.log" >>"$OUT"; md '```'
fi
md ""

# ---- 5. verdict -------------------------------------------------------------------------------
if [ $failures -eq 0 ]; then verdict="PASS"; else verdict="FAIL ($failures failed steps)"; fi
md "## Verdict: $verdict"
if [ "${GPU_CHECK_RECORD:-1}" = 1 ] && [ -f docs/gpu-results.md ]; then
  {
    echo ""
    echo "## $(date -u '+%Y-%m-%d') — ${gpu_line:-unknown GPU} — $verdict"
    echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown); full summary: $OUT"
  } >>docs/gpu-results.md
fi
echo "gpu-check: $verdict; summary in $OUT" >&2
[ $failures -eq 0 ]
