#!/usr/bin/env bash
# The device run: everything the H200 has to do for one commit, in one call.
#
#   1. use the build in $BUILD (made here by bench/build_for_h200.sh and carried along), or configure and
#      build one there with that machine's nvcc/cmake/ninja and the Catch2 package unpacked in .deps/;
#   2. run every test through ctest;
#   3. run compute-sanitizer memcheck, racecheck, synccheck and initcheck on every GPU test binary
#      (with PAGEDATTN_TEST_REDUCED=1, the reduced matrix);
#   4. run the example and the benchmarks (pagedattn, the seed Triton kernel when .seed/ has it), merged
#      into h200.json and h200.png, the timeline tool (trace_decode, its log only) and Nsight Compute on
#      the latency-bound shapes (h200-ncu.txt);
#   5. write logs and summary.json to $OUT.
# Usage (device tool, repo root): bash bench/h200_run.sh [build-dir]     with carry [".carry"]
# H200_RUN_PART=tests (steps 2 and 5), sanitizers (step 3 alone) and bench (steps 4 and 5) split the run
# over calls of the device tool, back to back on the warm machine, when one call's 10 minutes cannot hold
# it all (a build carried in two parts where it is carried: the carry holds 64 MiB); build
# (step 1 alone) builds there, with its 16 cores, for the calls after it on the warm machine (which keeps
# the git-ignored build folder), carry [".deps"]: PAGEDATTN_COMMIT stamps that build (no .git there);
# SANITIZER_TIMEOUT (seconds, default 600) caps each tool's run of each binary (a cut run says rc=124);
# SANITIZER_BINARIES (names, space-separated; default every GPU test binary) picks the binaries it checks.
# H200_RUN_PART=ncu runs the Nsight Compute step alone, on NCU_SHAPES (bench_decode --shape values,
# space-separated; default the latency-bound shapes and 64x4096 below).
set -uo pipefail
PART=${H200_RUN_PART:-all}
SANITIZER_TIMEOUT=${SANITIZER_TIMEOUT:-600}
OUT=${OUT:-$PWD/out}
BUILD=${1:-build-h200}
LOGS="$OUT/logs"
mkdir -p "$OUT" "$LOGS"
log() { echo "[h200_run] $*"; }

# A carried build always replaces what a warm machine kept from an earlier call (a stale build would run
# under the wrong commit stamp).
if [ -f ".carry/$BUILD.tgz" ]; then rm -rf "$BUILD" && tar -xzf ".carry/$BUILD.tgz"; fi
if [ ! -f "$BUILD/CTestTestfile.cmake" ]; then
  log "no carried build: configuring one here"
  catch2_dir=$PWD/.deps/catch2/usr/lib/cmake/Catch2
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DCatch2_DIR="$catch2_dir" -DPAGEDATTN_BUILD_EXAMPLES=ON -DPAGEDATTN_BUILD_BENCH=ON >"$LOGS/configure.txt" 2>&1 \
    || { log "configure failed"; tail -30 "$LOGS/configure.txt"; exit 1; }
  cmake --build "$BUILD" -j "$(nproc)" >"$LOGS/build.txt" 2>&1 || { log "build failed"; tail -30 "$LOGS/build.txt"; exit 1; }
  if [ -n "${PAGEDATTN_COMMIT:-}" ]; then echo "$PAGEDATTN_COMMIT" >"$BUILD/COMMIT"
  else git rev-parse HEAD >"$BUILD/COMMIT" 2>/dev/null || echo unknown >"$BUILD/COMMIT"; fi
  echo "$PWD" >"$BUILD/SOURCE_DIR"
  log "built in $SECONDS s"
fi
if [ "$PART" = build ]; then exit 0; fi
commit=$(cat "$BUILD/COMMIT" 2>/dev/null || echo unknown)

# CTest files hold the absolute paths of the machine that configured the build: recreate that path.
src=$(cat "$BUILD/SOURCE_DIR" 2>/dev/null || echo "$PWD")
if [ "$src" != "$PWD" ] && [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"; fi

# The install-consumer test calls the cmake that configured the build (/usr/bin/cmake here).
if [ ! -x /usr/bin/cmake ] && command -v cmake >/dev/null; then ln -s "$(command -v cmake)" /usr/bin/cmake; fi

gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
log "device: $gpu; commit $commit"

# ---- 2. every test --------------------------------------------------------------------------------------
ctest_rc=0
if [ "$PART" = all ] || [ "$PART" = tests ]; then
{
  echo "# ctest on $gpu, commit $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
  # -LE compile: the BI-V100 compile checks need no GPU (CI runs them), only device time here.
  (cd "$src/$BUILD" 2>/dev/null || cd "$BUILD"; PAGEDATTN_TEST_REPORT="$LOGS/errors.txt" ctest -LE compile --output-on-failure --timeout 900 2>&1)
} | tee "$OUT/h200-tests.txt" | tail -25
ctest_rc=${PIPESTATUS[0]}
fi

# ---- 3. compute-sanitizer on every GPU test binary --------------------------------------------------------
if [ "$PART" = all ] || [ "$PART" = sanitizers ]; then
mapfile -t gpu_bins < <(find "$BUILD/test" -maxdepth 1 -type f -perm -u+x -name 'test_*' | sort)
{
  echo "# compute-sanitizer on $gpu, commit $commit: tool binary errors (PAGEDATTN_TEST_REDUCED=1)${SANITIZER_BINARIES:+; only $SANITIZER_BINARIES}"
  for bin in "${gpu_bins[@]}"; do
    name=$(basename "$bin")
    case "$name" in *_host) continue ;; esac
    if [ -n "${SANITIZER_BINARIES:-}" ]; then case " $SANITIZER_BINARIES " in *" $name "*) ;; *) continue ;; esac; fi
    for tool in memcheck racecheck synccheck initcheck; do
      logf="$LOGS/sanitizer-$tool-$name.txt"
      # ~[api_error]: leave out the cases that provoke a CUDA API error on purpose (the sanitizer counts those)
      PAGEDATTN_TEST_REDUCED=1 timeout "$SANITIZER_TIMEOUT" compute-sanitizer --tool "$tool" --error-exitcode 99 "$bin" "~[api_error]" >"$logf" 2>&1
      rc=$?
      # memcheck/synccheck/initcheck: "ERROR SUMMARY: N errors"; racecheck: "RACECHECK SUMMARY: ... (N errors, M warnings)"
      errors=$(grep -Eo 'ERROR SUMMARY: [0-9]+' "$logf" | tail -1 | grep -Eo '[0-9]+$' || true)
      [ -z "$errors" ] && errors=$(grep -Eo '\(([0-9]+) errors' "$logf" | tail -1 | grep -Eo '[0-9]+' || true)
      [ -z "$errors" ] && errors="?"
      echo "$tool $name errors=$errors rc=$rc"
    done
  done
} | tee "$OUT/h200-sanitizer.txt"
fi
if [ "$PART" = sanitizers ]; then tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs && rm -rf "$LOGS"; exit 0; fi

# ---- 4. the example and the benchmarks ----------------------------------------------------------------------
# Outputs and JSON go to logs/ (archived below); the merged h200.json and h200.png to $OUT. Every step runs
# whatever the previous ones did: a failing program only leaves its JSON missing.
run_step() { # run_step NAME TIME_LIMIT_S COMMAND...: output in logs/NAME.txt, its tail and exit status shown
  local name=$1 limit=$2
  shift 2
  log "$name"
  timeout "$limit" "$@" 2>&1 | tee "$LOGS/$name.txt" | tail -25
  log "$name: exit status ${PIPESTATUS[0]}"
}
if [ "$PART" = all ] || [ "$PART" = bench ]; then
[ -x "$BUILD/examples/qwen36_decode" ] && run_step qwen36_decode 300 "$BUILD/examples/qwen36_decode"
[ -x "$BUILD/examples/gated_output" ] && run_step gated_output 120 "$BUILD/examples/gated_output"
[ -x "$BUILD/bench/bench_decode" ] &&
  run_step bench_decode 600 "$BUILD/bench/bench_decode" --json "$LOGS/bench_decode.json" --commit "$commit" --dtype fp16
# fp8 caches (issue 17): the uniform table with e4m3, and the Qwen3.6 rows with e5m2
[ -x "$BUILD/bench/bench_decode" ] &&
  run_step bench_decode_fp8_e4m3 300 "$BUILD/bench/bench_decode" --json "$LOGS/bench_decode_fp8_e4m3.json" --commit "$commit" \
    --dtype fp16/fp8_e4m3 $(for s in 1x100000 1x16384 8x32768 32x8192 64x4096 256x1024 1x1000 4x2049; do echo --shape $s@24/4/256; done) \
    --shape 1x100000@24/4/128 --shape 64x4096@24/4/128 --shape 64x4096@32/8/128 --shape 64xlog100-100000
[ -x "$BUILD/bench/bench_decode" ] &&
  run_step bench_decode_fp8_e5m2 300 "$BUILD/bench/bench_decode" --json "$LOGS/bench_decode_fp8_e5m2.json" --commit "$commit" \
    --dtype fp16/fp8_e5m2 --shape 1x100000@24/4/256 --shape 64x4096@24/4/256
# Cache layouts (issue 17): the Qwen3.6 rows with HND and NHD caches (packed), and e4m3 in HND
qwen_rows=$(for s in 1x100000 1x16384 8x32768 32x8192 64x4096 256x1024; do echo --shape $s@24/4/256; done)
for layout in hnd nhd; do
  [ -x "$BUILD/bench/bench_decode" ] &&
    run_step bench_decode_layout_$layout 300 "$BUILD/bench/bench_decode" --json "$LOGS/bench_decode_layout_$layout.json" \
      --commit "$commit" --dtype fp16 --layout $layout $qwen_rows --shape 64x4096@24/4/128 --shape 1x100000+63x512
done
for layout in hnd nhd; do
  [ -x "$BUILD/bench/bench_decode" ] &&
    run_step bench_decode_layout_${layout}_fp8 300 "$BUILD/bench/bench_decode" --json "$LOGS/bench_decode_layout_${layout}_fp8.json" \
      --commit "$commit" --dtype fp16/fp8_e4m3 --layout $layout --shape 1x100000@24/4/256 --shape 64x4096@24/4/256 --shape 64x4096@24/4/128
done
[ -x "$BUILD/bench/bench_combine" ] &&
  run_step bench_combine 300 "$BUILD/bench/bench_combine" --json "$LOGS/bench_combine.json" --commit "$commit"
[ -x "$BUILD/bench/trace_decode" ] && # the per-block timeline of the latency-bound shapes (log only)
  run_step trace_decode 120 "$BUILD/bench/trace_decode"
fi
# Nsight Compute on one launch of each latency-bound shape (and 64x4096, which meets its target, beside
# them), or of NCU_SHAPES: the kernel's own duration, the bytes it moved, how busy DRAM was over the
# kernel, blocks per SM, and where the warps stalled. The details go to logs/, a table to h200-ncu.txt.
bench_part() { [ "$PART" = all ] || [ "$PART" = bench ]; }
if { bench_part || [ "$PART" = ncu ]; } && [ -x "$BUILD/bench/bench_decode" ] && command -v ncu >/dev/null; then
  log "ncu"
  for shape in ${NCU_SHAPES:-1x1000@24/4/256 1x16384@24/4/256 1x100000@24/4/256 1x100000@24/4/128 64x4096@24/4/256}; do
    tag=$(echo "$shape" | tr '@/' '__')
    timeout 300 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
      --section LaunchStats --section Occupancy -k regex:paged_attention_kernel --launch-skip 3 --launch-count 1 \
      -o "/tmp/ncu-$tag" -f "$BUILD/bench/bench_decode" --quick --json /tmp/ncu-bench.json --shape "$shape" >"$LOGS/ncu-run-$tag.txt" 2>&1
    ncu --import "/tmp/ncu-$tag.ncu-rep" --page details >"$LOGS/ncu-$tag.txt" 2>&1
    ncu --import "/tmp/ncu-$tag.ncu-rep" --page raw --csv >"$LOGS/ncu-raw-$tag.csv" 2>&1
  done
  python3 bench/ncu_summary.py "$LOGS" "$commit" "$gpu" >"$OUT/h200-ncu.txt" 2>&1; cat "$OUT/h200-ncu.txt"
fi
if [ "$PART" = ncu ]; then tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs && rm -rf "$LOGS"; exit 0; fi
if bench_part; then
for b in "$BUILD"/bench/bench_*; do # any other benchmark: its JSON beside its log
  name=$(basename "$b")
  # policies: a tuning tool, run by hand; paged_read: issue 20's copy-mechanism probe (no JSON), run by hand
  case "$name" in bench_decode | bench_combine | bench_policies | bench_paged_read) continue ;; esac
  [ -x "$b" ] && run_step "$name" 300 "$b" --json "$LOGS/$name.json" --commit "$commit"
done
if [ -f .seed/paged_attention_v2_triton.py ]; then
  run_step seed_triton_bench 300 python3 bench/seed_triton_bench.py --out "$LOGS/seed.json"
fi
if [ -f "$LOGS/bench_decode.json" ]; then
  more_runs=$(ls "$LOGS"/bench_decode_fp8_*.json "$LOGS"/bench_decode_layout_*.json 2>/dev/null)
  run_step merge_results 120 python3 bench/merge_results.py --pagedattn "$LOGS/bench_decode.json" $more_runs --seed "$LOGS/seed.json" \
    --combine "$LOGS/bench_combine.json" --out "$OUT/h200.json" --plot "$OUT/h200.png"
fi
fi

# ---- 5. summary ---------------------------------------------------------------------------------------------
python3 - "$OUT" "$commit" "$gpu" "$ctest_rc" <<'PY'
import json, re, sys, pathlib
out, commit, gpu, ctest_rc = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
tests_file = pathlib.Path(out, "h200-tests.txt")  # (absent from a run of H200_RUN_PART=bench)
tests = tests_file.read_text() if tests_file.exists() else ""
m = re.search(r"(\d+)% tests passed(?:, (\d+) tests failed)? out of (\d+)", tests)
san_file = pathlib.Path(out, "h200-sanitizer.txt")  # (absent from a run of H200_RUN_PART=tests)
san = [l.split() for l in san_file.read_text().splitlines() if not l.startswith("#")] if san_file.exists() else []
summary = {
  "device": gpu, "commit": commit, "ctest_rc": ctest_rc,
  "tests_total": int(m.group(3)) if m else None, "tests_failed": int(m.group(2) or 0) if m else None,
  "sanitizer": [{"tool": t, "binary": b, "errors": e.split("=")[1], "rc": r.split("=")[1]} for t, b, e, r in san],
}
errs = pathlib.Path(out, "logs", "errors.txt")
worst = {}
if errs.exists():
  for line in errs.read_text().splitlines():
    dtype, *what, e = line.split()
    worst[dtype] = max(worst.get(dtype, 0.0), float(e))
summary["worst_rel_l2_by_dtype"] = worst
# None where the sanitizers did not run in this call (H200_RUN_PART=tests), not 0.
summary["sanitizer_errors_total"] = sum(int(s["errors"]) for s in summary["sanitizer"] if s["errors"].isdigit()) if san_file.exists() else None
pathlib.Path(out, "summary.json").write_text(json.dumps(summary, indent=1))
print(json.dumps({k: v for k, v in summary.items() if k != "sanitizer"}))
PY
# At most 8 files come back from the device: the logs travel as one archive.
tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs && rm -rf "$LOGS"
