#pragma once
// The compile-time choices of one decode instantiation, each by name: AgentPagedAttention, DecodeKernel,
// paged_attention_kernel and paged_attention_smem_bytes take this one type instead of positional lists
// (the dispatch builds it in one place: with_decode_kernel).
#include <pagedattn/agent/decode_variant.cuh>
#include <pagedattn/agent/kv_cache_layout.cuh>

namespace pagedattn {

/// QueryT: the query and output elements; HeadDim: the head size; MaxRows: the query rows one block folds at
/// most (a detail::KernelRowCounts value); Policy: an AgentPagedAttentionPolicy; CacheT: the caches' elements
/// (QueryT or an fp8 format); KvLayoutT: how the caches lie (agent/kv_cache_layout.cuh); VariantT: a
/// DecodeVariant, the score variant and the output epilogue (agent/decode_variant.cuh).
template <class QueryT, int HeadDim, int MaxRows, class Policy, class CacheT = QueryT, class KvLayoutT = VllmKvLayout,
          class VariantT = DecodeVariant<>>
struct DecodeTraits {
  using T = QueryT;
  static constexpr int head_dim = HeadDim;
  static constexpr int max_rows = MaxRows;
  using AgentPolicy = Policy;
  using KvT = CacheT;
  using KvLayout = KvLayoutT;
  using Variant = VariantT;
};

} // namespace pagedattn
