#!/usr/bin/env bash
# Run of record, part 1 (binaries built here by bench/build_for_h200.sh, carried in two parts): the GPU test
# binaries of the 16-bit and layout paths, then compute-sanitizer (memcheck, racecheck, synccheck, initcheck;
# PAGEDATTN_TEST_REDUCED=1) on test_decode_fp16 (part 3: the others).
set -uo pipefail
OUT=${OUT:-$PWD/out}; C=.carry/r1; L=$OUT/logs; mkdir -p $L; commit=$(cat $C/COMMIT)
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
export PAGEDATTN_TEST_REPORT=$L/errors.txt
{ echo "# GPU test binaries (part 1) on $gpu, commit $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
for t in test_warp_reduce test_block_reduce_partials test_one_partition test_partition_combine test_decode_plan test_decode_fp16 test_decode_bf16 test_decode_layouts; do
  s=$SECONDS; timeout 250 $C/$t > $L/$t.txt 2>&1; rc=$?
  echo "$t rc=$rc $((SECONDS - s)) s: $(grep -E 'All tests passed|test cases:' $L/$t.txt | tail -1)"
done; } | tee $OUT/h200-tests-part1.txt
{ echo "# compute-sanitizer on $gpu, commit $commit (PAGEDATTN_TEST_REDUCED=1, ~[api_error]): tool binary errors rc"
for t in test_decode_fp16; do
  for tool in memcheck racecheck synccheck initcheck; do
    s=$SECONDS; PAGEDATTN_TEST_REDUCED=1 timeout 90 compute-sanitizer --tool $tool --error-exitcode 99 $C/$t "~[api_error]" > $L/san-$tool-$t.txt 2>&1; rc=$?
    errors=$(grep -Eo 'ERROR SUMMARY: [0-9]+' $L/san-$tool-$t.txt | tail -1 | grep -Eo '[0-9]+$' || true)
    [ -z "$errors" ] && errors=$(grep -Eo '\(([0-9]+) errors' $L/san-$tool-$t.txt | tail -1 | grep -Eo '[0-9]+' || true)
    echo "$tool $t errors=${errors:-?} rc=$rc $((SECONDS - s)) s"
  done
done; } | tee $OUT/h200-sanitizer-part1.txt
tar -C $OUT -czf $OUT/logs-part1.tar.gz logs && rm -rf $L
