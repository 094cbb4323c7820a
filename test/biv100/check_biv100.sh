#!/usr/bin/env bash
# The BI-V100 compile checks (no GPU needed). Each first proves, on a planted violation, that it can fail.
#
#   check_biv100.sh ptx <nvcc> <source dir>
#     nvcc -D__ILUVATAR__ compiles biv100_instantiations.cu to PTX for the newest architecture the toolkit
#     knows, so that every `__CUDA_ARCH__ >= N` guard is on and only the __ILUVATAR__ guards keep NVIDIA-only
#     code out; fails if the PTX holds an instruction BI-V100 lacks.
#   check_biv100.sh clang16 <clang++-16> <source dir> [nvcc]
#     clang 16 in CUDA mode (the compiler CoreX is built on; clang 17 and later defer non-dependent
#     assertions in templates and would hide that class of bug), -fsyntax-only, with and without bf16.
#     Exits 4 (CTest: skipped) when the compiler is missing, unless PAGEDATTN_REQUIRE_CLANG16=1 (CI).
set -uo pipefail

mode=${1:?usage: check_biv100.sh ptx|clang16 <compiler> <source dir>}
compiler=${2:?compiler}
src=${3:?source dir}
here="$src/test/biv100"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Opcodes BI-V100 does not have (sm_80+ tensor-core, async-copy and TMA instructions, PTX memory-model
# qualifiers, programmatic dependent launch, timers and sleeps), and cache operators its SDK has no
# intrinsic for. Matched against the opcode of each PTX instruction (after an optional predicate guard).
forbidden_opcodes='(w?mma|ldmatrix|stmatrix|movmatrix|cp\.async|cp\.reduce\.async|griddepcontrol|nanosleep|mbarrier|barrier\.cluster|elect|setmaxnreg|tensormap|multimem|redux|applypriority|createpolicy|mapa|getctarank|discard|clusterlaunchcontrol)\b'
forbidden_qualifiers='(ld|st|atom|red|fence)\.[a-z0-9_.:]*\b(acquire|release|acq_rel|relaxed)\b|(ld|st)\.[a-z0-9_.:]*\.(cg|cs|lu|cv|wt)\b|\.L2::'
forbidden_registers='%globaltimer|%cluster|%is_explicit_cluster'

# Lines of PTX file $1 holding a forbidden instruction.
forbidden_in() {
  grep -nE "^[[:space:]]*(@!?%p[0-9]+[[:space:]]+)?($forbidden_opcodes|$forbidden_qualifiers)|$forbidden_registers" "$1"
}

newest_arch() {
  "$compiler" --list-gpu-arch | sed -n 's/^compute_\([0-9]*\)$/\1/p' | sort -n | tail -n 1
}

case "$mode" in
ptx)
  arch=$(newest_arch)
  [ -n "$arch" ] || { echo "check_biv100: $compiler --list-gpu-arch listed no architecture" >&2; exit 1; }
  # -Xcicc -O0: no device optimisation (an eighth of the time); every instruction the code asks for
  # is still emitted, unoptimised code only holds more of them.
  nvcc_flags=(-std=c++17 -D__ILUVATAR__ "-I$src/include" "-arch=compute_$arch" --ptx -Xcicc -O0)
  # Negative control: an unguarded __nanosleep must be found.
  "$compiler" "${nvcc_flags[@]}" -DPLANT_INSTRUCTION "$here/planted_violations.cu" -o "$work/planted.ptx" || {
    echo "check_biv100: the planted violation did not compile" >&2; exit 1; }
  if ! forbidden_in "$work/planted.ptx" >/dev/null; then
    echo "check_biv100: FAILED: the PTX check did not find the planted nanosleep: it would pass anything" >&2; exit 1
  fi
  echo "negative control: the planted __nanosleep is found: $(forbidden_in "$work/planted.ptx" | head -n 1 | tr -s '[:space:]' ' ')"
  "$compiler" "${nvcc_flags[@]}" "$here/biv100_instantiations.cu" -o "$work/biv100.ptx" || {
    echo "check_biv100: FAILED: the BI-V100 path (-D__ILUVATAR__) does not compile with nvcc" >&2; exit 1; }
  entries=$(grep -c '^\.visible \.entry\|^\.entry\|^\.weak \.entry' "$work/biv100.ptx" || true)
  if found=$(forbidden_in "$work/biv100.ptx"); then
    echo "check_biv100: FAILED: the BI-V100 PTX holds instructions BI-V100 lacks:" >&2
    echo "$found" | head -n 20 >&2
    exit 1
  fi
  echo "BI-V100 PTX (compute_$arch, $entries kernels): no instruction BI-V100 lacks"
  ;;
clang16)
  if ! command -v "$compiler" >/dev/null 2>&1; then
    if [ "${PAGEDATTN_REQUIRE_CLANG16:-0}" = 1 ]; then echo "check_biv100: FAILED: $compiler not found" >&2; exit 1; fi
    echo "SKIPPED: $compiler not found (Debian: apt-get install clang-16)"; exit 4
  fi
  nvcc_path=${4:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
  cuda_path=$(cd "$(dirname "$(readlink -f "$nvcc_path")")/.." && pwd)
  # CUDA 12 removed texture_fetch_functions.h, which clang 16's CUDA wrapper still includes.
  mkdir -p "$work/shim" && : >"$work/shim/texture_fetch_functions.h"
  clang_flags=(-x cuda -fsyntax-only --cuda-gpu-arch=sm_70 "--cuda-path=$cuda_path" -std=c++17 -D__ILUVATAR__
               "-I$src/include" -isystem "$work/shim" -Wno-unknown-cuda-version)
  # Negative control: the non-dependent assertion must be rejected.
  if "$compiler" "${clang_flags[@]}" -DPLANT_ASSERTION "$here/planted_violations.cu" >"$work/planted.log" 2>&1; then
    echo "check_biv100: FAILED: clang 16 accepted the planted non-dependent assertion: it would pass anything" >&2; exit 1
  fi
  echo "negative control: clang 16 rejects the planted assertion: $(grep -m1 "error:" "$work/planted.log")"
  "$compiler" "${clang_flags[@]}" "$here/planted_violations.cu" || {
    echo "check_biv100: FAILED: clang 16 rejects the control file without a planted violation" >&2; exit 1; }
  for bf16 in 1 0; do
    "$compiler" "${clang_flags[@]}" -DPAGEDATTN_HAS_BF16=$bf16 "$here/biv100_instantiations.cu" || {
      echo "check_biv100: FAILED: clang 16 rejects the BI-V100 path (PAGEDATTN_HAS_BF16=$bf16)" >&2; exit 1; }
    echo "clang 16 -D__ILUVATAR__ -DPAGEDATTN_HAS_BF16=$bf16: the BI-V100 instantiations compile"
  done
  ;;
*)
  echo "usage: check_biv100.sh ptx|clang16 <compiler> <source dir>" >&2; exit 2 ;;
esac
