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
  # PAGEDATTN_BIV100_SOME_HEADS: three head sizes that take every code path (biv100_instantiations.cu says
  # which); the clang 16 check below instantiates every head size.
  nvcc_flags=(-std=c++17 -D__ILUVATAR__ "-I$src/include" "-arch=compute_$arch" --ptx -Xcicc -O0)
  # Negative control: an unguarded __nanosleep must be found.
  "$compiler" "${nvcc_flags[@]}" -DPLANT_INSTRUCTION "$here/planted_violations.cu" -o "$work/planted.ptx" || {
    echo "check_biv100: the planted violation did not compile" >&2; exit 1; }
  if ! forbidden_in "$work/planted.ptx" >/dev/null; then
    echo "check_biv100: FAILED: the PTX check did not find the planted nanosleep: it would pass anything" >&2; exit 1
  fi
  echo "negative control: the planted __nanosleep is found: $(forbidden_in "$work/planted.ptx" | head -n 1 | tr -s '[:space:]' ' ')"
  "$compiler" "${nvcc_flags[@]}" -DPAGEDATTN_BIV100_SOME_HEADS "$here/biv100_instantiations.cu" -o "$work/biv100.ptx" || {
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
  # clang wants one CUDA root with bin/, include/ (cuda.h, cuda_runtime.h) and nvvm/libdevice/. Toolkits
  # are not always laid out so (headers only under targets/<arch>/include, nvcc reached through a wrapper
  # or a packaged /usr/bin/nvcc), so ask nvcc where its headers are and build that root here.
  # libdevice.10.bc must exist: clang 16 cannot read CUDA 13's version from cuda.h and, without that file,
  # takes the toolkit for CUDA 7.0, whose kernel-launch API the headers no longer declare. A syntax check
  # never reads it, so an empty file stands in where nvcc names none. (-nocudalib is no way out: it also
  # drops the SDK version, with the same result.)
  dryrun=$("$nvcc_path" --dryrun -c -x cu /dev/null -o "$work/null.o" 2>&1)
  include_dir=""
  for candidate in $(printf '%s\n' "$dryrun" | sed -n 's/^#\$ INCLUDES=//p' | tr -d '"' | tr ' ' '\n' | sed -n 's/^-I//p') \
                   "$(printf '%s\n' "$dryrun" | sed -n 's/^#\$ TOP=//p')/include" \
                   "$(dirname "$(readlink -f "$nvcc_path")")/../include" /usr/local/cuda/include; do
    if [ -f "$candidate/cuda.h" ] && [ -f "$candidate/cuda_runtime.h" ]; then include_dir=$(cd "$candidate" && pwd); break; fi
  done
  if [ -z "$include_dir" ]; then
    echo "check_biv100: FAILED: no CUDA headers (cuda.h, cuda_runtime.h) found from $nvcc_path; its --dryrun said:" >&2
    printf '%s\n' "$dryrun" | grep -E '^#\$ (TOP|INCLUDES)=' >&2
    exit 1
  fi
  cuda_path="$work/cuda"
  mkdir -p "$cuda_path/bin" "$cuda_path/nvvm/libdevice" && ln -s "$include_dir" "$cuda_path/include"
  libdevice="$(printf '%s\n' "$dryrun" | sed -n 's/^#\$ NVVMIR_LIBRARY_DIR=//p')/libdevice.10.bc"
  if [ -f "$libdevice" ]; then ln -s "$libdevice" "$cuda_path/nvvm/libdevice/libdevice.10.bc"
  else : >"$cuda_path/nvvm/libdevice/libdevice.10.bc"; fi
  echo "CUDA headers: $include_dir"
  # CUDA 12 removed texture_fetch_functions.h, which clang 16's CUDA wrapper still includes.
  mkdir -p "$work/shim" && : >"$work/shim/texture_fetch_functions.h"
  clang_flags=(-x cuda -fsyntax-only --cuda-gpu-arch=sm_70 "--cuda-path=$cuda_path" -std=c++17
               -D__ILUVATAR__ "-I$src/include" -isystem "$work/shim" -Wno-unknown-cuda-version)
  # Negative control: the non-dependent assertion must be rejected.
  # It must fail on that assertion, not on anything else (a missing toolkit fails every file).
  "$compiler" "${clang_flags[@]}" -DPLANT_ASSERTION "$here/planted_violations.cu" >"$work/planted.log" 2>&1
  if ! grep -q 'static assertion failed.*one lane per token' "$work/planted.log"; then
    echo "check_biv100: FAILED: clang 16 did not reject the planted non-dependent assertion; it said:" >&2
    head -n 20 "$work/planted.log" >&2
    exit 1
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
