#!/usr/bin/env bash
# Device half of bench/build_ab.sh (run from the repository root; also copied into .carry/ab/): the device
# plan's GPU tests, then every label's bench_decode in turns (two rounds), a table of their medians, then
# every label's timelines of the latency shapes and of the skewed batches (fresh and replayed from a
# graph). Writes to $OUT/ab/.
set -uo pipefail
ab=.carry/ab
mkdir -p "$OUT/ab"
cat $ab/LABELS
labels=$(awk 'NF == 2 {print $1}' $ab/LABELS)
timeout 120 $ab/test_decode_plan >"$OUT/ab/test_decode_plan.txt" 2>&1; echo "test_decode_plan rc=$?"; tail -2 "$OUT/ab/test_decode_plan.txt"
timeout 200 $ab/test_decode_fp16 >"$OUT/ab/test_decode_fp16.txt" 2>&1; echo "test_decode_fp16 rc=$?"; tail -2 "$OUT/ab/test_decode_fp16.txt"
for round in 1 2; do
  for label in $labels; do
    timeout 120 $ab/bench_decode_$label --json "$OUT/ab/bench_${label}_$round.json" --commit "$label" --dtype fp16 \
      >"$OUT/ab/bench_${label}_$round.txt" 2>&1
    echo "bench $label $round rc=$?"
  done
done
first=$(echo $labels | awk '{print $1}')
cols=("<(awk '{print \$1, \$2, \$3, \$4}' $OUT/ab/bench_${first}_1.txt)")
for label in $labels; do
  for round in 1 2; do
    [ "$label-$round" = "$first-1" ] || cols+=("<(awk '{print \$4}' $OUT/ab/bench_${label}_$round.txt)")
  done
done
echo "columns: $(for l in $labels; do echo -n "$l(1,2) "; done)"
eval "paste ${cols[*]}" | head -34
for label in $labels; do
  timeout 60 $ab/trace_decode_$label --shape 1x1000 --shape 4x2049 --shape 1x16384 --shape 1x100000+63x512 --shape 1x32768+63x100 \
    --graph --shape 1x100000+63x512 --shape 1x32768+63x100 --shape 0x65536+1x1000 --shape 0x65536+64x1000 \
    >"$OUT/ab/trace_$label.txt" 2>&1
  echo "=== $label (rc=$?)"
  grep -E "blocks;|tile chosen|block ids|first K/V|plan:|per block" "$OUT/ab/trace_$label.txt"
done
