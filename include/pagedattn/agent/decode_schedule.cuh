#pragma once
// The schedule model of a decode launch: how long a partition of the KV sequence one thread block folds,
// chosen from the lengths to fold. One definition for the host and the device: the host evaluates it with
// every sequence as long as its bound (max_seq_len), the lengths it knows; every block of the decode
// evaluates it with the lengths read at run time (AgentDecodePlan;
// bench/NOTES.md, "Length-aware scheduling: the device plan").
//
// The model (bench/NOTES.md, "Partition size: the wave model"): a launch of n work items on a device
// that keeps W thread blocks resident
// takes ceil(n / W) waves, and a wave lasts as long as one partition of t tokens plus a block's
// fixed cost f (its prologue, first round trip and part of the combine, in tokens of K and V it could have
// streamed meanwhile). The items shorter than t (a sequence's last partition) that the waves of whole
// partitions leave over take waves of their longest instead (wave_cost). Of the multiples of 32 up to the
// longest sequence (and the policy's limit) the partition size with the least cost wins; ties go to the
// longer partition (fewer partials).
//
// A sequence of n_p = ceil(len / t) partitions gives n_p work items per segment (one per KV head and head
// part); an empty or invalid sequence still gives one, the block that writes its output (0 or NaN).
#include <pagedattn/config.cuh>

#include <cstddef>
#include <cstdint>

namespace pagedattn {

namespace detail {
/// min for ints, constexpr on host and device.
PAGEDATTN_HOST_DEVICE constexpr int min_int(int a, int b) { return a < b ? a : b; }
} // namespace detail

/// What the schedule model knows besides the lengths.
struct ScheduleModel {
  int wave_blocks;          ///< thread blocks resident at once: SMs x the policy's min_blocks_per_sm
  int fixed_cost_tokens;    ///< a block's fixed cost in tokens of K and V
  int max_partition_tokens; ///< the policy's limit (partition_token_limit): a multiple of 32
};

/// Smallest partition the model considers: one 32-token tile, so that a short sequence spreads over as
/// many blocks as fill the GPU (1x1000 at 24/4 heads: 128 blocks of one tile, measured 0.5 µs faster than
/// 64 blocks of two: bench/NOTES.md, "Partition size: the wave model").
inline constexpr int min_auto_partition_tokens = 32;

/// A block's fixed cost (sequence length and block ids, the first tile's round trip, its part of the
/// combine; ~4 µs on H200) in bytes of K and V that it could have streamed meanwhile at its share of the
/// bandwidth (4.2 TB/s over 264 blocks: ~16 GB/s, so ~64 KB)
/// (bench/NOTES.md, "Partition size: the wave model").
inline constexpr int block_fixed_cost_bytes = 64 * 1024;

/// The fixed cost in tokens for a head size and element size: K and V of one token of one KV head.
PAGEDATTN_HOST_DEVICE int fixed_cost_tokens(int head_size, int element_bytes)
{
  const int token_bytes = 2 * (head_size > 0 ? head_size : 1) * (element_bytes > 0 ? element_bytes : 1);
  return (block_fixed_cost_bytes + token_bytes - 1) / token_bytes;
}

/// Partitions of a sequence of seq_len tokens (0 for an empty one).
PAGEDATTN_HOST_DEVICE int partitions_of(int seq_len, int partition_tokens)
{
  return seq_len <= 0 ? 0 : (seq_len - 1) / partition_tokens + 1;
}

/// partitions_of and items_of for one partition size, by a multiply and a shift instead of a division
/// (the device's plan counts every candidate size over every length: ~6 instructions instead of ~25).
/// Exact for lengths in [0, 2^31): with s = ceil(log2 t) and m = ceil(2^(31+s) / t), m t - 2^(31+s) < t,
/// so for n < 2^31 the quotient n m / 2^(31+s) exceeds n / t by less than 1 / t, which never reaches the
/// next integer (Granlund and Montgomery); m <= 2^32, so n m < 2^63.
struct PartitionDivisor {
  unsigned long long multiplier;
  int shift;
  PAGEDATTN_HOST_DEVICE static PartitionDivisor of(int t)
  {
    int s = 0;
    while (s < 31 && (1 << s) < t) { ++s; }
    const unsigned long long power = 1ull << (31 + s);
    return {(power + static_cast<unsigned long long>(t) - 1) / static_cast<unsigned long long>(t), 31 + s};
  }
  /// n / t for n in [0, 2^31).
  PAGEDATTN_HOST_DEVICE int quotient(int n) const
  {
    return static_cast<int>(static_cast<unsigned long long>(n) * multiplier >> shift);
  }
  PAGEDATTN_HOST_DEVICE int partitions(int seq_len) const { return seq_len <= 0 ? 0 : quotient(seq_len - 1) + 1; }
  PAGEDATTN_HOST_DEVICE int items(int seq_len) const
  {
    const int n = partitions(seq_len);
    return n > 0 ? n : 1;
  }
};

/// Work items of one segment of a sequence: its partitions, or the one block that writes the output of an
/// empty or invalid sequence.
PAGEDATTN_HOST_DEVICE int items_of(int seq_len, int partition_tokens)
{
  const int n = partitions_of(seq_len, partition_tokens);
  return n > 0 ? n : 1;
}

/// The candidates, longest first: candidate i is longest - 32 i, for i < candidate_count. longest is the
/// longest sequence rounded up to 32 tokens, at most the policy's limit and at least 32.
PAGEDATTN_HOST_DEVICE int longest_candidate(int longest_seq_len, const ScheduleModel& m)
{
  if (longest_seq_len >= m.max_partition_tokens) { return m.max_partition_tokens; } // (no rounding past INT_MAX)
  return longest_seq_len <= 0 ? min_auto_partition_tokens : (longest_seq_len - 1) / 32 * 32 + 32;
}
PAGEDATTN_HOST_DEVICE int candidate_count(int longest)
{
  return (longest - min_auto_partition_tokens) / 32 + 1;
}
PAGEDATTN_HOST_DEVICE int candidate_tokens(int longest, int i) { return longest - 32 * i; }

/// What the model counts of a launch's work items at one partition size t: all of them, those of whole
/// partitions (t tokens), and the longest of the others (a sequence's last, shorter partition; an empty
/// sequence's item has 0 tokens).
struct ItemCounts {
  std::uint64_t items, full_items;
  int longest_short;
};

/// The items of `segments` segments of seq_len tokens each (seq_len >= 0) with partitions of t tokens.
PAGEDATTN_HOST_DEVICE ItemCounts item_counts_of(int seq_len, int t, std::uint64_t segments)
{
  const int full = seq_len > 0 ? seq_len / t : 0;
  return {segments * static_cast<std::uint64_t>(items_of(seq_len, t)), segments * static_cast<std::uint64_t>(full),
          seq_len > 0 ? seq_len - full * t : 0};
}

/// Both batches' items: a + b.
PAGEDATTN_HOST_DEVICE ItemCounts combined(const ItemCounts& a, const ItemCounts& b)
{
  return {a.items + b.items, a.full_items + b.full_items, a.longest_short > b.longest_short ? a.longest_short : b.longest_short};
}

/// The waves of `wave` blocks that n items take, ceil(n / wave) (wave > 0): by a 32-bit division where both
/// fit 31 bits (every count the device's plan costs: validate_plan keeps the items under 2^31), not the 64-bit
/// division, a subroutine on the device.
PAGEDATTN_HOST_DEVICE std::uint64_t waves_of(std::uint64_t n, std::uint64_t wave)
{
  if (n < 0x80000000u && wave < 0x80000000u)
  {
    return (static_cast<std::uint32_t>(n) + static_cast<std::uint32_t>(wave) - 1) / static_cast<std::uint32_t>(wave);
  }
  return (n + wave - 1) / wave;
}

/// The modelled time of a launch with partitions of t tokens, in tokens: whole waves of the full partitions,
/// each costing t plus the fixed cost, then the other items in the room left, in waves costing the longest of
/// them plus the fixed cost. On uniform lengths that t divides, ceil(items / W) (t + fixed); a short item is
/// charged its own length, so that a batch of one long sequence and many short ones is not modelled as
/// waves of whole partitions (bench/NOTES.md, "Length-aware scheduling: the device plan").
PAGEDATTN_HOST_DEVICE std::uint64_t wave_cost(const ItemCounts& c, int t, const ScheduleModel& m)
{
  const std::uint64_t wave = static_cast<std::uint64_t>(m.wave_blocks > 0 ? m.wave_blocks : 1);
  const std::uint64_t fixed = static_cast<std::uint64_t>(m.fixed_cost_tokens);
  const std::uint64_t full_waves = waves_of(c.full_items, wave);
  std::uint64_t cost = full_waves * (static_cast<std::uint64_t>(t) + fixed);
  const std::uint64_t room = full_waves * wave; // items the full waves hold
  if (c.items > room) { cost += waves_of(c.items - room, wave) * (static_cast<std::uint64_t>(c.longest_short) + fixed); }
  return cost;
}

/// The model's choice, kept as a (cost, tokens) pair so that candidates can be compared in any order (a
/// parallel reduction on the device) with the same result as the host's loop.
struct ScheduleChoice {
  std::uint64_t cost;
  int partition_tokens;
  /// Whether this choice beats `other`: less cost, on a tie the longer partition.
  PAGEDATTN_HOST_DEVICE bool beats(const ScheduleChoice& other) const
  {
    return cost < other.cost || (cost == other.cost && partition_tokens > other.partition_tokens);
  }
  PAGEDATTN_HOST_DEVICE static ScheduleChoice none() { return {~std::uint64_t{0}, 0}; }
};

/// The model's partition size for a batch, given items_at(t): the ItemCounts of the whole launch with
/// partitions of t tokens (item_counts_of over the batch's sequences, combined; a functor with a
/// PAGEDATTN_HOST_DEVICE call operator), and the longest sequence.
template <class ItemsAt>
PAGEDATTN_HOST_DEVICE int choose_partition_tokens(const ScheduleModel& m, int longest_seq_len, ItemsAt items_at)
{
  const int longest = longest_candidate(longest_seq_len, m);
  ScheduleChoice best = ScheduleChoice::none();
  for (int i = 0; i < candidate_count(longest); ++i)
  {
    const int t = candidate_tokens(longest, i);
    const ScheduleChoice c{wave_cost(items_at(t), t, m), t};
    if (c.beats(best)) { best = c; }
  }
  return best.partition_tokens;
}

} // namespace pagedattn

// ---- the plan of a launch from the lengths on the device ---------------------------------------------------
//
// A launch planned on the device lays out its work items in ticket order, sequence by sequence,
// and within a sequence segment by segment: item = first_item(seq) + k * items_of(len) + partition for the
// k-th segment of the sequence. Each item owns one partial slot (its index), each segment with more than
// one partition ceil(P / partition_group_size) consecutive group slots. The host sizes the storage for
// the most items any batch of lengths <= max_seq_len can be planned with (schedule_capacity); the device
// considers only partition sizes whose items fit it.

namespace pagedattn {

/// A length the kernel may fold: within [0, max_seq_len] and within the sequence's block table.
PAGEDATTN_HOST_DEVICE bool valid_seq_len(int seq_len, int max_seq_len, long long table_tokens)
{
  return seq_len >= 0 && seq_len <= max_seq_len && static_cast<long long>(seq_len) <= table_tokens;
}

// ---- sliding windows ---------------------------------------------------------------------------------------
//
// With a window (DecodeArguments::window_left = w >= 0) the new token of a sequence of n tokens sees
// positions [n - 1 - w, n) only. The plan lays out the partitions of [s0, n), s0 that first position
// rounded down to a cache block, so that no block wholly before the window is read, and every partition
// starts at a block boundary (the folds' tiles need no more); the folds mask the s0 .. first visible
// tokens. Lengths of equal value keep equal spans (the uniform plan stays valid), and the spans of
// lengths up to L are at most min(L, w + block_size): the host's bound.

/// The first position the new token of a sequence of seq_len tokens sees (0 without a window: w < 0).
PAGEDATTN_HOST_DEVICE int window_first_visible(int seq_len, int window_left)
{
  return window_left >= 0 && seq_len - 1 - window_left > 0 ? seq_len - 1 - window_left : 0;
}

/// The first token the decode folds of such a sequence: window_first_visible rounded down to the cache
/// block (block_size a power of two, as every supported one is: a mask, no division).
PAGEDATTN_HOST_DEVICE int window_fold_start(int seq_len, int window_left, int block_size)
{
  return window_first_visible(seq_len, window_left) & -block_size;
}

/// The tokens the plan lays out for a sequence of seq_len tokens (seq_len itself without a window).
PAGEDATTN_HOST_DEVICE int window_span(int seq_len, int window_left, int block_size)
{
  return seq_len - window_fold_start(seq_len, window_left, block_size);
}

/// The longest span of any length in [0, max_seq_len]: the host's bound for the storage and the grid.
PAGEDATTN_HOST_DEVICE int window_span_bound(int max_seq_len, int window_left, int block_size)
{
  if (window_left < 0 || max_seq_len - window_left <= block_size) { return max_seq_len; }
  return window_left + block_size; // (w + 1 + (block_size - 1): the window and its first block's head)
}

/// The window the plan lays out for a sequence's q_len new tokens together (the union of theirs): the
/// first new token's reaches q_len - 1 positions further back than the last's (QueryRow). -1: none.
PAGEDATTN_HOST_DEVICE int rows_window_left(int window_left, int q_len)
{
  if (window_left < 0) { return -1; }
  return window_left > 0x7fffffff - (q_len - 1) ? 0x7fffffff : window_left + q_len - 1;
}

/// Combine groups of a segment of P partitions: none when one partition writes its output directly.
PAGEDATTN_HOST_DEVICE int groups_of(int partitions, int group_size)
{
  return partitions > 1 ? (partitions + group_size - 1) / group_size : 0;
}

/// One work item of a planned launch (AgentDecodePlan::ItemAt; the host reference's items compare bytewise).
struct alignas(32) PlannedItem {
  int segment;        ///< sequence * segments_per_seq + k
  int partition;      ///< 0 .. num_partitions - 1 (0 for an empty or invalid sequence)
  int num_partitions; ///< the segment's partitions; 0: empty sequence (zeros), -1: invalid length (NaN)
  int first_group;    ///< the segment's first combine group slot
  int seq_len;        ///< the sequence's length as the plan read it (the decode folds up to it; its partitions
                      ///< cover window_span of it)
  int reserved[3];
};

/// What the device's plan decides for the whole launch.
struct alignas(16) PlannedLaunch {
  int partition_tokens;
  int total_items;
  int max_partitions; ///< of any segment
  int reserved;
};

/// The plan of a batch whose every length is max_seq_len (partitions of t tokens), with the divisors by
/// which a block finds item i by multiplies and shifts (AgentDecodePlan::UniformItemAt): the host works
/// them out once per launch (uniform_layout_of), the blocks only read them.
struct UniformLayout {
  int partition_tokens;
  int partitions;      ///< per segment
  int items_per_seg;
  int groups_per_seg;
  int items_per_seq;   ///< segments_per_seq * items_per_seg
  PartitionDivisor by_items_per_seq, by_items_per_seg;
};

/// A sequence's query rows: rows [first, first + count) of the query and the output (QueryRow::index).
struct QuerySpan {
  int first, count;
  bool valid; ///< its offsets are well formed (query_span); else NaN goes to the rows it names within range
};

/// Sequence seq's query rows. offsets null: q_len rows from seq * q_len. Else [offsets[seq], offsets[seq + 1]),
/// valid where offsets[0] is 0 (seq 0), 0 <= offsets[seq - 1] <= offsets[seq] <= offsets[seq + 1] <= num_rows
/// and the sequence has at most q_len rows; an invalid span is clamped into [0, num_rows), at most q_len rows.
PAGEDATTN_HOST_DEVICE QuerySpan query_span(const int* offsets, int seq, int q_len, int num_rows)
{
  if (!offsets) { return {seq * q_len, q_len, true}; }
  const int before = seq > 0 ? offsets[seq - 1] : 0, first = offsets[seq], end = offsets[seq + 1];
  const bool valid = (seq > 0 || first == 0) && 0 <= first && before <= first && first <= end && end <= num_rows &&
                     static_cast<long long>(end) - first <= q_len;
  if (valid) { return {first, end - first, true}; }
  const int lo = first < 0 ? 0 : first > num_rows ? num_rows : first;
  const long long hi = end < lo ? lo : end > num_rows ? num_rows : end;
  return {lo, hi - lo < q_len ? static_cast<int>(hi - lo) : q_len, false};
}

/// What the plan is made from: the lengths and what the host knows.
struct DecodePlanParams {
  const int* seq_lens;
  const int* query_start_loc;       ///< null: q_len query rows per sequence; else each sequence's (query_span)
  int q_len;                        ///< query rows per sequence (with query_start_loc: at most)
  int num_query_rows;               ///< with query_start_loc: the rows of the query and the output
  int num_seqs;
  int segments_per_seq;
  int max_seq_len;
  long long table_tokens;           ///< max_blocks_per_seq * block_size
  ScheduleModel model;              ///< max_partition_tokens <= 128 * 32 (AgentDecodePlan's candidates)
  unsigned long long item_budget;    ///< the most items the model may choose (plan_item_budget)
  int fixed_tokens;                 ///< > 0: the caller's partition size
  int host_tokens;                  ///< the host's choice at max_seq_len: the plan of a batch whose every length is max_seq_len
  int window_left;                  ///< < 0: no window; else the plan lays out window_span of each length
  int block_size;                   ///< (the window's alignment)
  UniformLayout uniform;            ///< that plan's layout: uniform_layout_of(*this, partition_group_size)
};

/// What the plan reads of sequence seq: its length, 0 where it has no query rows (no cache access, nothing
/// written), -1 (an invalid length: NaN rows and the error count) where its query offsets are invalid.
/// at_bound: the length is max_seq_len and the rows q_len, as in the host's plan (its uniform fast path).
struct PlannedLength {
  int len;
  bool at_bound;
};
/// `len`: seq_lens[seq], loaded by the caller. QueryOffsets false: the launch has none (p.query_start_loc is
/// null), known at compile time, so that none of the offsets' code is in the kernels of launches without them.
template <bool QueryOffsets = true>
PAGEDATTN_HOST_DEVICE PlannedLength planned_length(const DecodePlanParams& p, int seq, int len)
{
  if (!QueryOffsets || !p.query_start_loc) { return {len, len == p.max_seq_len}; }
  const QuerySpan rows = query_span(p.query_start_loc, seq, p.q_len, p.num_query_rows);
  if (!rows.valid) { return {-1, false}; }
  if (rows.count == 0) { return {0, false}; }
  return {len, len == p.max_seq_len && rows.count == p.q_len};
}
template <bool QueryOffsets = true>
PAGEDATTN_HOST_DEVICE PlannedLength planned_length(const DecodePlanParams& p, int seq)
{
  return planned_length<QueryOffsets>(p, seq, p.seq_lens[seq]);
}

/// The host's bound on what a planned launch may need.
struct ScheduleCapacity {
  std::size_t items;  ///< work items = partial slots
  std::size_t groups; ///< combine group slots
};

/// Items and groups of a launch of num_segments segments whose sequences are at most max_seq_len long.
/// partition_tokens > 0: the caller's fixed size. Else the model may pick any size whose items fit
/// `items`: every sequence in partitions of the policy's limit (always possible), and the host's own choice
/// at max_seq_len (so that a batch of max_seq_len sequences is planned as the host would). No more: a
/// launch that is not persistent has a thread block per item of this bound (choose_grid), and one whose
/// bound fits a wave can then be cooperative.
PAGEDATTN_HOST_DEVICE ScheduleCapacity schedule_capacity(const ScheduleModel& m, std::size_t num_segments, int max_seq_len,
                                                         int partition_tokens, int host_choice, int group_size)
{
  std::size_t items = 0;
  if (partition_tokens > 0) { items = num_segments * static_cast<std::size_t>(items_of(max_seq_len, partition_tokens)); }
  else
  {
    const std::size_t at_limit = num_segments * static_cast<std::size_t>(items_of(max_seq_len, m.max_partition_tokens));
    const std::size_t at_host = num_segments * static_cast<std::size_t>(items_of(max_seq_len, host_choice));
    items = at_limit > at_host ? at_limit : at_host;
  }
  // ceil(P / g) <= (P + g - 1) / g for each segment, summed: (items + (g - 1) segments) / g.
  const std::size_t groups = (items + (group_size - 1) * num_segments) / group_size + 1;
  return {items, groups};
}

/// The most items the device's plan may choose for a batch that is not uniform: the storage's, but no
/// more than four waves or four items per segment, whichever is more. A plain launch has a block per item
/// of the storage's bound (the host's plan at max_seq_len); where even partitions of the limit (or the
/// caller's size) fit this budget, the blocks past it leave right after the plan's first pass over the
/// lengths instead of planning (AgentDecodePlan::ChooseLaunch). Where nothing fits it, the plan takes the
/// limit, as when nothing fits the storage.
/// Waves of work items a launch planned on the device is sized for (plan_item_budget; and the bound past
/// which a plain launch takes the persistent grid, loose_bound in device/dispatch/decode_plan.cuh).
inline constexpr int plan_budget_waves = 4;

PAGEDATTN_HOST_DEVICE std::size_t plan_item_budget(const ScheduleModel& m, std::size_t num_segments, std::size_t capacity_items)
{
  const std::size_t waves = plan_budget_waves * static_cast<std::size_t>(m.wave_blocks > 0 ? m.wave_blocks : 1);
  const std::size_t per_segment = 4 * num_segments;
  const std::size_t budget = waves > per_segment ? waves : per_segment;
  return budget < capacity_items ? budget : capacity_items;
}

/// One sequence's share of a plan with partitions of t tokens.
struct SequenceSchedule {
  int partitions;       ///< per segment: 0 (empty), -1 (invalid), else ceil(len / t)
  int items_per_seg;    ///< items_of
  int groups_per_seg;   ///< groups_of
};
PAGEDATTN_HOST_DEVICE SequenceSchedule schedule_sequence(int seq_len, bool valid, int t, int group_size)
{
  const int p = valid ? partitions_of(seq_len, t) : 0;
  return {valid ? p : -1, p > 0 ? p : 1, groups_of(p, group_size)};
}

/// The layout of the plan of a batch whose every length is max_seq_len, with the caller's or the host's
/// partition size (the host fills DecodePlanParams::uniform with it; group_size: partition_group_size).
PAGEDATTN_HOST_DEVICE UniformLayout uniform_layout_of(const DecodePlanParams& p, int group_size)
{
  const int t = p.fixed_tokens > 0 ? p.fixed_tokens : p.host_tokens;
  const int span = window_span(p.max_seq_len, p.window_left, p.block_size);
  const int per_seg = items_of(span, t);
  const int per_seq = p.segments_per_seq * per_seg;
  return {t, partitions_of(span, t), per_seg, groups_of(partitions_of(span, t), group_size),
          per_seq, PartitionDivisor::of(per_seq > 0 ? per_seq : 1), PartitionDivisor::of(per_seg)};
}

/// The record of the item at `offset` items into a sequence's run (first_group: the sequence's first).
PAGEDATTN_HOST_DEVICE PlannedItem planned_item(int seq, int segments_per_seq, const SequenceSchedule& s, int offset, int first_group,
                                               int seq_len)
{
  const int k = offset / s.items_per_seg;
  return {seq * segments_per_seq + k, offset % s.items_per_seg, s.partitions, first_group + k * s.groups_per_seg, seq_len, {0, 0, 0}};
}

} // namespace pagedattn
