#pragma once
// The parameters of the decode kernel, from the arguments, the host's plan and the temporary storage. Host
// code without launches, so that the emulated host run of the decode (test/emulated/) builds them as the
// dispatch does.
#include <pagedattn/agent/agent_paged_attention_params.cuh>
#include <pagedattn/device/dispatch/decode_arguments.cuh>
#include <pagedattn/device/dispatch/decode_plan.cuh>

#include <cstdint>

namespace pagedattn {
namespace detail {

/// The kernel's parameters: the arguments resolved (default strides), the plan, the temporary storage.
template <class T, class KvT, class... Variants>
PagedAttentionParams<T, KvT> make_params(const DecodeArguments<T, KvT, Variants...>& a, const DecodePlan& plan, void* d_temp_storage)
{
  PagedAttentionParams<T, KvT> p{};
  p.query = a.query;
  p.query_seq_stride = a.query_seq_stride ? a.query_seq_stride : std::int64_t(a.num_heads) * a.head_size;
  p.query_head_stride = a.query_head_stride ? a.query_head_stride : a.head_size;
  p.key_cache = a.key_cache;
  p.value_cache = a.value_cache;
  const CacheStrides strides = cache_strides(a);
  p.cache_block_stride = strides.block;
  p.cache_head_stride = strides.head;
  p.cache_token_stride = strides.token;
  p.k_scale = a.k_scale;
  p.v_scale = a.v_scale;
  p.scale_head_stride = a.scale_head_stride;
  p.num_blocks = a.num_blocks;
  p.block_tables = a.block_tables;
  p.max_blocks_per_seq = a.max_blocks_per_seq;
  p.seq_lens = a.seq_lens;
  p.max_seq_len = a.max_seq_len;
  p.num_kv_heads = a.num_kv_heads;
  p.block_size = a.block_size;
  p.scale = a.scale;
  p.alibi_slopes = a.alibi_slopes;
  p.logit_softcap = a.logit_softcap;
  p.sinks = a.sinks;
  p.window_left = a.window_left;
  p.q_len = a.q_len;
  p.output = a.output;
  p.output_seq_stride = a.output_seq_stride ? a.output_seq_stride : std::int64_t(a.num_heads) * a.head_size;
  p.output_head_stride = a.output_head_stride ? a.output_head_stride : a.head_size;
  p.error_count = a.error_count;
  p.rows_per_part = plan.head_split.rows_per_part;
  p.head_parts = plan.head_split.head_parts;
  p.gqa_ratio = a.num_heads / a.num_kv_heads;
  p.plan = DecodePlanParams{a.seq_lens,
                             a.query_start_loc,
                             a.q_len,
                             a.num_query_rows,
                             a.num_seqs,
                             plan.segments_per_seq,
                             a.max_seq_len,
                             static_cast<long long>(a.max_blocks_per_seq) * a.block_size,
                             plan.model,
                             plan_item_budget(plan.model, plan.num_segments, plan.capacity.items),
                             a.partition_tokens,
                             plan.host_tokens,
                             rows_window_left(a.window_left, a.q_len),
                             a.block_size,
                             {}};
  p.plan.uniform = uniform_layout_of(p.plan, partition_group_size);
  p.by_segments_per_seq = PartitionDivisor::of(plan.segments_per_seq);
  p.by_head_parts = PartitionDivisor::of(plan.head_split.head_parts);
  p.cooperative = plan.cooperative;
  p.words_zeroed = plan.init_pass;
  p.reset_words = plan.layout.reset_bytes / sizeof(unsigned);
  p.state = PartitionCombineState::bind(d_temp_storage, plan.layout);
  return p;
}

} // namespace detail
} // namespace pagedattn
