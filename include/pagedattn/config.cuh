#pragma once
// Compiler portability macros shared by every pagedattn header.
#include <cuda_runtime.h>

#define PAGEDATTN_HOST_DEVICE __host__ __device__ __forceinline__
#define PAGEDATTN_DEVICE __device__ __forceinline__

/// 1 where the toolkit has bf16 (<cuda_bf16.h>, CUDA 11 and later), 0 where it has not (a CUDA 10.2-level
/// SDK such as BI-V100's CoreX): then __nv_bfloat16 is not offered. Define it to 0 to build without bf16.
#ifndef PAGEDATTN_HAS_BF16
#  if defined(__has_include)
#    if __has_include(<cuda_bf16.h>)
#      define PAGEDATTN_HAS_BF16 1
#    endif
#  endif
#  ifndef PAGEDATTN_HAS_BF16
#    define PAGEDATTN_HAS_BF16 0
#  endif
#endif

/// 1 where the toolkit has tensor maps (CUtensorMap in <cuda.h>, CUDA 12 and later), which the sm_90
/// decode's tensor copies use; 0 on BI-V100's CoreX SDK and in the emulated host build (no such types).
#ifndef PAGEDATTN_HAS_TENSOR_MAPS
#  if !defined(__ILUVATAR__) && defined(CUDART_VERSION) && CUDART_VERSION >= 12000
#    define PAGEDATTN_HAS_TENSOR_MAPS 1
#  else
#    define PAGEDATTN_HAS_TENSOR_MAPS 0
#  endif
#endif
#if PAGEDATTN_HAS_TENSOR_MAPS
#  include <cuda.h>
#endif

/// A kernel parameter whose address the kernel takes (a tensor map's): __grid_constant__ (CUDA 11.7+).
#if !defined(__ILUVATAR__) && defined(CUDART_VERSION) && CUDART_VERSION >= 11070
#  define PAGEDATTN_GRID_CONSTANT __grid_constant__
#else
#  define PAGEDATTN_GRID_CONSTANT
#endif

namespace pagedattn {

/// The steps of a thread block's decode that PAGEDATTN_TRACE_POINT marks, in the order a block meets them.
enum class TracePoint : int {
  block_start,             ///< the kernel's first instruction
  work_item_chosen,             ///< the block knows its (segment, partition)
  block_ids_staged,        ///< tensor-core fold: the partition's block-table entries in shared memory
  first_tile_landed,       ///< tensor-core fold: the first K/V tile in shared memory
  partition_folded,        ///< the block's partial is complete
  aggregate_stored,        ///< the partial is in global memory (look-back: and the group's arrival counted)
  group_folded,            ///< look-back: the group's last arrival folded the group
  block_done,              ///< the kernel's last instruction
  fold_loads_landed,       ///< look-back fold of up to 9 partials: statistics and values loaded
  fold_factors_done,       ///< look-back fold: every step's factors computed
  fold_done,               ///< look-back fold: done
  group_published,         ///< look-back: the group's aggregate published
  looked_back,             ///< look-back: the nearest inclusive group found
  final_fold_done,         ///< look-back: the inclusive value folded
  slice_fold_started,      ///< one wave: the slice fold begins (after the grid barrier)
  slice_first_group_stats, ///< one wave: the first (group, head) statistics folded
  slice_stats_landed,      ///< one wave: the first statistics loaded (PAGEDATTN_TRACE_AFTER)
  slice_values_landed,     ///< one wave: the first values loaded (PAGEDATTN_TRACE_AFTER)
  grid_barrier_passed,     ///< one wave: every block of the grid has stored its aggregate
  slice_group_stats_done,  ///< one wave: phase 1 (group statistics and step factors) done
  slice_group_values_done, ///< one wave: phase 2 (group values and group factors) done
  plan_lengths_read,       ///< device plan: the first pass over the lengths done (longest, uniform or not)
  plan_chosen,             ///< device plan: the partition size chosen
  plan_scanned,            ///< device plan: the first chunk's items scanned
  count
};

/// `value`, as an expression that depends on the template parameter T. A static_assert on a
/// configuration constant (the warp width, say) inside a template is checked when the header is read
/// unless it depends on a template parameter; this defers it to the instantiations that use the
/// template. (BI-V100 builds read the tensor-core headers but never instantiate them.)
template <class T, class V>
__host__ __device__ constexpr V dependent_value(V value) { return value; }

} // namespace pagedattn

/// Timeline instrumentation (off by default): a translation unit that defines PAGEDATTN_TRACE_POINT(point)
/// (and PAGEDATTN_TRACE_AFTER(point, value)) before including pagedattn gets a call at each named step of
/// a thread block's decode (a pagedattn::TracePoint below; bench/trace_decode.cu records %globaltimer per
/// block). PAGEDATTN_TRACE_AFTER marks a point once `value` (a float register) has arrived.
#ifndef PAGEDATTN_TRACE_POINT
#define PAGEDATTN_TRACE_POINT(point) ((void)0)
#endif
#ifndef PAGEDATTN_TRACE_AFTER
#define PAGEDATTN_TRACE_AFTER(point, value) ((void)0)
#endif
