#!/usr/bin/env bash
# Copy the seed's Triton V2 kernel (../shared/seeds/002_*.txt, a Python module after its first line) into
# the git-ignored .seed/ folder, from where bench/seed_triton_bench.py loads it on the device machine.
# The seed is never committed into the project. Carry ".seed" with the device call.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(ls ../shared/seeds/002_*.txt 2>/dev/null | head -1)
[ -n "$src" ] || { echo "seed kernel not found under ../shared/seeds/" >&2; exit 1; }
mkdir -p .seed
tail -n +2 "$src" >.seed/paged_attention_v2_triton.py
echo ".seed/paged_attention_v2_triton.py from $src"
