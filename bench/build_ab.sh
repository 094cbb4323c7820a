#!/usr/bin/env bash
# Issue 15's A/B on the H200: the library at each given git ref (default: main and HEAD), each built with
# this checkout's bench and trace sources (the serving and graph rows exist only here), for sm_90, into
# .carry/ab/ (git-ignored), with the device plan's GPU tests of this checkout. Then one device call:
#   command "bash bench/ab_run.sh", carry [".carry/ab"]      (about 2-3 minutes with the machine's start)
# bench/NOTES.md (sessions 10 and 11) has the rows and timelines this compares.
#   bash bench/build_ab.sh [REF...]      e.g. bench/build_ab.sh main HEAD~2 HEAD
set -euo pipefail
cd "$(dirname "$0")/.."
refs=("$@")
[ ${#refs[@]} -gt 0 ] || refs=(main HEAD)
out=.carry/ab
rm -rf "$out" && mkdir -p "$out"
flags=(-std=c++17 -O3 --expt-relaxed-constexpr -arch=sm_90)
: >"$out/LABELS"
for ref in "${refs[@]}"; do
  label=$(echo "$ref" | tr -c 'A-Za-z0-9_\n' '_')
  include=$(mktemp -d)
  git archive "$ref" include | tar -x -C "$include"
  nvcc "${flags[@]}" -I"$include/include" bench/bench_decode.cu -o "$out/bench_decode_$label" &
  nvcc "${flags[@]}" -lineinfo -I"$include/include" bench/trace_decode.cu -o "$out/trace_decode_$label" &
  wait
  rm -rf "$include"
  echo "$label $(git rev-parse --short "$ref")" >>"$out/LABELS"
done
cmake -S . -B build-h200 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DPAGEDATTN_BUILD_TESTS=ON -DPAGEDATTN_BUILD_EXAMPLES=OFF -DPAGEDATTN_BUILD_BENCH=OFF >/dev/null
cmake --build build-h200 --target test_decode_plan test_decode_fp16 -j "$(nproc)"
cp build-h200/test/test_decode_plan build-h200/test/test_decode_fp16 bench/ab_run.sh "$out/"
echo "tests at $(git rev-parse --short HEAD)" >>"$out/LABELS"
cat "$out/LABELS"
du -sh "$out" # (the device tool carries at most 64 MiB with the working tree: about 10 MB per label)
