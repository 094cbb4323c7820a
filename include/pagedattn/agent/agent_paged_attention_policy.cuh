#pragma once
// The compile-time tuning of AgentPagedAttention (CUB's AgentXxxPolicy): a plain struct of constants.
// The per-architecture policies (device/dispatch/tuning/tuning_paged_attention.cuh) derive from
// AgentPagedAttentionPolicy and override what they change; a caller's own policy does the same. Every
// member has a default that is valid on every architecture (the CUDA-core fold, the seeds' partitions).
#include <cstddef>
#include <type_traits>
#include <utility>

#include <pagedattn/util_arch.cuh>
#include <pagedattn/util_fp8.cuh>

namespace pagedattn {

/// How the tensor-core pipeline moves K and V into shared memory (AgentPagedAttentionPolicy::kv_copy).
enum class KvCopy {
  cp_async,   ///< every thread issues 16-byte cp.async copies (KvSlab; sm_80+)
  bulk,       ///< one warp issues a cp.async.bulk per cache block's K and V run (KvSlabBulk; sm_90 code)
  bulk_tensor ///< the same with tensor copies (cp.async.bulk.tensor through tensor maps the dispatch makes), V swizzled
};

struct AgentPagedAttentionPolicy {
  static constexpr const char* name = "default";
  /// Threads of a thread block: 4 warps.
  static constexpr int block_threads = 4 * warp_threads;
  /// The longest KV partition a thread block folds (a multiple of 32) ...
  static constexpr int max_partition_tokens = 512;
  /// ... and the most cache blocks it spans (the tensor-core fold stages their block-table entries in
  /// shared memory; 512 / 8: every block size allows max_partition_tokens).
  static constexpr int max_partition_blocks = 64;
  /// Shared memory a block may use (the host tests check every instantiation against it).
  static constexpr std::size_t smem_budget_bytes = 48 * 1024;
  /// The launch bound, and the automatic partition count's wave (blocks per SM).
  static constexpr int min_blocks_per_sm = 1;
  /// The persistent grid's launch bound for head sizes up to 128 (0: min_blocks_per_sm). Its loop around the
  /// fold lets ptxas keep more values live than the plain kernel's straight line; where the plain kernel
  /// holds more blocks per SM than min_blocks_per_sm, this bound keeps the persistent one there too.
  static constexpr int persistent_blocks_per_sm_to_head_128 = 0;
  /// CUDA-core fold: 16-byte key loads in flight per lane.
  static constexpr int key_vectors_in_flight = 4;
  /// Fold fp16/bf16 on tensor cores (mma.sync, 32-lane warps, sm_80+); fp32 always uses CUDA cores.
  static constexpr bool tensor_cores = false;
  /// Tensor-core pipeline: buffers (stages - 1 in flight) of about tile_bytes of K and V each.
  static constexpr int stages = 2;
  static constexpr int tile_bytes = 32 * 1024;
  /// Tensor-core pipeline: how K and V reach shared memory. The bulk kinds only in code compiled for
  /// sm_90+ (bulk_tensor also needs a CUDA 12 toolkit's tensor maps, else bulk); the same policy's code for
  /// an older architecture uses cp.async.
  static constexpr KvCopy kv_copy = KvCopy::cp_async;
  /// Launches that fit one wave may be cooperative and combine by slices (AgentSliceCombine).
  static constexpr bool one_wave_combine = false;
};

namespace detail {
/// Whether a policy's decode runs on tensor cores for query type T and cache type KvT: 16-bit queries, a
/// cache of the same type or (under a policy with the sm_90 copies, whose fold is tuned for it) fp8,
/// 32-lane warps. An fp8 cache under a cp.async policy (sm_80) takes the CUDA-core fold. (The same for
/// every cache layout.)
template <class T, class Policy, class KvT = T>
inline constexpr bool uses_tensor_cores = Policy::tensor_cores && sizeof(T) == 2 && warp_threads == 32 &&
                                          (std::is_same_v<KvT, T> || (is_fp8<KvT> && Policy::kv_copy != KvCopy::cp_async));

/// The query-row counts (QueryRow: heads x new tokens) the decode kernels are instantiated for, their MaxRows,
/// increasing: the CUDA-core fold's partials live in registers, so it has kernels of 1, 4 and 8 rows; the
/// tensor-core tile computes n-tiles of 8 rows (the mma's n), in kernels of 8 and 32 (rows past a block's
/// compute on zero queries: BlockTileTensorCore). The plan picks one (head_split), the dispatch runs it
/// (with_one_of).
using CudaCoreRowCounts = std::integer_sequence<int, 1, 4, 8>;
using TensorCoreRowCounts = std::integer_sequence<int, 8, 32>;
template <class T, class Policy, class KvT = T>
using KernelRowCounts = std::conditional_t<uses_tensor_cores<T, Policy, KvT>, TensorCoreRowCounts, CudaCoreRowCounts>;

/// The largest of the counts.
template <int... Counts>
constexpr int largest_row_count(std::integer_sequence<int, Counts...>)
{
  constexpr int counts[] = {Counts...};
  return counts[sizeof...(Counts) - 1];
}
/// The smallest of the counts that holds `rows` (0 where none does).
template <int... Counts>
constexpr int smallest_row_count_holding(std::integer_sequence<int, Counts...>, int rows)
{
  int chosen = 0;
  const auto consider = [&](int count) {
    if (chosen == 0 && rows <= count) { chosen = count; }
  };
  (consider(Counts), ...);
  return chosen;
}
/// Query rows one thread block folds at most: the tensor-core tile's four n-tiles, the CUDA-core fold's 8.
template <class T, class Policy, class KvT = T>
inline constexpr int max_rows_per_block = largest_row_count(KernelRowCounts<T, Policy, KvT>{});
} // namespace detail

} // namespace pagedattn
