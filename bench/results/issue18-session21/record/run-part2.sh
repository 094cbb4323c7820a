#!/usr/bin/env bash
# Run of record, part 2: bench_decode (fp16 table; fp8 e4m3 and e5m2 rows; HND and NHD layouts) merged into
# h200.json with the seed's Triton kernel when .seed/ is carried, the gated example, the other GPU test
# binaries, then compute-sanitizer memcheck and racecheck on test_decode_fp8 (part 3: the others).
set -uo pipefail
OUT=${OUT:-$PWD/out}; C=.carry/r2; L=$OUT/logs; mkdir -p $L; commit=$(cat $C/COMMIT)
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
export PAGEDATTN_TEST_REPORT=$L/errors.txt
B=$C/bench_decode
timeout 150 $B --json $L/bench_decode.json --commit "$commit" --dtype fp16 > $L/bench_decode.txt 2>&1; echo "bench fp16 rc=$?"
grep -E "copy|q4|w4096|1x4096 |^1x100000 |^64x4096 " $L/bench_decode.txt | head -14
timeout 120 $B --json $L/bench_decode_fp8_e4m3.json --commit "$commit" --dtype fp16/fp8_e4m3 \
  $(for s in 1x100000 1x16384 8x32768 32x8192 64x4096 256x1024 1x1000 4x2049; do echo --shape $s@24/4/256; done) \
  --shape 1x100000@24/4/128 --shape 64x4096@24/4/128 --shape 64x4096@32/8/128 --shape 64xlog100-100000 > $L/bench_decode_fp8_e4m3.txt 2>&1; echo "bench e4m3 rc=$?"
timeout 60 $B --json $L/bench_decode_fp8_e5m2.json --commit "$commit" --dtype fp16/fp8_e5m2 --shape 1x100000@24/4/256 --shape 64x4096@24/4/256 > $L/bench_decode_fp8_e5m2.txt 2>&1; echo "bench e5m2 rc=$?"
qwen_rows=$(for s in 1x100000 1x16384 8x32768 32x8192 64x4096 256x1024; do echo --shape $s@24/4/256; done)
for layout in hnd nhd; do
  timeout 100 $B --json $L/bench_decode_layout_$layout.json --commit "$commit" --dtype fp16 --layout $layout $qwen_rows --shape 64x4096@24/4/128 --shape 1x100000+63x512 > $L/bench_decode_layout_$layout.txt 2>&1; echo "bench $layout rc=$?"
done
if [ -f .seed/paged_attention_v2_triton.py ]; then timeout 200 python3 bench/seed_triton_bench.py --out $L/seed.json > $L/seed.txt 2>&1; echo "seed rc=$?"; fi
python3 bench/merge_results.py --pagedattn $L/bench_decode.json $(ls $L/bench_decode_fp8_*.json $L/bench_decode_layout_*.json 2>/dev/null) --seed $L/seed.json --out $OUT/h200.json --plot $OUT/h200.png > $L/merge.txt 2>&1; echo "merge rc=$?"
timeout 60 $C/gated_output > $L/gated_output.txt 2>&1; echo "gated_output rc=$?"; tail -2 $L/gated_output.txt
{ echo "# GPU test binaries (part 2) on $gpu, commit $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
for t in test_decode_fp8 test_decode_fp32 test_decode_biv100_policy; do
  s=$SECONDS; timeout 200 $C/$t > $L/$t.txt 2>&1; rc=$?
  echo "$t rc=$rc $((SECONDS - s)) s: $(grep -E 'All tests passed|test cases:' $L/$t.txt | tail -1)"
done; } | tee $OUT/h200-tests-part2.txt
{ echo "# compute-sanitizer on $gpu, commit $commit (PAGEDATTN_TEST_REDUCED=1, ~[api_error]): tool binary errors rc"
for t in test_decode_fp8; do
  for tool in memcheck racecheck; do
    filter="~[api_error]"; [ $tool = racecheck ] && filter="[variants]" # racecheck of the whole binary takes over 90 s
    s=$SECONDS; PAGEDATTN_TEST_REDUCED=1 timeout 90 compute-sanitizer --tool $tool --error-exitcode 99 $C/$t "$filter" > $L/san-$tool-$t.txt 2>&1; rc=$?
    errors=$(grep -Eo 'ERROR SUMMARY: [0-9]+' $L/san-$tool-$t.txt | tail -1 | grep -Eo '[0-9]+$' || true)
    [ -z "$errors" ] && errors=$(grep -Eo '\(([0-9]+) errors' $L/san-$tool-$t.txt | tail -1 | grep -Eo '[0-9]+' || true)
    echo "$tool $t errors=${errors:-?} rc=$rc $((SECONDS - s)) s"
  done
done; } | tee $OUT/h200-sanitizer-part2.txt
cp $L/bench_decode.txt $OUT/h200-bench-fp16.txt
tar -C $OUT -czf $OUT/logs-part2.tar.gz logs && rm -rf $L
