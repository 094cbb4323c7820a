#!/usr/bin/env bash
# Everything a GPU machine checks and measures for one commit: the GPU tests, the sanitizers, the example and
# the benchmarks. Usage, from the repository root, with a build configured for the GPU present
# (docs/gpu-testing.md):
#
#   bash bench/run_gpu_suite.sh BUILD_DIR OUT_DIR [all|tests|sanitizers|bench|ncu|name]
#
# Writes to OUT_DIR, each file named after the GPU (NAME: its model, lower case, e.g. h200):
#   NAME-tests.txt      ctest, every test but the compile and records checks (labels "compile" and "records":
#                       they need no GPU, and the records check reads the bench/results/ this run replaces)
#   NAME-sanitizer.txt  compute-sanitizer memcheck, racecheck, synccheck and initcheck on every GPU test
#                       binary (the reduced matrix, PAGEDATTN_TEST_REDUCED=1): one line per tool and binary
#   NAME.json, NAME.png bench_decode (fp16; fp8, fp32, BI-V100 policy and layout rows), bench_combine and the
#                       seed, merged
#   NAME-ncu.txt        Nsight Compute on one launch of each latency-bound shape, of 64x4096 and of four serving
#                       rows (256x1024 at head 128, a skewed batch, two graph replays at a loose bound), and the FP32 FMA
#                       rate of the CUDA-core fold (fp32, and the BI-V100 policy in fp16) at 64x4096
#   NAME-trace.txt      trace_decode: the per-block timelines of the latency-bound shapes and of the serving rows
#   summary.json        the device, the commit, test and sanitizer totals, the worst error per element type
#                       (written once the tests and the sanitizers have both run into OUT_DIR)
#   logs/               every step's full output
# A part (tests, sanitizers, bench, ncu) runs that step alone: parts run one after another into one OUT_DIR
# add up to a full run. Part name prints NAME and runs nothing.
# Environment: PAGEDATTN_COMMIT names the commit where the source tree is not a git checkout;
# PAGEDATTN_SEED_KERNEL=FILE.py, the seed Triton V2 kernel as a Python module, adds its timings beside pagedattn's;
# SANITIZER_TIMEOUT (seconds, default 600) caps each tool's run of each binary (a cut run says rc=124);
# SANITIZER_BINARIES (space-separated names; default every GPU test binary) picks the binaries it checks,
# SANITIZER_JOBS (default 1) how many sanitizer runs share the GPU at a time;
# NCU_SHAPES (bench_decode --shape values, space-separated) replaces the profiled shapes (not the fold's two).
set -uo pipefail
[ $# -ge 2 ] || { sed -n '2,8p' "$0" >&2; exit 2; }
BUILD=$(cd "$1" && pwd) || { echo "run_gpu_suite: no build directory $1" >&2; exit 2; }
mkdir -p "$2" && OUT=$(cd "$2" && pwd)
PART=${3:-all}
case "$PART" in all | tests | sanitizers | bench | ncu | name) ;; *) echo "run_gpu_suite: unknown part $PART" >&2; exit 2 ;; esac
SANITIZER_TIMEOUT=${SANITIZER_TIMEOUT:-600}
LOGS="$OUT/logs"
mkdir -p "$LOGS"
log() { echo "[run_gpu_suite] $*"; }
part() { [ "$PART" = all ] || [ "$PART" = "$1" ]; }

commit=${PAGEDATTN_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
[ -n "$gpu" ] || { log "no NVIDIA GPU visible (nvidia-smi)"; exit 1; }
# The model's word (H100 in "NVIDIA H100 80GB HBM3", H200 in "NVIDIA H200"), else the name's last word.
name=$(echo "${gpu%%,*}" | awk '{for (i = 1; i <= NF; ++i) if ($i ~ /^[A-Za-z]+[0-9][0-9]+/) { sub(/-.*/, "", $i); print tolower($i); exit }
                                print tolower($NF)}')
[ "$PART" = name ] && { echo "$name"; exit 0; }
header() { echo "# $1 on $gpu, commit $commit, $(date -u +%Y-%m-%dT%H:%MZ)"; }
log "device: $gpu; commit $commit; files $OUT/$name*"

# ---- every test ---------------------------------------------------------------------------------------------
ctest_rc=
if part tests; then
  {
    header ctest
    (cd "$BUILD" && PAGEDATTN_TEST_REPORT="$LOGS/errors.txt" ctest -LE 'compile|records' --output-on-failure --timeout 900 2>&1)
  } | tee "$OUT/$name-tests.txt" | tail -25
  ctest_rc=${PIPESTATUS[0]}
fi

# ---- compute-sanitizer on every GPU test binary ---------------------------------------------------------------
# sanitize TOOL BINARY: one tool's run of one test binary, its log in logs/, its line in logs/ beside it.
sanitize() {
  local tool=$1 bin=$2 binary errors rc
  binary=$(basename "$bin")
  local logf="$LOGS/sanitizer-$tool-$binary.txt"
  # ~[api_error]: the cases that provoke a CUDA API error on purpose, which the sanitizer would count.
  PAGEDATTN_TEST_REDUCED=1 timeout "$SANITIZER_TIMEOUT" compute-sanitizer --tool "$tool" --error-exitcode 99 \
    "$bin" "~[api_error]" >"$logf" 2>&1
  rc=$?
  # memcheck, synccheck, initcheck: "ERROR SUMMARY: N errors"; racecheck: "RACECHECK SUMMARY: ... (N errors, M warnings)"
  errors=$(grep -Eo 'ERROR SUMMARY: [0-9]+' "$logf" | tail -1 | grep -Eo '[0-9]+$' || true)
  [ -n "$errors" ] || errors=$(grep -Eo '\(([0-9]+) errors' "$logf" | tail -1 | grep -Eo '[0-9]+' || true)
  echo "$tool $binary errors=${errors:-?} rc=$rc" >"$LOGS/sanitizer-line-$tool-$binary.txt"
}
if part sanitizers; then
  mapfile -t gpu_bins < <(find "$BUILD/test" -maxdepth 1 -type f -perm -u+x -name 'test_*' ! -name '*_host*' | sort)
  runs=()
  for bin in "${gpu_bins[@]}"; do
    binary=$(basename "$bin")
    if [ -n "${SANITIZER_BINARIES:-}" ]; then case " $SANITIZER_BINARIES " in *" $binary "*) ;; *) continue ;; esac; fi
    for tool in memcheck racecheck synccheck initcheck; do runs+=("$tool $bin"); done
  done
  export -f sanitize
  export LOGS SANITIZER_TIMEOUT
  # SANITIZER_JOBS runs at a time (default 1): the runs share the GPU, which only slows each.
  printf '%s\n' "${runs[@]}" | xargs -P "${SANITIZER_JOBS:-1}" -L 1 bash -c 'sanitize "$0" "$1"'
  {
    header "compute-sanitizer (PAGEDATTN_TEST_REDUCED=1${SANITIZER_BINARIES:+; only $SANITIZER_BINARIES}): tool binary errors"
    for run in "${runs[@]}"; do
      set -- $run
      cat "$LOGS/sanitizer-line-$1-$(basename "$2").txt"
    done
  } | tee "$OUT/$name-sanitizer.txt"
fi

# ---- the examples and the benchmarks ------------------------------------------------------------------------
# Each step runs whatever the ones before it did: a failing program only leaves its JSON missing.
run_step() { # run_step NAME TIME_LIMIT_S COMMAND...: output in logs/NAME.txt, its tail and exit status shown
  local step=$1 limit=$2
  shift 2
  log "$step"
  timeout "$limit" "$@" 2>&1 | tee "$LOGS/$step.txt" | tail -25
  log "$step: exit status ${PIPESTATUS[0]}"
}
bench_decode=$BUILD/bench/bench_decode
if part bench; then
  for example in qwen36_decode gated_output score_variant; do
    [ -x "$BUILD/examples/$example" ] && run_step "$example" 300 "$BUILD/examples/$example"
  done
  run_step bench_decode 600 "$bench_decode" --json "$LOGS/bench_decode.json" --commit "$commit" --dtype fp16
  qwen_rows=$(for s in 1x100000 1x16384 8x32768 32x8192 64x4096 256x1024; do echo --shape $s@24/4/256; done)
  # fp8 caches: the Qwen3.6 rows, head 128, the latency rows and the mixes, in each format; bf16 queries over e4m3.
  fp8_rows="$qwen_rows $(for s in 1x1000 4x2049; do echo --shape $s@24/4/256; done)
    $(for s in 1x100000@24/4/128 64x4096@24/4/128 256x1024@24/4/128 1x1000@24/4/128 1x100000@32/8/128 64x4096@32/8/128 \
      64xlog100-100000 1x100000+63x512; do echo --shape $s; done)"
  for format in e4m3 e5m2; do
    run_step bench_decode_fp8_$format 400 "$bench_decode" --json "$LOGS/bench_decode_fp8_$format.json" --commit "$commit" \
      --dtype fp16/fp8_$format $fp8_rows
  done
  run_step bench_decode_fp8_bf16 300 "$bench_decode" --json "$LOGS/bench_decode_fp8_bf16.json" --commit "$commit" \
    --dtype bf16/fp8_e4m3 --shape 1x100000@24/4/256 --shape 64x4096@24/4/256 --shape 1x100000@24/4/128 --shape 64x4096@24/4/128
  # The CUDA-core fold (fp32: the path of BI-V100 and of sm_80's fp8) on the Qwen3.6 rows, and the same rows in
  # fp16 under the BI-V100 policy (its tile at this GPU's 32-lane warps): docs/biv100.md's prediction reads both.
  run_step bench_decode_fp32 300 "$bench_decode" --json "$LOGS/bench_decode_fp32.json" --commit "$commit" \
    --dtype fp32 --shape 1x100000@24/4/256 --shape 64x4096@24/4/256
  run_step bench_decode_biv100 300 "$bench_decode" --json "$LOGS/bench_decode_biv100.json" --commit "$commit" \
    --dtype fp16 --policy biv100 --shape 1x100000@24/4/256 --shape 64x4096@24/4/256
  # Cache layouts: the Qwen3.6 rows with HND and NHD caches (packed), fp16 and e4m3.
  for layout in hnd nhd; do
    run_step bench_decode_layout_$layout 300 "$bench_decode" --json "$LOGS/bench_decode_layout_$layout.json" \
      --commit "$commit" --dtype fp16 --layout $layout $qwen_rows --shape 64x4096@24/4/128 --shape 1x100000+63x512
    run_step bench_decode_layout_${layout}_fp8 300 "$bench_decode" --json "$LOGS/bench_decode_layout_${layout}_fp8.json" \
      --commit "$commit" --dtype fp16/fp8_e4m3 --layout $layout --shape 1x100000@24/4/256 --shape 64x4096@24/4/256 \
      --shape 64x4096@24/4/128
  done
  run_step bench_combine 300 "$BUILD/bench/bench_combine" --json "$LOGS/bench_combine.json" --commit "$commit"
  for b in "$BUILD"/bench/bench_*; do # any other benchmark, its JSON beside its log
    step=$(basename "$b")
    # bench_policies (a tuning sweep) and bench_paged_read (a copy-mechanism probe) are run by hand.
    case "$step" in bench_decode | bench_combine | bench_policies | bench_paged_read) continue ;; esac
    [ -x "$b" ] && run_step "$step" 300 "$b" --json "$LOGS/$step.json" --commit "$commit"
  done
  if [ -n "${PAGEDATTN_SEED_KERNEL:-}" ]; then
    run_step seed_triton_bench 300 python3 bench/seed_triton_bench.py --seed-file "$PAGEDATTN_SEED_KERNEL" --out "$LOGS/seed.json"
  fi
  more_runs=$(ls "$LOGS"/bench_decode_fp8_*.json "$LOGS"/bench_decode_fp32.json "$LOGS"/bench_decode_biv100.json \
    "$LOGS"/bench_decode_layout_*.json 2>/dev/null)
  [ -f "$LOGS/bench_decode.json" ] &&
    run_step merge_results 120 python3 bench/merge_results.py --pagedattn "$LOGS/bench_decode.json" $more_runs \
      --seed "$LOGS/seed.json" --combine "$LOGS/bench_combine.json" --out "$OUT/$name.json" --plot "$OUT/$name.png"
  # The latency-bound shapes (trace_decode's own list), then the serving rows: skewed and log-uniform batches,
  # 256x1024 at head 128, and graph replays at a loose bound (0xBOUND+COUNTxLEN: COUNT sequences of LEN tokens).
  { header trace_decode; timeout 120 "$BUILD/bench/trace_decode" 2>&1
    timeout 180 "$BUILD/bench/trace_decode" --shape 1x32768+63x100 --shape 1x100000+63x512 --shape 256xlog16-8192 \
      --shape 256x1024x128 --graph --shape 0x65536+1x1000 --shape 0x8192+32x1000 --shape 0x65536+64x1000 2>&1; } >"$OUT/$name-trace.txt"
  log "trace_decode: exit status $?"
fi

# ---- Nsight Compute ------------------------------------------------------------------------------------------
# One launch of each latency-bound shape, of 64x4096 and of four serving rows beside them: the kernel's duration, the bytes it moved,
# how busy DRAM was, blocks per SM, and where the warps stalled. The details go to logs/, a table to NAME-ncu.txt.
if part ncu && command -v ncu >/dev/null; then
  log "ncu"
  for shape in ${NCU_SHAPES:-1x1000@24/4/256 1x16384@24/4/256 1x100000@24/4/256 1x100000@24/4/128 64x4096@24/4/256 \
                256x1024@24/4/128 1x32768+63x100 graph:1x1000@65536 graph:32x1000@8192}; do
    tag=$(echo "$shape" | tr '@/' '__')
    timeout 300 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
      --section LaunchStats --section Occupancy -k regex:paged_attention_kernel --launch-skip 3 --launch-count 1 \
      -o "$LOGS/ncu-$tag" -f "$bench_decode" --quick --json "$LOGS/ncu-bench.json" --shape "$shape" >"$LOGS/ncu-run-$tag.txt" 2>&1
    ncu --import "$LOGS/ncu-$tag.ncu-rep" --page details >"$LOGS/ncu-$tag.txt" 2>&1
    ncu --import "$LOGS/ncu-$tag.ncu-rep" --page raw --csv >"$LOGS/ncu-raw-$tag.csv" 2>&1
    rm -f "$LOGS/ncu-$tag.ncu-rep"
  done
  python3 bench/ncu_summary.py "$LOGS" "$commit" "$gpu" >"$OUT/$name-ncu.txt" 2>&1
  # The CUDA-core fold's FP32 FMA rate: one launch of fp32, and of fp16 under the BI-V100 policy, at 64x4096
  # (the FFMA count and rate, the FMA pipe's busy share, DRAM's), for docs/biv100.md's prediction.
  # A name ncu does not know fails the whole profile: each is checked against ncu --query-metrics first (all are
  # kept where the query lists none of them).
  fold_all="gpu__time_duration.sum sm__sass_thread_inst_executed_op_ffma_pred_on.sum
    sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained sm__cycles_elapsed.avg.per_second
    smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_second sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active
    dram__throughput.avg.pct_of_peak_sustained_elapsed dram__bytes_read.sum sm__issue_active.avg.pct_of_peak_sustained_elapsed"
  known=" $(ncu --query-metrics 2>/dev/null | awk '{print $1}' | tr '\n' ' ') "
  fold_metrics=
  for metric in $fold_all; do
    case "$known" in
      *" ${metric%%.*} "*) fold_metrics+=${fold_metrics:+,}$metric ;;
      *) log "ncu: no metric ${metric%%.*} listed here, left out of the fold's profile" ;;
    esac
  done
  [ -n "$fold_metrics" ] || fold_metrics=$(echo $fold_all | tr ' ' ',')
  for run in "fp32 --dtype fp32" "biv100 --dtype fp16 --policy biv100"; do
    set -- $run
    tag=$1
    shift
    timeout 300 ncu --clock-control none --metrics "$fold_metrics" -k regex:paged_attention_kernel --launch-skip 3 --launch-count 1 \
      -o "$LOGS/ncu-fold-$tag" -f "$bench_decode" "$@" --quick --json "$LOGS/ncu-bench.json" --shape 64x4096@24/4/256 \
      >"$LOGS/ncu-run-fold-$tag.txt" 2>&1
    ncu --import "$LOGS/ncu-fold-$tag.ncu-rep" --page raw --csv >"$LOGS/ncu-fold-$tag.csv" 2>&1
    rm -f "$LOGS/ncu-fold-$tag.ncu-rep"
  done
  python3 bench/ncu_summary.py --fold-metrics "$LOGS" "$commit" "$gpu" >>"$OUT/$name-ncu.txt" 2>&1
  cat "$OUT/$name-ncu.txt"
fi

# ---- summary (once the tests and the sanitizers are in OUT_DIR) ----------------------------------------------------
if [ -f "$OUT/$name-tests.txt" ] && [ -f "$OUT/$name-sanitizer.txt" ]; then
  python3 - "$OUT" "$name" "$commit" "$gpu" <<'PY'
import json, re, sys, pathlib
out, name, commit, gpu = sys.argv[1:5]
tests = pathlib.Path(out, f"{name}-tests.txt").read_text()
m = re.search(r"(\d+)% tests passed(?:, (\d+) tests failed)? out of (\d+)", tests)
san = [l.split() for l in pathlib.Path(out, f"{name}-sanitizer.txt").read_text().splitlines() if not l.startswith("#")]
summary = {
  "device": gpu, "commit": commit,
  "tests_total": int(m.group(3)) if m else None, "tests_failed": int(m.group(2) or 0) if m else None,
  "sanitizer": [{"tool": t, "binary": b, "errors": e.split("=")[1], "rc": r.split("=")[1]} for t, b, e, r in san],
}
summary["sanitizer_errors_total"] = sum(int(s["errors"]) for s in summary["sanitizer"] if s["errors"].isdigit())
worst = {}
errs = pathlib.Path(out, "logs", "errors.txt")
for line in (errs.read_text().splitlines() if errs.exists() else []):
  dtype, *what, e = line.split()
  worst[dtype] = max(worst.get(dtype, 0.0), float(e))
summary["worst_rel_l2_by_dtype"] = worst
pathlib.Path(out, "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
print(json.dumps({k: v for k, v in summary.items() if k != "sanitizer"}))
PY
fi
[ -z "$ctest_rc" ] || exit "$ctest_rc"
