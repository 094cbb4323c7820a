#!/usr/bin/env bash
# Run of record, part 3: compute-sanitizer (memcheck, racecheck, synccheck, initcheck; PAGEDATTN_TEST_REDUCED=1)
# on test_decode_layouts ([variants] for racecheck), racecheck on test_decode_fp16 [q_len], memcheck on
# test_decode_biv100_policy, synccheck and initcheck on test_decode_fp8.
set -uo pipefail
OUT=${OUT:-$PWD/out}; C=.carry/r3; L=$OUT/logs; mkdir -p $L; commit=$(cat $C/COMMIT)
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
san() { # san TOOL BINARY [FILTER]
  local s=$SECONDS; PAGEDATTN_TEST_REDUCED=1 timeout 80 compute-sanitizer --tool $1 --error-exitcode 99 $C/$2 "${3:-~[api_error]}" > $L/san-$1-$2.txt 2>&1; local rc=$?
  local errors=$(grep -Eo 'ERROR SUMMARY: [0-9]+' $L/san-$1-$2.txt | tail -1 | grep -Eo '[0-9]+$' || true)
  [ -z "$errors" ] && errors=$(grep -Eo '\(([0-9]+) errors' $L/san-$1-$2.txt | tail -1 | grep -Eo '[0-9]+' || true)
  echo "$1 $2 ${3:-~[api_error]} errors=${errors:-?} rc=$rc $((SECONDS - s)) s"
}
{ echo "# compute-sanitizer on $gpu, commit $commit (PAGEDATTN_TEST_REDUCED=1, ~[api_error]): tool binary errors rc"
san racecheck test_decode_fp16 "[q_len]" # (the whole binary's racecheck passed 90 s in part 1)
for tool in memcheck synccheck initcheck; do san $tool test_decode_layouts; done
san racecheck test_decode_layouts "[variants]"
san memcheck test_decode_biv100_policy
for tool in synccheck initcheck; do san $tool test_decode_fp8; done; } | tee $OUT/h200-sanitizer-part3.txt
tar -C $OUT -czf $OUT/logs-part3.tar.gz logs && rm -rf $L
