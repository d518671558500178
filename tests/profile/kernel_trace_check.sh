#!/bin/bash
# The kernel timeline tool on a real GPU: a GPU test program run under the CUPTI library writes
# kernel and host-call records, and the report finds kernels in them. Exits 77 (skipped) without a
# GPU.
# usage: kernel_trace_check.sh TIMELINE_PY TRACE_LIBRARY GPU_TEST_PROGRAM GTEST_FILTER
set -u
timeline=$1 lib=$2 program=$3 filter=$4
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "no GPU: skipped"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 "$timeline" run --lib "$lib" --trace "$dir/t" -- "$program" --gtest_filter="$filter" \
  >"$dir/run.log" 2>&1 || { cat "$dir/run.log"; echo "FAIL: the traced program failed"; exit 1; }
csv=$(ls "$dir"/t.*.csv 2>/dev/null | head -1)
[ -n "$csv" ] || { echo "FAIL: no trace file written"; exit 1; }
kernels=$(grep -c '^K,' "$csv")
calls=$(grep -c '^A,' "$csv")
echo "records: $kernels kernels, $calls host calls"
[ "$kernels" -gt 0 ] || { echo "FAIL: no kernel recorded"; exit 1; }
[ "$calls" -ge "$kernels" ] || { echo "FAIL: fewer host calls than kernels"; exit 1; }
# Every kernel's launch is found: its correlation id is some host call's.
awk -F, '$1=="A"{a[$7]=1} $1=="K"{k[$7]=1} END{for(c in k) if(!(c in a)) {print "FAIL: kernel " c " has no launch"; exit 1}}' "$csv" || exit 1
python3 "$timeline" report "$dir/t" --ms 1000 --at 0 --out "$dir/report.txt" || exit 1
grep -q '^device 0: some stream busy' "$dir/report.txt" || { echo "FAIL: no device line"; exit 1; }
echo "ok"
