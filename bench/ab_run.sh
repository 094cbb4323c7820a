#!/usr/bin/env bash
# Device half of bench/build_ab.sh: the device plan's GPU tests, then main's and the branch's
# bench_decode in turns (main, branch, main, branch), then both timelines of the latency shapes.
# Writes to $OUT/ab/.
set -uo pipefail
ab=.carry/ab
mkdir -p "$OUT/ab"
echo "commits: $(cat $ab/COMMITS)"
timeout 120 $ab/test_decode_plan >"$OUT/ab/test_decode_plan.txt" 2>&1; echo "test_decode_plan rc=$?"
timeout 200 $ab/test_decode_fp16 >"$OUT/ab/test_decode_fp16.txt" 2>&1; echo "test_decode_fp16 rc=$?"; tail -2 "$OUT/ab/test_decode_fp16.txt"
for round in 1 2; do
  for side in main branch; do
    timeout 90 $ab/bench_decode_$side --json "$OUT/ab/bench_${side}_$round.json" --commit "$side" --dtype fp16 \
      >"$OUT/ab/bench_${side}_$round.txt" 2>&1
    echo "bench $side $round rc=$?"
  done
done
paste <(awk '{print $1, $2, $3, $4}' "$OUT/ab/bench_main_1.txt") <(awk '{print $4}' "$OUT/ab/bench_branch_1.txt") \
      <(awk '{print $4}' "$OUT/ab/bench_main_2.txt") <(awk '{print $4}' "$OUT/ab/bench_branch_2.txt") | head -30
for side in main branch; do
  echo "=== $side"
  timeout 30 $ab/trace_decode_$side --shape 1x1000 --shape 4x2049 --shape 1x16384 2>&1 |
    grep -E "x[0-9]+ 24/4|tile chosen|block ids|first K/V|per block"
done | tee "$OUT/ab/trace.txt"
for side in main branch; do
  timeout 60 $ab/trace_decode_$side --shape 1x100000+63x512 --shape 1x32768+63x100 --graph --shape 1x100000+63x512 \
    --shape 1x32768+63x100 --shape 0x65536+1x1000 --shape 0x65536+64x1000 >"$OUT/ab/trace_skewed_$side.txt" 2>&1
  echo "trace skewed $side rc=$?"
done
