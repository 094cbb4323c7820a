#!/usr/bin/env bash
# Build here (compiling is free on this machine) what bench/h200_run.sh runs on the H200, for sm_90 only,
# into build-h200/ (git-ignored), recording the commit and the source path that CTest's files hold.
# The binaries, CTest files and commit stamp (no object files) are staged in .carry/build-h200 (git-ignored);
# then call the device tool with: command "bash bench/h200_run.sh", carry [".carry", ".seed"] (.seed from
# bench/fetch_seed.sh: the seed's Triton kernel for the side-by-side benchmark).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-h200 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DPAGEDATTN_BUILD_TESTS=ON -DPAGEDATTN_BUILD_EXAMPLES=ON -DPAGEDATTN_BUILD_BENCH=ON >/dev/null
cmake --build build-h200 -j "$(nproc)"
git rev-parse HEAD >build-h200/COMMIT
git diff --quiet HEAD -- include test bench examples || echo "$(git rev-parse HEAD)+dirty" >build-h200/COMMIT
echo "$PWD" >build-h200/SOURCE_DIR
rm -rf .carry/build-h200 && mkdir -p .carry
rsync -a --exclude CMakeFiles --exclude '*.o' --exclude '.ninja_*' --exclude install_prefix --exclude install_consumer_build build-h200/ .carry/build-h200/
mkdir -p .carry/build-h200/CMakeFiles && cp -r build-h200/CMakeFiles/Export .carry/build-h200/CMakeFiles/ # install rules
tar -C .carry -czf .carry/build-h200.tgz build-h200 && rm -rf .carry/build-h200
du -sh .carry/build-h200.tgz
