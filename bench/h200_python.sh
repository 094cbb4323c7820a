#!/usr/bin/env bash
# The Python package's device run (a call of its own: bench/h200_run.sh fills most of one call's 10 minutes):
# build pagedattn._C in place for the GPU present with the installed torch, run its pytest suite (the seed
# comparison too when .seed/ is carried: bash bench/fetch_seed.sh) and its benchmark (bench_ops: an eager
# call against a graph replay, against the C++ call (bench_call_overhead, built here beside the package)
# and against the seed). Writes h200-python-tests.txt and h200-python-ops.json to $OUT. COMMIT=SHA names
# the commit in the results where the device's copy has no git history of its own.
# Usage (device tool, repo root): bash bench/h200_python.sh        with carry [".seed"]
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
log() { echo "[h200_python] $*"; }
python3 -c "import torch; assert torch.cuda.is_available()" || { log "no torch with CUDA here"; exit 1; }
commit=${COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
arch=$(python3 -c "import torch; print('%d.%d' % torch.cuda.get_device_capability())")
log "device: $gpu; commit $commit; torch $(python3 -c 'import torch; print(torch.__version__)'); arch $arch"

log "build (the package, and bench_call_overhead beside it)"
sm=${arch/./}
( cmake -S . -B build-call-overhead -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$sm" -DPAGEDATTN_BUILD_TESTS=OFF \
        -DPAGEDATTN_BUILD_EXAMPLES=OFF -DPAGEDATTN_BUILD_BENCH=ON && timeout 420 cmake --build build-call-overhead --target bench_call_overhead ) \
  >"$OUT/h200-call-overhead-build.txt" 2>&1 &
cpp_build=$!
if ! (cd python && TORCH_CUDA_ARCH_LIST=$arch timeout 420 python3 setup.py build_ext --inplace) >"$OUT/h200-python-build.txt" 2>&1; then
  log "build failed"; tail -40 "$OUT/h200-python-build.txt"; exit 1
fi
wait $cpp_build || { log "bench_call_overhead build failed"; tail -20 "$OUT/h200-call-overhead-build.txt"; exit 1; }
PYTHONPATH=$PWD/python python3 -c "import pagedattn" || { log "the built package does not import"; exit 1; }
log "tests"
{
  echo "# pytest on $gpu, commit $commit, $(date -u +%Y-%m-%dT%H:%MZ)"
  # -v: each test's name before it runs, so that a crash names its test (faulthandler, on by default in
  # pytest, prints the Python stack); the bad-input cases run in child processes (test_ops.py).
  PYTHONPATH=$PWD/python timeout 300 python3 -m pytest -v -rfEs python/tests 2>&1
} | tee "$OUT/h200-python-tests.txt" | tail -30
tests_rc=${PIPESTATUS[0]}
log "tests: exit status $tests_rc"
log "bench"
cpp_bench=build-call-overhead/bench/bench_call_overhead
PYTHONPATH=$PWD/python timeout 300 python3 python/bench/bench_ops.py --out "$OUT/h200-python-ops.json" --cpp-bench "$cpp_bench" --commit "$commit"
bench_rc=$?
log "bench: exit status $bench_rc"
exit $((tests_rc != 0 || bench_rc != 0))
