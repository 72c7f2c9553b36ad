#!/usr/bin/env bash
# test-suite.sh — make test's runner for the C suite: each test binary (and the threaded stress
# program) runs with its output in LOGDIR/NAME.log, and prints one line: PASS or FAIL, its
# counts, and on failure the failing tests and the log's path. Expected noise (violations the
# simulator reports and checks that fail on purpose) stays in the logs. Writes LOGDIR/c-suite
# ("suites tests passed failed skipped") for the verdict, and exits 1 when anything failed.
#   scripts/test-suite.sh LOGDIR STRESS_BIN TEST_BIN...
# Environment: TEST_RUNNER (e.g. valgrind ...), TEST_JOBS, TEST_ARGS, and what the tests need
# (GPOOL_LIBCUDA, GPOOL_TEST_BUILD, GPOOL_TEST_TEARDOWN_DIR).
set -u
set -f # TEST_RUNNER and TEST_ARGS hold patterns (valgrind --trace-children-skip=*/sh): no globbing
logdir=$1 stress=$2
shift 2
mkdir -p "$logdir"
suites=0 tests=0 passed=0 failed=0 skipped=0 fail=0
for t in "$@"; do
  name=$(basename "$t")
  log=$logdir/$name.log
  # shellcheck disable=SC2086
  ${TEST_RUNNER:-} "$t" --jobs "${TEST_JOBS:-2}" ${TEST_ARGS:-} >"$log" 2>&1
  rc=$?
  syn=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -o 'Synthesis: Tested: [0-9]* | Passing: [0-9]* | Failing: [0-9]* | Crashing: [0-9]*' | tail -1)
  read -r n p f c <<<"$(echo "$syn" | tr -cs '0-9' ' ')"
  n=${n:-0} p=${p:-0} f=${f:-0} c=${c:-0}
  s=$(grep -c '\[SKIP\]' "$log")
  suites=$((suites + 1)) tests=$((tests + n)) passed=$((passed + p)) skipped=$((skipped + s))
  if [ "$rc" = 0 ] && [ -n "$syn" ] && [ "$f" = 0 ] && [ "$c" = 0 ]; then
    # a passing binary's violations and failed checks were provoked on purpose: say so
    noise=$(grep -cE 'VIOLATION [0-9]+:|GPOOL_SIM_STRICT=1: aborting|gpool debug check failed' "$log")
    printf 'PASS %-28s %4d tests%s%s\n' "$name" "$p" "$([ "$s" != 0 ] && echo ", $s skipped")" \
      "$([ "$noise" != 0 ] && echo "; its log has $noise violation/check lines, provoked on purpose")"
  else
    fail=1
    if [ -n "$syn" ] && [ $((f + c)) != 0 ]; then
      failed=$((failed + f + c))
      printf 'FAIL %-28s %d of %d tests failed or crashed (exit %d); log: %s\n' "$name" \
        $((f + c)) "$n" "$rc" "$log"
    else # it died before its summary, or exited non-zero with every test passed: one failure
      failed=$((failed + 1)) tests=$((tests + 1))
      printf 'FAIL %-28s exit %d%s; log: %s\n' "$name" "$rc" \
        "$([ -z "$syn" ] && echo ', no Criterion summary')" "$log"
    fi
    grep -E '\[(FAIL|----)\]' "$log" | sed 's/\x1b\[[0-9;]*m//g' | head -20 | sed 's/^/     /'
    [ -n "$syn" ] || tail -5 "$log" | sed 's/^/     /'
  fi
done
name=$(basename "$stress")
log=$logdir/$name.log
# shellcheck disable=SC2086
if ${TEST_RUNNER:-} "$stress" >"$log" 2>&1; then
  printf 'PASS %-28s (threaded stress program)\n' "$name"
  suites=$((suites + 1)) tests=$((tests + 1)) passed=$((passed + 1))
else
  printf 'FAIL %-28s exit %d; log: %s\n' "$name" $? "$log"
  tail -5 "$log" | sed 's/^/     /'
  suites=$((suites + 1)) tests=$((tests + 1)) failed=$((failed + 1)) fail=1
fi
echo "$suites $tests $passed $failed $skipped" >"$logdir/c-suite"
exit $fail
