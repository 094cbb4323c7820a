#!/usr/bin/env bash
# Issue 15's A/B on the H200: this branch's library against main's, both built from this branch's bench
# and trace sources (the serving rows and graph rows exist only here), for sm_90, into .carry/ab/ (git-
# ignored), with the GPU tests of the device plan. Then one device call:
#   command "bash bench/ab_run.sh", carry [".carry/ab"]      (about 140 s with the machine's start)
# bench/NOTES.md (session 10) has the rows and timelines this compares.
set -euo pipefail
cd "$(dirname "$0")/.."
ref=${1:-main}
out=.carry/ab
rm -rf "$out" && mkdir -p "$out"
main_include=$(mktemp -d)
git archive "$ref" include | tar -x -C "$main_include"
flags=(-std=c++17 -O3 --expt-relaxed-constexpr -lineinfo -arch=sm_90)
for program in bench_decode trace_decode; do
  nvcc "${flags[@]}" -I"$main_include/include" "bench/$program.cu" -o "$out/${program}_main" &
  nvcc "${flags[@]}" -Iinclude "bench/$program.cu" -o "$out/${program}_branch" &
  wait
done
rm -rf "$main_include"
cmake -S . -B build-h200 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DPAGEDATTN_BUILD_TESTS=ON -DPAGEDATTN_BUILD_EXAMPLES=OFF -DPAGEDATTN_BUILD_BENCH=OFF >/dev/null
cmake --build build-h200 --target test_decode_plan test_decode_fp16 -j "$(nproc)"
cp build-h200/test/test_decode_plan build-h200/test/test_decode_fp16 "$out/"
echo "$(git rev-parse --short HEAD) against $(git rev-parse --short "$ref")" >"$out/COMMITS"
du -sh "$out"
