#pragma once
// The parameters of a launch's two kernels, from the arguments, the host's plan and the temporary storage:
// the planning pass's (make_plan_params) and the decode's (make_params). Host code without launches, so
// that the emulated host run of the decode (test/emulated/) builds them as the dispatch does.
#include <pagedattn/agent/agent_decode_plan.cuh>
#include <pagedattn/agent/agent_paged_attention_params.cuh>
#include <pagedattn/device/dispatch/decode_arguments.cuh>
#include <pagedattn/device/dispatch/decode_plan.cuh>

#include <cstdint>

namespace pagedattn {
namespace detail {

/// The planning pass's parameters: the arguments, the host's plan, the temporary storage.
template <class T>
DecodePlanParams make_plan_params(const DecodeArguments<T>& a, const DecodePlan& plan, void* d_temp_storage)
{
  char* base = static_cast<char*>(d_temp_storage);
  return {a.seq_lens,
          a.num_seqs,
          plan.segments_per_seq,
          a.max_seq_len,
          static_cast<long long>(a.max_blocks_per_seq) * a.block_size,
          plan.model,
          plan.capacity.items,
          a.partition_tokens,
          reinterpret_cast<int*>(base + plan.lens_offset),
          reinterpret_cast<PlannedLaunch*>(base + plan.launch_offset),
          reinterpret_cast<PlannedItem*>(base + plan.items_offset),
          reinterpret_cast<unsigned*>(base),
          plan.layout.reset_bytes / sizeof(unsigned)};
}

/// The kernel's parameters: the arguments resolved (default strides), the plan, the temporary storage.
template <class T>
PagedAttentionParams<T> make_params(const DecodeArguments<T>& a, const DecodePlan& plan, void* d_temp_storage)
{
  PagedAttentionParams<T> p{};
  p.query = a.query;
  p.query_seq_stride = a.query_seq_stride ? a.query_seq_stride : std::int64_t(a.num_heads) * a.head_size;
  p.query_head_stride = a.query_head_stride ? a.query_head_stride : a.head_size;
  p.key_cache = a.key_cache;
  p.value_cache = a.value_cache;
  p.num_blocks = a.num_blocks;
  p.block_tables = a.block_tables;
  p.max_blocks_per_seq = a.max_blocks_per_seq;
  p.seq_lens = a.seq_lens;
  p.max_seq_len = a.max_seq_len;
  p.num_kv_heads = a.num_kv_heads;
  p.block_size = a.block_size;
  p.scale = a.scale;
  p.alibi_slopes = a.alibi_slopes;
  p.output = a.output;
  p.output_seq_stride = a.output_seq_stride ? a.output_seq_stride : std::int64_t(a.num_heads) * a.head_size;
  p.output_head_stride = a.output_head_stride ? a.output_head_stride : a.head_size;
  p.error_count = a.error_count;
  p.heads_per_part = plan.head_split.heads_per_part;
  p.head_parts = plan.head_split.head_parts;
  p.gqa_ratio = a.num_heads / a.num_kv_heads;
  char* base = static_cast<char*>(d_temp_storage);
  p.launch = reinterpret_cast<const PlannedLaunch*>(base + plan.launch_offset);
  p.items = reinterpret_cast<const PlannedItem*>(base + plan.items_offset);
  p.cooperative = plan.cooperative;
  p.state = PartitionCombineState::bind(d_temp_storage, plan.layout);
  return p;
}

} // namespace detail
} // namespace pagedattn
