#!/usr/bin/env bash
# bench-verdict.sh — make bench's last line, read from its report (everything make bench
# printed): the fit goal and the steady state over the single-stream traces and the
# multi-stream variants (trace@variant), the scale and drop-in goals.
#   scripts/bench-verdict.sh REPORT STATUS   (STATUS: the exit status of the benchmark steps)
set -u
report=$1 status=${2:-0}
count() { grep -E "$1" "$report" | grep -cE "$2"; }
one='^summary [^ @]+ +fit ratio'
many='^summary [^ ]+@[^ ]+ +fit ratio'
n1=$(grep -cE "$one" "$report") nm=$(grep -cE "$many" "$report")
fit1=$(count "$one" 'goal met: yes') fitm=$(count "$many" 'goal met: yes')
ss1=$(count "$one" 'steady state \(0 in the last pass\): yes')
ssm=$(count "$many" 'steady state \(0 in the last pass\): yes')
scale=$(grep -E '^goals: ' "$report" | tail -1 | sed 's/^goals: //')
dropin=$(grep -E 'gpool pair \(goal <= 4x at every row\)' "$report" | tail -1 | sed 's/.*: //')
verdict=PASS
[ "$status" = 0 ] || verdict="FAIL (a step exited $status)"
[ "$fit1" = "$n1" ] && [ "$fitm" = "$nm" ] || verdict=FAIL
echo "make bench: fit goal met on $fit1/$n1 traces and $fitm/$nm multi-stream variants;" \
  "0 driver calls in the last pass on $ss1/$n1 traces and $ssm/$nm variants (several streams" \
  "cost event calls); scale goals: ${scale:-not run}; drop-in goal: ${dropin:-not run};" \
  "simulated driver; $verdict; report in $report"
[ "$verdict" = PASS ]
