#pragma once
// The resolved arguments of one decode launch, as the kernel sees them.
#include <cstddef>
#include <cstdint>

#include <pagedattn/config.cuh>
#include <pagedattn/agent/decode_schedule.cuh>
#include <pagedattn/agent/partition_combine_state.cuh>
#include <pagedattn/util_fp8.cuh>
#include <pagedattn/warp/warp_tile_cuda_core.cuh>

namespace pagedattn {

/// Everything a decode launch needs, resolved by the dispatch (device pointers, strides in elements).
/// T: query and output; KvT: the caches' elements (T, or an fp8 format with the scales below).
/// The caches are its PagedCacheView (warp/warp_tile_cuda_core.cuh): key_cache, value_cache (vLLM's layout:
/// [num_blocks][num_kv_heads][head_size / x][block_size][x] and [num_blocks][num_kv_heads][head_size][block_size];
/// token rows, CacheLayout hnd and nhd: element d of token t of cache block b and KV head h of either cache at
/// b * cache_block_stride + h * cache_head_stride + t * cache_token_stride + d), their strides and block_size.
/// The CUDA-core warp tile reads the view where it lies, in the kernel's parameters: a copy of it took
/// registers through the tile loop (bench/NOTES.md, "Code structure").
template <class T, class KvT = T>
struct PagedAttentionParams : PagedCacheView<KvT> {
  const T* query;                                   ///< query token i of sequence s at row span.first + i (QueryRow)
  std::int64_t query_seq_stride, query_head_stride; ///< (the seq stride is the stride of those rows)
  const float* k_scale;   ///< fp8 caches: K's and V's scales of KV head h at [h * scale_head_stride]; else null
  const float* v_scale;
  std::int64_t scale_head_stride;
  std::int64_t num_blocks;
  const int* block_tables; ///< [num_seqs][max_blocks_per_seq]
  int max_blocks_per_seq;
  const int* seq_lens;
  int max_seq_len;
  int num_kv_heads;
  float scale;
  const float* alibi_slopes; ///< [num_heads] or null
  float logit_softcap;       ///< > 0: logits soft-capped (soft_capped_logit); 0: off
  const float* sinks;        ///< [num_heads] or null: attention sinks (fold_sink)
  int window_left;           ///< >= 0: a sliding window (window_first_visible); -1: off
  int q_len;                 ///< new tokens per sequence (1: plain decode; up to max_q_len: speculative drafts; with
                             ///< query offsets, plan.query_start_loc, the most of any sequence)
  T* output;                 ///< rows as the query's
  std::int64_t output_seq_stride, output_head_stride;
  unsigned* error_count; ///< optional

  // Derived by the dispatch.
  int rows_per_part, head_parts; ///< a KV head's q_len x gqa_ratio query rows, split into parts of <= MaxRows rows
  PartitionDivisor by_segments_per_seq, by_head_parts; ///< a segment's sequence and KV head by multiplies (DecodeTileScheduler::PlaceOf)
  int gqa_ratio;
  /// What every block plans its work from (AgentDecodePlan): the lengths, the schedule model, the storage.
  DecodePlanParams plan;
  /// Launched cooperatively: every block is resident, so a launch whose items all have a block may combine
  /// by the slice fold after the runtime's grid barrier (AgentSliceCombine, GridBarrier). Else look-back.
  bool cooperative;
  /// The init pass has zeroed the look-back words (ticket, arrival counters, statuses: reset_words words
  /// from state.ticket). A persistent cooperative launch has none: it zeroes them where it needs them.
  bool words_zeroed;
  std::size_t reset_words;
  PartitionCombineState state;
#if PAGEDATTN_HAS_TENSOR_MAPS
  /// The caches as 3-D tensor maps of cache-block runs, for the tensor copies of KvSlabBulk (made by
  /// the dispatch for a policy with KvCopy::bulk_tensor on sm_90 code: device/dispatch/decode_tensor_maps.cuh;
  /// else zero). The kernel reads them through its __grid_constant__ parameter.
  CUtensorMap key_map, value_map;
#endif
};

} // namespace pagedattn

namespace pagedattn {

/// K's dequantization scale of a KV head: 1 unless the cache is fp8 (read at run time: the scales are
/// device data, so a graph's replays see their current values).
template <class T, class KvT>
PAGEDATTN_DEVICE float cache_key_scale(const PagedAttentionParams<T, KvT>& p, int kv_head)
{
  if constexpr (is_fp8<KvT>) { return p.k_scale[kv_head * p.scale_head_stride]; }
  else { return 1.f; }
}

/// V's, likewise.
template <class T, class KvT>
PAGEDATTN_DEVICE float cache_value_scale(const PagedAttentionParams<T, KvT>& p, int kv_head)
{
  if constexpr (is_fp8<KvT>) { return p.v_scale[kv_head * p.scale_head_stride]; }
  else { return 1.f; }
}

/// A query row: new token `token` (0 .. n - 1 of the sequence's n = span.count) of a sequence and a query
/// head. A KV head's rows are token-major, row r = token * gqa_ratio + (head - kv_head * gqa_ratio): with
/// q_len 1 the rows are the group's heads.
///
/// New token i of a sequence of seq_len tokens (the new tokens' keys and values are already in the cache)
/// sees positions [first_visible, end): end = seq_len - n + 1 + i (causal among the new tokens; <= 0
/// when the sequence is shorter than its new tokens: no position, a zero output), first_visible its
/// sliding window's first position. `index` is the row's index in the query and output, span.first + i.
struct QueryRow {
  int token, head;
  int index;              ///< span.first + token (s * q_len + token without query offsets)
  int end, first_visible; ///< the visible positions [first_visible, end), 0 <= first_visible <= end
};

template <class T, class KvT>
PAGEDATTN_HOST_DEVICE QueryRow query_row(const PagedAttentionParams<T, KvT>& p, const QuerySpan& span, int seq_len, int kv_head, int row)
{
  const int token = p.q_len == 1 ? 0 : row / p.gqa_ratio;
  const int last = seq_len - span.count + 1 + token;
  const int end = last > 0 ? last : 0;
  return {token, kv_head * p.gqa_ratio + row - token * p.gqa_ratio, span.first + token, end, window_first_visible(end, p.window_left)};
}

/// The tokens one thread block folds: partition [first_token, end_token) of sequence `seq` (its query rows
/// `span`), for the query rows first_row .. first_row + rows - 1 of KV head kv_head (QueryRow). Tokens before
/// first_visible (the rows' earliest window position; at most one cache block's) are read and masked, and
/// each row masks the positions it does not see.
struct PartitionWork {
  int seq;
  QuerySpan span;
  int kv_head, first_row, rows;
  int seq_len;
  int first_token, end_token; ///< first_token < end_token <= seq_len
  int first_visible;          ///< < end_token, and < first_token + block_size
};

} // namespace pagedattn
