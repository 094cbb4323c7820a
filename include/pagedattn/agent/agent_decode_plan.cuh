#pragma once
// The plan of a decode launch, made on the device from the lengths by every thread block of the
// decode itself, in its prologue: each block reads seq_lens (and the query offsets where given:
// planned_length), chooses the partition size with the schedule
// model (agent/decode_schedule.cuh) and finds its own work items. Every block computes the same plan from
// the same lengths (seq_lens, like every input, must not change while the launch runs), so nothing is
// written to global memory and no block waits for another to plan. The same pieces, run sequentially,
// are the host reference (test/agent/decode_schedule_reference.cuh) that the tests compare this with.
//
// Work items are in ticket order: sequence by sequence, within a sequence segment by segment (see
// decode_schedule.cuh). A block finds item i through a cursor over the sequences, a chunk of
// BlockThreads at a time, that only moves forward: its items (its block index, then the tickets it draws)
// only grow, so each block scans the lengths at most once however many items it folds. Thread j of the
// block holds the chunk's j-th sequence (its length and the inclusive scans of items and group slots) in
// registers, so the shared memory is free between calls: a persistent block's fold reuses it and the
// next ItemAt() needs no reload.
#include <pagedattn/agent/decode_schedule.cuh>
#include <pagedattn/agent/partition_combine_state.cuh>
#include <pagedattn/config.cuh>
#include <pagedattn/warp/warp_reduce_shfl.cuh>
#include <pagedattn/util_arch.cuh> // (the trace points' timer)

#include <cstdint>

namespace pagedattn {

/// AgentDecodePlan's shared memory and cursor, the same for its launches with and without query offsets.
template <int BlockThreads>
struct DecodePlanStorage {
  static constexpr int max_candidates = 128; ///< partition sizes 32 .. 4096
  /// Needed only while the partition size is chosen (ChooseLaunch).
  struct ChoiceStorage {
    int lens[BlockThreads];                   ///< a chunk of the lengths the model counts (0 where invalid)
    unsigned long long items[BlockThreads];   ///< per thread: its candidate's items over its share of the lengths
    unsigned long long full[BlockThreads];    ///< its candidate's items of whole partitions, likewise
    int longest_short[BlockThreads];          ///< its candidate's longest shorter partition, likewise
    unsigned long long cost[max_candidates];
    int tokens[max_candidates];
    int longest;
    int off_bound; ///< some sequence is not at the bound (PlannedLength::at_bound)
    unsigned long long items_at_cap; ///< the batch's items with the largest partitions the plan may take
  };
  /// Shared memory the caller may reuse between calls (it aliases it with the fold's).
  struct TempStorage {
    ChoiceStorage choice;
    int lens[BlockThreads];        ///< a chunk's lengths as read
    int scan_items[BlockThreads];  ///< inclusive scans over a chunk's sequences, while they are computed
    int scan_groups[BlockThreads];
  };
  /// Kept for the block's whole run: where the cursor's chunk is, and the sequence an ItemAt() found.
  struct CursorState {
    bool uniform;                  ///< every sequence at the bound (PlannedLength): items by arithmetic, no chunks
    int base;                      ///< the chunk's first sequence
    int count;                     ///< its sequences
    int chunk_items;               ///< its items
    int chunk_groups;              ///< its group slots
    long long first_item;          ///< items of the sequences before the chunk
    long long first_group;         ///< group slots of the sequences before the chunk
    int found[4];                  ///< ItemAt(): the sequence that holds the item (in the chunk), its length, scans
  };
};

/// QueryOffsets: the launch may have query offsets (planned_length); false compiles none of their code.
template <int BlockThreads, bool QueryOffsets = true>
class AgentDecodePlan {
public:
  static constexpr int max_candidates = DecodePlanStorage<BlockThreads>::max_candidates;
  static_assert(BlockThreads >= max_candidates && BlockThreads % max_candidates == 0,
                "every candidate gets the same number of threads");
  using ChoiceStorage = typename DecodePlanStorage<BlockThreads>::ChoiceStorage;
  using TempStorage = typename DecodePlanStorage<BlockThreads>::TempStorage;
  using CursorState = typename DecodePlanStorage<BlockThreads>::CursorState;

  PAGEDATTN_DEVICE AgentDecodePlan(TempStorage& temp, CursorState& state, const DecodePlanParams& p, int tokens = 0)
      : temp_(temp), state_(state), p_(p), tokens_(tokens), held_len_(0), held_items_(0), held_groups_(0) {}

  /// The launch's partition size, items and largest partition count (every thread gets the same).
  /// Leaves the cursor at the first chunk of sequences. exit_from >= 0: a block of that index or more
  /// gets partition_tokens 0 (it has no item) as soon as the first pass over the lengths shows that the
  /// plan's items fit item_budget <= exit_from (a plain launch that is not cooperative: its blocks past
  /// the budget leave without planning; they have drawn no ticket).
  PAGEDATTN_DEVICE PlannedLaunch ChooseLaunch(long long exit_from = -1)
  {
    ChoiceStorage& choice = temp_.choice;
    if (threadIdx.x == 0)
    {
      choice.longest = 0;
      choice.off_bound = 0;
      choice.items_at_cap = 0;
    }
    __syncthreads();
    const int cap_tokens = p_.fixed_tokens > 0 ? p_.fixed_tokens : p_.model.max_partition_tokens;
    int longest = 0;
    bool off_bound = false;
    unsigned long long items_at_cap = 0;
    for (int i = threadIdx.x; i < p_.num_seqs; i += BlockThreads)
    {
      const PlannedLength planned = planned_length<QueryOffsets>(p_, i);
      const int len = planned.len;
      if (i < BlockThreads) // the first chunk, read once: the cursor's, and what the model counts
      {
        temp_.lens[i] = len;
        choice.lens[i] = valid_len(len);
      }
      longest = max_int(longest, valid_len(len));
      off_bound = off_bound || !planned.at_bound;
      items_at_cap += static_cast<unsigned long long>(items_of(valid_len(len), cap_tokens));
    }
    atomicMax(&choice.longest, longest);
    if (off_bound) { atomicMax(&choice.off_bound, 1); }
    // A 64-bit atomicAdd on shared memory is a compare-and-swap loop, in which a warp's threads take turns
    // (1.3 µs for 32 lengths, 2.9 for 64): where more than one lane has a count, the warp's sum goes in
    // through its first lane alone (bench/NOTES.md, "Length-aware scheduling: the device plan").
    const lane_mask_t counting = arch::ballot(items_at_cap > 0);
    if ((counting & (counting - 1)) != 0) // (the whole warp: every lane has the same mask)
    {
      items_at_cap = WarpReduceShfl<unsigned long long>::AllSum(items_at_cap);
      if (arch::lane_id() != 0) { items_at_cap = 0; }
    }
    if (items_at_cap > 0) { atomicAdd(&choice.items_at_cap, items_at_cap); }
    __syncthreads();
    PAGEDATTN_TRACE_POINT(TracePoint::plan_lengths_read);
    if (exit_from >= 0 && static_cast<long long>(blockIdx.x) >= exit_from && choice.off_bound &&
        choice.items_at_cap * static_cast<unsigned long long>(p_.segments_per_seq) <= p_.item_budget)
    {
      return PlannedLaunch{0, 0, 0, 0}; // (the whole block: every thread read the same words)
    }
    longest = choice.longest;
    if (!choice.off_bound) { return UniformLaunch(); } // (the whole block takes the same branch)

    // Each candidate's ItemCounts: thread (lane, c) counts every lanes-th length of each chunk.
    const int top = p_.fixed_tokens > 0 ? p_.fixed_tokens : longest_candidate(longest, p_.model);
    const int count = p_.fixed_tokens > 0 ? 1 : candidate_count(top);
    int slots = 1; // candidates' slots: a power of two >= count, so that each gets BlockThreads / slots threads
    while (slots < count) { slots *= 2; }
    const int lanes = BlockThreads / slots;
    const int c = threadIdx.x % slots, lane = threadIdx.x / slots;
    const int t = c < count ? candidate_tokens(top, c) : 32;
    const PartitionDivisor divide_by_t = PartitionDivisor::of(t);
    unsigned long long items = 0, full = 0;
    int longest_short = 0;
    for (int base = 0; base < p_.num_seqs; base += BlockThreads)
    {
      const int n = detail::min_int(BlockThreads, p_.num_seqs - base);
      if (base > 0)
      {
        __syncthreads(); // the previous chunk is counted
        if (static_cast<int>(threadIdx.x) < n) { choice.lens[threadIdx.x] = valid_len(planned_length<QueryOffsets>(p_, base + threadIdx.x).len); }
        __syncthreads();
      }
      for (int j = lane; j < n; j += lanes)
      {
        const int len = choice.lens[j], whole = divide_by_t.quotient(len); // (len >= 0)
        items += static_cast<unsigned long long>(divide_by_t.items(len));
        full += static_cast<unsigned long long>(whole);
        longest_short = max_int(longest_short, len - whole * t);
      }
    }
    choice.items[threadIdx.x] = items;
    choice.full[threadIdx.x] = full;
    choice.longest_short[threadIdx.x] = longest_short;
    __syncthreads();
    if (static_cast<int>(threadIdx.x) < max_candidates)
    {
      ScheduleChoice mine = ScheduleChoice::none();
      if (static_cast<int>(threadIdx.x) < count)
      {
        ItemCounts counts{0, 0, 0};
        for (int l = 0; l < lanes; ++l)
        {
          const int k = l * slots + threadIdx.x;
          counts = combined(counts, ItemCounts{choice.items[k], choice.full[k], choice.longest_short[k]});
        }
        const unsigned long long total = counts.items * static_cast<unsigned long long>(p_.segments_per_seq);
        counts.items = total;
        counts.full_items *= static_cast<unsigned long long>(p_.segments_per_seq);
        const int tokens = candidate_tokens(top, threadIdx.x);
        // A fixed size always fits (schedule_capacity sized the storage for it).
        if (p_.fixed_tokens > 0 || total <= p_.item_budget) { mine = {wave_cost(counts, tokens, p_.model), tokens}; }
        choice.items[threadIdx.x] = total; // (read by this thread alone: its own slot)
      }
      choice.cost[threadIdx.x] = mine.cost;
      choice.tokens[threadIdx.x] = mine.partition_tokens;
    }
    __syncthreads();
    for (int stride = slots / 2; stride > 0; stride /= 2) // the least cost (ties to the longer partition) of slots [0, slots)
    {
      if (static_cast<int>(threadIdx.x) < stride)
      {
        const ScheduleChoice other{choice.cost[threadIdx.x + stride], choice.tokens[threadIdx.x + stride]};
        if (other.beats(ScheduleChoice{choice.cost[threadIdx.x], choice.tokens[threadIdx.x]}))
        {
          choice.cost[threadIdx.x] = other.cost;
          choice.tokens[threadIdx.x] = other.partition_tokens;
        }
      }
      __syncthreads();
    }
    // No candidate fits only if item_budget is below what the limit needs (schedule_capacity always admits the
    // policy's limit: then the limit (as the host reference does).
    PAGEDATTN_TRACE_POINT(TracePoint::plan_chosen);
    tokens_ = choice.tokens[0] > 0 ? choice.tokens[0] : p_.model.max_partition_tokens;
    const int winner = top >= tokens_ && (top - tokens_) % 32 == 0 ? (top - tokens_) / 32 : -1;
    unsigned long long total = 0;
    if (winner >= 0 && winner < count) { total = choice.items[winner]; }
    __syncthreads(); // every thread has read the choice before the storage is reused
    if (winner < 0 || winner >= count) { total = TotalItems(tokens_); }
    LoadChunk(0, 0, 0, /*lens_loaded=*/true);
    PAGEDATTN_TRACE_POINT(TracePoint::plan_scanned);
    return PlannedLaunch{tokens_, static_cast<int>(total), partitions_of(longest, tokens_), 0};
  }

  /// Every length is max_seq_len (a valid length: the host checked the bound against the block tables). The
  /// model over these lengths is the host's own computation, and the host's choice fits the storage
  /// (schedule_capacity admits it), so the general path would choose it too: the plan needs no candidates
  /// and no scans, and item i is the host's item i.
  PAGEDATTN_DEVICE PlannedLaunch UniformLaunch()
  {
    const PlannedLaunch launch = UniformLaunchOf();
    tokens_ = launch.partition_tokens;
    if (threadIdx.x == 0)
    {
      state_.uniform = true;
      state_.base = 0;
      state_.count = 0;
      state_.chunk_items = 0;
      state_.chunk_groups = 0;
      state_.first_item = 0;
      state_.first_group = 0;
    }
    __syncthreads(); // every thread has read the choice (and the state is set) before the storage is reused
    return launch;
  }

  /// The plan of a batch whose every length is max_seq_len, by arithmetic alone (no shared memory, no
  /// barrier): what UniformLaunch() returns, for a caller that has not yet read the lengths.
  PAGEDATTN_DEVICE PlannedLaunch UniformLaunchOf() const
  {
    const UniformLayout& u = p_.uniform;
    return PlannedLaunch{u.partition_tokens, p_.num_seqs * u.items_per_seq, u.partitions, 0};
  }

  /// Item `index` of UniformLaunchOf()'s plan (what ItemAt() returns after UniformLaunch()): planned_item's
  /// record, by the host's divisors.
  PAGEDATTN_DEVICE PlannedItem UniformItemAt(unsigned long long index) const
  {
    const UniformLayout& u = p_.uniform;
    const int i = static_cast<int>(index); // < the launch's items, which are ints (validate_plan)
    const int seq = u.by_items_per_seq.quotient(i);
    const int offset = i - seq * u.items_per_seq;
    const int k = u.by_items_per_seg.quotient(offset);
    const int segment = seq * p_.segments_per_seq + k;
    return PlannedItem{segment, offset - k * u.items_per_seg, u.partitions, segment * u.groups_per_seg, p_.max_seq_len, {0, 0, 0}};
  }

  /// Work item `index` (< the launch's total_items) of the plan with ChooseLaunch's partition size (or the
  /// one given to the constructor). Every thread of the block calls it with the same index, and a block's
  /// indices never decrease; every thread gets the item. The temporary storage is free on return, and
  /// whatever the caller writes there before the next call does not matter.
  PAGEDATTN_DEVICE PlannedItem ItemAt(unsigned long long index)
  {
    if (state_.uniform) { return UniformItemAt(index); }
    while (static_cast<unsigned long long>(state_.first_item) + static_cast<unsigned long long>(state_.chunk_items) <= index &&
           state_.base + state_.count < p_.num_seqs)
    {
      NextChunk();
    }
    // The thread whose sequence's run of items holds the offset (exactly one) names it.
    const int offset_in_chunk = static_cast<int>(index - static_cast<unsigned long long>(state_.first_item));
    const SequenceSchedule held = schedule_of(held_len_, tokens_);
    const int held_own = p_.segments_per_seq * held.items_per_seg;
    if (static_cast<int>(threadIdx.x) < state_.count && held_items_ > offset_in_chunk && held_items_ - held_own <= offset_in_chunk)
    {
      state_.found[0] = static_cast<int>(threadIdx.x);
      state_.found[1] = held_len_;
      state_.found[2] = held_items_;
      state_.found[3] = held_groups_;
    }
    __syncthreads();
    const int seq = state_.base + state_.found[0], len = state_.found[1], scan_items = state_.found[2], scan_groups = state_.found[3];
    const SequenceSchedule s = schedule_of(len, tokens_);
    const int own_items = p_.segments_per_seq * s.items_per_seg;
    const int offset = offset_in_chunk - (scan_items - own_items);
    const long long group0 = state_.first_group + scan_groups - p_.segments_per_seq * s.groups_per_seg;
    __syncthreads(); // every thread has read the finder's values: the next call may write them
    return planned_item(seq, p_.segments_per_seq, s, offset, static_cast<int>(group0), len);
  }

private:
  TempStorage& temp_;
  CursorState& state_;
  const DecodePlanParams& p_;
  int tokens_;

  PAGEDATTN_DEVICE static int max_int(int a, int b) { return a > b ? a : b; }
  PAGEDATTN_DEVICE bool valid(int len) const { return valid_seq_len(len, p_.max_seq_len, p_.table_tokens); }
  /// The length the model counts: the sequence's (its window's span, window_span), 0 where it is invalid
  /// (one item all the same).
  PAGEDATTN_DEVICE int valid_len(int len) const { return valid(len) ? window_span(len, p_.window_left, p_.block_size) : 0; }
  /// One sequence's share of the plan with partitions of t tokens.
  PAGEDATTN_DEVICE SequenceSchedule schedule_of(int len, int t) const
  {
    return schedule_sequence(valid_len(len), valid(len), t, partition_group_size);
  }

  /// Items of the whole launch with partitions of t tokens (when the choice did not count them).
  PAGEDATTN_DEVICE unsigned long long TotalItems(int t)
  {
    ChoiceStorage& choice = temp_.choice;
    unsigned long long items = 0;
    for (int i = threadIdx.x; i < p_.num_seqs; i += BlockThreads) { items += items_of(valid_len(planned_length<QueryOffsets>(p_, i).len), t); }
    choice.items[threadIdx.x] = items;
    __syncthreads();
    unsigned long long total = 0;
    for (int i = 0; i < BlockThreads; ++i) { total += choice.items[i]; }
    __syncthreads();
    return total * static_cast<unsigned long long>(p_.segments_per_seq);
  }

  /// The chunk after the cursor's.
  PAGEDATTN_DEVICE void NextChunk()
  {
    const long long first_item = state_.first_item + state_.chunk_items;
    const long long first_group = state_.first_group + state_.chunk_groups;
    const int base = state_.base + BlockThreads;
    __syncthreads(); // every thread has read the old chunk's state
    LoadChunk(base, first_item, first_group, /*lens_loaded=*/false);
  }

  /// The chunk of sequences from `base`: their lengths (read here unless ChooseLaunch has), and inclusive
  /// scans of their items and group slots, thread j's entry held in its registers.
  PAGEDATTN_DEVICE void LoadChunk(int base, long long first_item, long long first_group, bool lens_loaded)
  {
    const int n = detail::min_int(BlockThreads, p_.num_seqs - base);
    int items = 0, groups = 0;
    held_len_ = 0;
    if (static_cast<int>(threadIdx.x) < n)
    {
      held_len_ = lens_loaded ? temp_.lens[threadIdx.x] : planned_length<QueryOffsets>(p_, base + threadIdx.x).len;
      const SequenceSchedule s = schedule_of(held_len_, tokens_);
      items = p_.segments_per_seq * s.items_per_seg;
      groups = p_.segments_per_seq * s.groups_per_seg;
    }
    temp_.scan_items[threadIdx.x] = items;
    temp_.scan_groups[threadIdx.x] = groups;
    __syncthreads();
    for (int stride = 1; stride < n; stride *= 2) // Hillis-Steele inclusive scan of the chunk's n entries
    {
      const bool add = static_cast<int>(threadIdx.x) >= stride;
      const int add_items = add ? temp_.scan_items[threadIdx.x - stride] : 0;
      const int add_groups = add ? temp_.scan_groups[threadIdx.x - stride] : 0;
      __syncthreads();
      temp_.scan_items[threadIdx.x] += add_items;
      temp_.scan_groups[threadIdx.x] += add_groups;
      __syncthreads();
    }
    held_items_ = temp_.scan_items[threadIdx.x];
    held_groups_ = temp_.scan_groups[threadIdx.x];
    if (threadIdx.x == 0)
    {
      state_.uniform = false;
      state_.base = base;
      state_.count = n > 0 ? n : 0;
      state_.chunk_items = n > 0 ? temp_.scan_items[n - 1] : 0;
      state_.chunk_groups = n > 0 ? temp_.scan_groups[n - 1] : 0;
      state_.first_item = first_item;
      state_.first_group = first_group;
    }
    __syncthreads(); // (the scans are read: the storage is free)
  }

  int held_len_, held_items_, held_groups_; ///< thread j: the chunk's j-th sequence's length and inclusive scans
};

} // namespace pagedattn
