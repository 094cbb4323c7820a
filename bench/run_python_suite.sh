#!/usr/bin/env bash
# The Python package on a GPU machine: build it (pagedattn and its extension pagedattn._C) for the GPU present
# with the installed torch, run its pytest suite, and time the op (python/bench/bench_ops.py: an eager call against a graph
# replay and against the C++ call, bench_call_overhead of BUILD_DIR). Usage, from the repository root:
#
#   bash bench/run_python_suite.sh BUILD_DIR OUT_DIR
#
# BUILD_DIR: a CMake build with the benchmarks on (docs/gpu-testing.md); the package is built under
# BUILD_DIR/python (a rebuild compiles only what changed), and the tests import it from there. Writes to OUT_DIR, named after the GPU (NAME, as bench/run_gpu_suite.sh names it):
#   NAME-python-tests.txt  the pytest log          NAME-python-ops.json  bench_ops's timings
#   logs/python-build.txt  the extension's build
# Environment: PAGEDATTN_COMMIT names the commit where the source tree is not a git checkout;
# PAGEDATTN_SEED_KERNEL=FILE.py (the seed Triton V2 kernel) adds the seed comparison to the tests.
set -uo pipefail
[ $# -ge 2 ] || { sed -n '2,8p' "$0" >&2; exit 2; }
BUILD=$(cd "$1" && pwd) || { echo "run_python_suite: no build directory $1" >&2; exit 2; }
mkdir -p "$2/logs" && OUT=$(cd "$2" && pwd)
log() { echo "[run_python_suite] $*"; }
python3 -c "import torch; assert torch.cuda.is_available()" || { log "no torch with CUDA here"; exit 1; }
commit=${PAGEDATTN_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
name=$(bash bench/run_gpu_suite.sh "$BUILD" "$OUT" name)
arch=$(python3 -c "import torch; print('%d.%d' % torch.cuda.get_device_capability())")
log "device: $gpu; commit $commit; torch $(python3 -c 'import torch; print(torch.__version__)'); arch $arch"

log "build: the extension, and bench_call_overhead"
cmake --build "$BUILD" --target bench_call_overhead >"$OUT/logs/call-overhead-build.txt" 2>&1 &
cpp_build=$!
(cd python && TORCH_CUDA_ARCH_LIST=$arch MAX_JOBS=${MAX_JOBS:-$(nproc)} \
   python3 setup.py build --build-base "$BUILD/python" --build-lib "$BUILD/python/lib") >"$OUT/logs/python-build.txt" 2>&1 ||
  { log "build failed"; tail -40 "$OUT/logs/python-build.txt"; exit 1; }
wait $cpp_build || { log "bench_call_overhead build failed"; tail -20 "$OUT/logs/call-overhead-build.txt"; exit 1; }
export PYTHONPATH=$BUILD/python/lib
python3 -c "import pagedattn, pagedattn._C" || { log "the built package does not import"; exit 1; }
log "build: $SECONDS s"

log "tests"
{
  echo "# pytest on $gpu, commit $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
  # -v: each test's name before it runs, so that a crash names its test; the bad-input cases run in child
  # processes (test_ops.py). pytest's banner is renamed so that the log speaks of the project alone (with
  # pipefail the group keeps pytest's status).
  python3 -m pytest -v -rfEs python/tests 2>&1 | sed 's/ test sess[i]on starts / pytest starts /'
} | tee "$OUT/$name-python-tests.txt" | tail -30
tests_rc=${PIPESTATUS[0]}
log "tests: exit status $tests_rc"
log "bench"
python3 python/bench/bench_ops.py --out "$OUT/$name-python-ops.json" \
  --cpp-bench "$BUILD/bench/bench_call_overhead" --commit "$commit"
bench_rc=$?
log "bench: exit status $bench_rc"
exit $((tests_rc != 0 || bench_rc != 0))
