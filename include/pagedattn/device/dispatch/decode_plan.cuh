#pragma once
// The host-only plan of a decode launch, a pure function of the arguments, the policy and a few facts of
// the device and the kernel: the argument checks, how a KV head's query heads are split over thread
// blocks, the schedule model every block of the decode evaluates on the device, the temporary storage and the
// grid. Nothing here calls the CUDA runtime (test/device/test_policy_host.cu runs it on the host).
#include <pagedattn/agent/decode_schedule.cuh>
#include <pagedattn/agent/agent_paged_attention_policy.cuh>
#include <pagedattn/agent/agent_slice_combine.cuh>
#include <pagedattn/agent/partition_combine_state.cuh>
#include <pagedattn/device/dispatch/decode_arguments.cuh>
#include <pagedattn/util_error.cuh>
#include <pagedattn/util_type.cuh>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

namespace pagedattn {
namespace detail {

// ---- the arguments ---------------------------------------------------------------------------------------

inline bool is_supported_block_size(int b)
{
  for (const int supported : supported_block_sizes)
  {
    if (b == supported) { return true; }
  }
  return false;
}

template <int... HeadDims>
std::string list_head_dims(std::integer_sequence<int, HeadDims...>)
{
  std::string s;
  ((s += (s.empty() ? "" : ", ") + std::to_string(HeadDims)), ...);
  return s;
}

template <int... HeadDims>
bool contains_head_dim(std::integer_sequence<int, HeadDims...>, int h) { return ((h == HeadDims) || ...); }

/// How a KV head's query rows (its GQA group's heads x the new tokens, QueryRow) are split over thread blocks.
struct HeadSplit {
  int head_parts;    ///< blocks per (sequence, KV head, partition)
  int rows_per_part; ///< query rows per block (the last part may have fewer)
  int kernel_rows;   ///< the kernel instantiation's rows: the smallest of the path's KernelRowCounts that holds a part
};
static_assert(largest_row_count(CudaCoreRowCounts{}) == max_cuda_core_rows, "the public bound is the CUDA-core kernels' largest");
/// rows: q_len x gqa_ratio, split into the fewest parts of at most the largest of the counts, as equal as can be.
template <int... Counts>
HeadSplit head_split(int rows, std::integer_sequence<int, Counts...> counts)
{
  const int max_rows = largest_row_count(counts);
  const int parts = (rows + max_rows - 1) / max_rows;
  const int per_part = (rows + parts - 1) / parts;
  return {parts, per_part, smallest_row_count_holding(counts, per_part)};
}

template <CacheLayout... Layouts>
bool contains_cache_layout(CacheLayoutList<Layouts...>, CacheLayout l) { return ((l == Layouts) || ...); }

inline const char* cache_layout_name(CacheLayout l)
{
  return l == CacheLayout::vllm ? "vllm" : l == CacheLayout::hnd ? "hnd" : l == CacheLayout::nhd ? "nhd" : "unknown";
}

template <QueryRows... Forms>
constexpr bool contains_query_rows(QueryRowsList<Forms...>, QueryRows form) { return ((form == Forms) || ...); }

/// The caches' strides in elements (PagedAttentionParams): the caller's, or the packed defaults of the layout.
struct CacheStrides {
  std::int64_t block, head, token;
};
template <class T, class KvT, class... Variants>
CacheStrides cache_strides(const DecodeArguments<T, KvT, Variants...>& a)
{
  const std::int64_t head = a.head_size, run = std::int64_t(a.block_size) * a.head_size;
  switch (a.cache_layout)
  {
  case CacheLayout::hnd:
    return {a.cache_block_stride ? a.cache_block_stride : a.num_kv_heads * run, a.cache_head_stride ? a.cache_head_stride : run,
            a.cache_token_stride ? a.cache_token_stride : head};
  case CacheLayout::nhd:
    return {a.cache_block_stride ? a.cache_block_stride : a.num_kv_heads * run, a.cache_head_stride ? a.cache_head_stride : head,
            a.cache_token_stride ? a.cache_token_stride : a.num_kv_heads * head};
  default: return {a.num_kv_heads * run, run, 0};
  }
}

/// The layout against the kernels instantiated (Layouts) and its strides: token rows need 16-byte aligned
/// rows (every stride a multiple of 16 bytes; the caches' 16-byte alignment is checked with the pointers).
template <class Layouts, class T, class KvT, class... Variants>
cudaError_t validate_cache_layout(const DecodeArguments<T, KvT, Variants...>& a)
{
  auto bad = [](const std::string& what) { return fail(cudaErrorInvalidValue, "pagedattn::Decode: " + what); };
  const CacheLayout l = a.cache_layout;
  if (l != CacheLayout::vllm && l != CacheLayout::hnd && l != CacheLayout::nhd)
  {
    return bad("cache_layout " + std::to_string(static_cast<int>(l)) + " is not a CacheLayout");
  }
  if (!contains_cache_layout(Layouts{}, l))
  {
    return bad(std::string("cache_layout ") + cache_layout_name(l) + " is not instantiated (the CacheLayouts parameter of Decode)");
  }
  const char* names[3] = {"cache_block_stride", "cache_head_stride", "cache_token_stride"};
  const std::int64_t given[3] = {a.cache_block_stride, a.cache_head_stride, a.cache_token_stride};
  const CacheStrides s = cache_strides(a);
  const std::int64_t resolved[3] = {s.block, s.head, s.token};
  constexpr std::int64_t per_16_bytes = 16 / static_cast<std::int64_t>(sizeof(KvT));
  for (int i = 0; i < 3; ++i)
  {
    if (l == CacheLayout::vllm && given[i] != 0)
    {
      return bad(std::string(names[i]) + " must be 0 with cache_layout vllm (its caches are packed), got " + std::to_string(given[i]));
    }
    if (given[i] < 0) { return bad(std::string(names[i]) + " must be >= 0 (0: packed), got " + std::to_string(given[i])); }
    if (l != CacheLayout::vllm && resolved[i] % per_16_bytes != 0)
    {
      return bad(std::string(names[i]) + " (" + std::to_string(resolved[i]) + " elements) must be a multiple of 16 bytes (" +
                 std::to_string(per_16_bytes) + " elements of " + ElementTraits<KvT>::name + ")");
    }
  }
  if (l != CacheLayout::vllm && s.token < a.head_size)
  {
    return bad("cache_token_stride (" + std::to_string(s.token) + ") is shorter than a token's head_size elements (" +
               std::to_string(a.head_size) + ")");
  }
  return cudaSuccess;
}

/// The launch's query rows (query_start_loc set or not) against the kernels instantiated (QueryRowForms).
template <class QueryRowForms, class T, class KvT, class... Variants>
cudaError_t validate_query_rows(const DecodeArguments<T, KvT, Variants...>& a)
{
  const QueryRows form = a.query_start_loc ? QueryRows::per_sequence : QueryRows::uniform;
  if (contains_query_rows(QueryRowForms{}, form)) { return cudaSuccess; }
  return fail(cudaErrorInvalidValue, a.query_start_loc ? "pagedattn::Decode: query_start_loc is set but per-sequence query rows are not "
                                                         "instantiated (the QueryRowForms parameter of Decode)"
                                                       : "pagedattn::Decode: query_start_loc is null but uniform query rows are not "
                                                         "instantiated (the QueryRowForms parameter of Decode)");
}

/// Host-side checks; every failure names the argument.
template <class T, class HeadDims, class KvT, class... Variants>
cudaError_t validate_arguments(const DecodeArguments<T, KvT, Variants...>& a)
{
  auto bad = [](const std::string& what) { return fail(cudaErrorInvalidValue, "pagedattn::Decode: " + what); };
  if (a.num_seqs < 0) { return bad("num_seqs must be >= 0, got " + std::to_string(a.num_seqs)); }
  if (a.max_seq_len < 0) { return bad("max_seq_len must be >= 0, got " + std::to_string(a.max_seq_len)); }
  if (!contains_head_dim(HeadDims{}, a.head_size))
  {
    return bad("head_size " + std::to_string(a.head_size) + " is not supported (supported: " + list_head_dims(HeadDims{}) + ")");
  }
  if (!head_is_whole_vectors<KvT>(a.head_size))
  {
    return bad("head_size " + std::to_string(a.head_size) + " is not supported with a " + std::to_string(sizeof(KvT)) +
               "-byte cache element: a key must be whole 16-byte vectors");
  }
  if (!is_supported_block_size(a.block_size)) { return bad("block_size " + std::to_string(a.block_size) + " is not supported (8, 16, 32)"); }
  if (a.num_kv_heads < 1) { return bad("num_kv_heads must be >= 1, got " + std::to_string(a.num_kv_heads)); }
  if (a.num_heads < 1 || a.num_heads % a.num_kv_heads != 0)
  {
    return bad("num_heads (" + std::to_string(a.num_heads) + ") must be a positive multiple of num_kv_heads (" +
               std::to_string(a.num_kv_heads) + ")");
  }
  if (a.max_blocks_per_seq < 1) { return bad("max_blocks_per_seq must be >= 1"); }
  if (a.num_blocks < 1) { return bad("num_blocks must be >= 1"); }
  if (static_cast<std::int64_t>(a.max_seq_len) > static_cast<std::int64_t>(a.max_blocks_per_seq) * a.block_size)
  {
    return bad("max_seq_len (" + std::to_string(a.max_seq_len) + ") exceeds max_blocks_per_seq * block_size");
  }
  if (!(a.scale == a.scale) || a.scale == INFINITY || a.scale == -INFINITY) { return bad("scale must be finite"); }
  if (!(a.logit_softcap >= 0.f) || a.logit_softcap == INFINITY)
  {
    return bad("logit_softcap must be finite and >= 0 (0: off), got " + std::to_string(a.logit_softcap));
  }
  if (a.q_len < 1 || a.q_len > max_q_len)
  {
    return bad("q_len must be in [1, " + std::to_string(max_q_len) + "], got " + std::to_string(a.q_len));
  }
  if (a.query_start_loc && a.num_query_rows < 0)
  {
    return bad("num_query_rows must be >= 0 with query_start_loc, got " + std::to_string(a.num_query_rows));
  }
  if (!a.query_start_loc && a.num_query_rows != 0)
  {
    return bad("num_query_rows (" + std::to_string(a.num_query_rows) + ") applies with query_start_loc only (null here): 0 without it");
  }
  if (a.window_left < -1) { return bad("window_left must be >= -1 (-1: no window), got " + std::to_string(a.window_left)); }
  if (a.partition_tokens < 0) { return bad("partition_tokens must be >= 0 (0: automatic), got " + std::to_string(a.partition_tokens)); }
  if constexpr (is_fp8<KvT>)
  {
    if (a.scale_head_stride < 0) { return bad("scale_head_stride must be >= 0, got " + std::to_string(a.scale_head_stride)); }
  }
  else
  {
    if (a.k_scale || a.v_scale) { return bad(std::string("k_scale and v_scale apply to fp8 caches only; this cache is ") + ElementTraits<KvT>::name); }
  }
  if (a.num_seqs == 0) { return cudaSuccess; }
  if (!a.output) { return bad("output is null"); }
  if (!a.query) { return bad("query is null"); }
  if (!a.key_cache) { return bad("key_cache is null"); }
  if (!a.value_cache) { return bad("value_cache is null"); }
  if (!a.block_tables) { return bad("block_tables is null"); }
  if (!a.seq_lens) { return bad("seq_lens is null"); }
  if constexpr (is_fp8<KvT>)
  {
    if (!a.k_scale) { return bad("k_scale is null (an fp8 cache needs its scales)"); }
    if (!a.v_scale) { return bad("v_scale is null (an fp8 cache needs its scales)"); }
  }
  if (reinterpret_cast<std::uintptr_t>(a.key_cache) % 16) { return bad("key_cache must be 16-byte aligned"); }
  if (reinterpret_cast<std::uintptr_t>(a.value_cache) % 16) { return bad("value_cache must be 16-byte aligned"); }
  if (a.query_head_stride < 0 || a.query_seq_stride < 0) { return bad("query strides must be >= 0"); }
  if (a.output_head_stride < 0 || a.output_seq_stride < 0) { return bad("output strides must be >= 0"); }
  return cudaSuccess;
}


/// Longest partition of a policy at a cache block size: max_partition_tokens, and no more than the
/// Policy::max_partition_blocks cache blocks whose table entries a thread block stages (sm_80, sm_90: 4096 tokens,
/// 2048 at block size 8). A multiple of 32 for every supported block size.
template <class Policy>
constexpr int partition_token_limit(int block_size)
{
  const long long by_blocks = static_cast<long long>(Policy::max_partition_blocks) * block_size;
  return by_blocks < Policy::max_partition_tokens ? static_cast<int>(by_blocks) / 32 * 32 : Policy::max_partition_tokens;
}

/// The caller's partition size against the policy (validate_arguments() has checked that it is >= 0 and the block size).
template <class Policy, class T, class KvT, class... Variants>
cudaError_t validate_partition_tokens(const DecodeArguments<T, KvT, Variants...>& a)
{
  const int limit = partition_token_limit<Policy>(a.block_size);
  if (a.partition_tokens == 0 || (a.partition_tokens % 32 == 0 && a.partition_tokens <= limit)) { return cudaSuccess; }
  return fail(cudaErrorInvalidValue, "pagedattn::Decode: partition_tokens " + std::to_string(a.partition_tokens) +
                                         " must be 0 (automatic) or a multiple of 32 in [32, " + std::to_string(limit) +
                                         "] (policy " + Policy::name + ", block_size " + std::to_string(a.block_size) + ")");
}

/// The schedule model of a launch of this policy on sm_count SMs (agent/decode_schedule.cuh).
template <class Policy, class T, class KvT, class... Variants>
ScheduleModel schedule_model(const DecodeArguments<T, KvT, Variants...>& a, int sm_count)
{
  return {(sm_count > 0 ? sm_count : 1) * Policy::min_blocks_per_sm, fixed_cost_tokens(a.head_size, static_cast<int>(sizeof(KvT))),
          partition_token_limit<Policy>(a.block_size)};
}

/// The work items of num_segments segments that are all `length` tokens long, with partitions of t tokens
/// (a functor callable on host and device, as choose_partition_tokens requires).
struct UniformBatchItems {
  std::uint64_t segments;
  int length;
  PAGEDATTN_HOST_DEVICE ItemCounts operator()(int t) const { return item_counts_of(length, t, segments); }
};

/// Partition size of a launch: the caller's, or the schedule model's choice for num_segments segments
/// that are all max_seq_len long (the host knows no other length). On 132 SMs at block size 16:
/// - when one wave can hold the longest sequence, the shortest partition that keeps the grid to one wave:
///   1x100000 at 24/4 heads gets 66 partitions of 1536 tokens per KV head (264 blocks), at 32/8 heads 33
///   of 3040 (264 blocks); 1x1000 32 of 32 tokens; 8x32768 8 of 4096 (256 blocks);
/// - otherwise whole waves of partitions as long as possible: a large batch keeps whole sequences of up to
///   4096 tokens per block and no combine (64x4096: 256 or 512 blocks), where 2048-token halves would
///   cost each block a second prologue and the launch a combine
///   (bench/NOTES.md, "Partition size: the wave model").
template <class Policy, class T, class KvT, class... Variants>
int choose_partition_tokens(const DecodeArguments<T, KvT, Variants...>& a, std::size_t num_segments, int sm_count)
{
  if (a.partition_tokens > 0) { return a.partition_tokens; }
  const int span = window_span(a.max_seq_len, rows_window_left(a.window_left, a.q_len), a.block_size); // (max_seq_len without a window)
  const UniformBatchItems items{num_segments > 0 ? num_segments : 1, span};
  return choose_partition_tokens(schedule_model<Policy>(a, sm_count), span, items);
}


// ---- the plan --------------------------------------------------------------------------------------------
//
// A launch is planned twice. Here, on the host, from the bound max_seq_len: the temporary storage and the
// grid, both valid for any lengths up to the bound (so a CUDA graph captured once serves every replay).
// Then on the device, by every block of the decode in its prologue (AgentDecodePlan), from the lengths
// themselves: the partition size and the work items.

/// What the host decides for a launch.
struct DecodePlan {
  HeadSplit head_split;
  std::size_t num_segments;
  int segments_per_seq;      ///< num_kv_heads x head_parts
  ScheduleModel model;       ///< what the device evaluates
  int host_tokens;           ///< the model's choice for a batch of max_seq_len sequences (the device's uniform fast path)
  ScheduleCapacity capacity; ///< the most items and group slots any batch under the bound is planned with
  int max_partitions_bound;  ///< the most partitions any segment of such a batch can get
  PartitionCombineLayout layout; ///< the combine's storage: capacity.items partials, capacity.groups groups
  std::size_t temp_bytes;
  std::size_t grid;          ///< set by choose_grid
  bool persistent;           ///< set by choose_grid: the grid's blocks draw tickets until the items run out
  bool cooperative;          ///< set by choose_grid
  bool init_pass;            ///< set by choose_grid: the decode may combine by look-back (tickets, counters)
};

template <class Policy, class T, class KvT, class... Variants>
DecodePlan make_plan(const DecodeArguments<T, KvT, Variants...>& a, int sm_count)
{
  DecodePlan plan{};
  plan.head_split = head_split(a.q_len * (a.num_heads / a.num_kv_heads), KernelRowCounts<T, Policy, KvT>{});
  plan.segments_per_seq = a.num_kv_heads * plan.head_split.head_parts;
  plan.num_segments = static_cast<std::size_t>(a.num_seqs) * plan.segments_per_seq;
  plan.model = schedule_model<Policy>(a, sm_count);
  plan.host_tokens = choose_partition_tokens<Policy>(a, plan.num_segments, sm_count);
  // Any length under the bound is planned over at most span_bound tokens (max_seq_len without a window).
  const int span_bound = window_span_bound(a.max_seq_len, rows_window_left(a.window_left, a.q_len), a.block_size);
  plan.capacity = schedule_capacity(plan.model, plan.num_segments, span_bound, a.partition_tokens, plan.host_tokens, partition_group_size);
  plan.layout = PartitionCombineLayout::for_slots(plan.capacity.items, plan.capacity.groups, plan.head_split.rows_per_part, a.head_size);
  plan.temp_bytes = plan.layout.total_bytes;
  // A segment's partitions: at most those of the span bound at the smallest size the device may choose, and
  // at most what the storage leaves it when every other segment has one item.
  const int smallest = a.partition_tokens > 0 ? a.partition_tokens : min_auto_partition_tokens;
  const std::size_t by_storage = (plan.capacity.items - plan.num_segments) / static_cast<std::size_t>(plan.segments_per_seq) + 1;
  const std::size_t by_length = static_cast<std::size_t>(partitions_of(span_bound, smallest));
  plan.max_partitions_bound = static_cast<int>(by_length < by_storage ? by_length : by_storage);
  plan.grid = 0;
  plan.persistent = false;
  plan.cooperative = false;
  plan.init_pass = true;
  return plan;
}

/// The plan's limits: item indices and the grid are ints on the device.
inline cudaError_t validate_plan(const DecodePlan& plan)
{
  if (plan.capacity.items > 0x7fffffffu)
  {
    return fail(cudaErrorInvalidValue, "pagedattn::Decode: too many work items for these shapes (num_seqs x heads x ceil(max_seq_len / "
                                       "partition_tokens) = " + std::to_string(plan.capacity.items) + ")");
  }
  return cudaSuccess;
}

/// Whether a plain launch takes the persistent grid as a captured one does: where the bound admits more
/// than plan_budget_waves waves of items. A block per item of such a bound would mostly launch blocks that
/// find no item whenever the lengths are well under it (1x100000+63x512 at max_seq_len 100000: 8704 blocks
/// for 1036 items; the 7668 without one held a block's slot ~6 µs each, 347 µs in all against 177 µs
/// persistent: bench/NOTES.md, "Length-aware scheduling: the device plan"). A 32-row kernel
/// (several new tokens) allows twice that: its persistent form spills (858 bytes of spill stores at head
/// 256, against 104 for the plain one), so its blocks without an item cost less than its tokens' slower
/// fold (bench/NOTES.md, "Per-sequence query rows").
/// Every uniform shape of bench_decode stays under it.
inline bool loose_bound(const DecodePlan& plan)
{
  const int waves = plan.head_split.kernel_rows > 8 ? 2 * plan_budget_waves : plan_budget_waves;
  return plan.capacity.items > static_cast<std::size_t>(waves) * static_cast<std::size_t>(plan.model.wave_blocks);
}

/// The grid. Persistent (a launch captured in a graph, whose replays may fold far fewer items than the
/// bound allows): the blocks the device keeps resident at once (resident_blocks; at least one), never more
/// than the items there can be; cooperative where the kernel and the device can. Else a block per item of
/// the bound, cooperative where the kernel and the device can and the grid fits at once. A cooperative
/// launch whose items all have a block combines by the slice fold, decided on the device. The init pass
/// (the look-back words zeroed) is left out where every batch under the bound is planned in one wave, and
/// from a persistent cooperative launch, whose blocks zero the words themselves where the lengths need them.
inline void choose_grid(DecodePlan& plan, std::size_t resident_blocks, bool cooperative_capable, bool persistent)
{
  const std::size_t resident = resident_blocks > 0 ? resident_blocks : 1;
  const std::size_t items = plan.capacity.items > 0 ? plan.capacity.items : 1;
  plan.persistent = persistent;
  plan.grid = persistent && items > resident ? resident : items;
  plan.cooperative = cooperative_capable && plan.grid <= resident;
  const bool always_one_wave = plan.cooperative && plan.capacity.items <= plan.grid && plan.max_partitions_bound <= one_wave_max_partitions;
  // A persistent cooperative launch (a graph's) zeroes the look-back words itself, only where its lengths
  // need them (DecodeTileScheduler::ZeroCombineWords): a replay then runs one kernel, not two.
  plan.init_pass = !always_one_wave && !(persistent && plan.cooperative);
}

} // namespace detail
} // namespace pagedattn
