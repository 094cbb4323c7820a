#pragma once
// The planning pass of a launch planned on the device (issue 15): one thread block reads the sequences'
// lengths, chooses the partition size with the schedule model (agent/decode_schedule.cuh) and writes the
// launch's work items in ticket order. The same pieces, run sequentially, are the host reference
// (test/agent/decode_schedule_reference.cuh) that the GPU test compares this with, item by item.
//
// The lengths are read once, into a snapshot in the temporary storage: every later step of the pass, and
// the decode (through PlannedItem::seq_len), sees the same lengths, so the items always fit the storage
// and the decode folds exactly what was planned, even if a caller rewrote seq_lens during the launch.
//
// It also zeroes the look-back combine's words (the init pass of earlier versions). The decode kernel
// waits for its completion before it reads the plan (programmatic dependent launch on sm_90, else the
// stream's order).
#include <pagedattn/agent/decode_schedule.cuh>
#include <pagedattn/agent/partition_combine_state.cuh>
#include <pagedattn/config.cuh>

#include <cstdint>

namespace pagedattn {

/// Everything the planning pass reads and writes.
struct DecodePlanParams {
  const int* seq_lens;
  int num_seqs;
  int segments_per_seq;
  int max_seq_len;
  long long table_tokens;  ///< max_blocks_per_seq * block_size
  ScheduleModel model;     ///< max_partition_tokens <= AgentDecodePlan::max_candidates * 32
  unsigned long long capacity_items;
  int fixed_tokens;        ///< > 0: the caller's partition size
  int* lens;               ///< [num_seqs]: the snapshot of seq_lens (temporary storage)
  PlannedLaunch* launch;   ///< out
  PlannedItem* items;      ///< out: [capacity_items]
  unsigned* reset_words;   ///< the look-back combine's ticket, arrival counters and statuses, zeroed here
  unsigned long long reset_count;
};

template <int BlockThreads>
class AgentDecodePlan {
public:
  static constexpr int max_candidates = 128; ///< partition sizes 32 .. 4096
  static_assert(BlockThreads % max_candidates == 0, "each candidate gets the same number of threads");
  static constexpr int lanes_per_candidate = BlockThreads / max_candidates;

  struct TempStorage {
    int lens[BlockThreads];                                         ///< a chunk of lengths (0 where invalid)
    unsigned long long items[lanes_per_candidate][max_candidates]; ///< per lane and candidate
    unsigned long long choice_cost[max_candidates];
    int choice_tokens[max_candidates];
    SequenceSchedule schedule[BlockThreads];                        ///< a chunk's sequences
    int scan_items[BlockThreads], scan_groups[BlockThreads];        ///< their inclusive scans
    int longest, max_partitions, partition_tokens;
  };

  PAGEDATTN_DEVICE AgentDecodePlan(TempStorage& temp, const DecodePlanParams& p) : temp_(temp), p_(p) {}

  PAGEDATTN_DEVICE void Run()
  {
    for (unsigned long long i = threadIdx.x; i < p_.reset_count; i += BlockThreads) { p_.reset_words[i] = 0; }
    if (threadIdx.x == 0)
    {
      temp_.longest = 0;
      temp_.max_partitions = 0;
      temp_.partition_tokens = p_.fixed_tokens;
    }
    __syncthreads();
    int longest = 0;
    for (int i = threadIdx.x; i < p_.num_seqs; i += BlockThreads)
    {
      const int len = p_.seq_lens[i]; // the one read of seq_lens
      p_.lens[i] = len;
      if (valid_seq_len(len, p_.max_seq_len, p_.table_tokens)) { longest = max_int(longest, len); }
    }
    atomicMax(&temp_.longest, longest);
    __syncthreads(); // the snapshot is complete (and visible to the block)
    if (p_.fixed_tokens == 0) { ChoosePartitionTokens(); } // sets temp_.partition_tokens
    __syncthreads();
    WriteItems(temp_.partition_tokens);
  }

private:
  TempStorage& temp_;
  const DecodePlanParams& p_;

  PAGEDATTN_DEVICE static int max_int(int a, int b) { return a > b ? a : b; }
  PAGEDATTN_DEVICE static int min_int(int a, int b) { return a < b ? a : b; }
  PAGEDATTN_DEVICE bool valid(int seq) const { return valid_seq_len(p_.lens[seq], p_.max_seq_len, p_.table_tokens); }
  /// The length the model counts: the sequence's, 0 where it is invalid (one item all the same).
  PAGEDATTN_DEVICE int valid_len(int seq) const { return valid(seq) ? p_.lens[seq] : 0; }

  /// The model over every candidate: thread (lane, c) sums items_of over every lanes_per_candidate-th
  /// length of each chunk for candidate c, then the candidates are reduced with ScheduleChoice::beats
  /// (an order-independent rule, so the result is the host loop's).
  PAGEDATTN_DEVICE void ChoosePartitionTokens()
  {
    const int top = longest_candidate(temp_.longest, p_.model);
    const int count = candidate_count(top);
    const int c = threadIdx.x % max_candidates, lane = threadIdx.x / max_candidates;
    const int t = c < count ? candidate_tokens(top, c) : 32;
    unsigned long long items = 0;
    for (int base = 0; base < p_.num_seqs; base += BlockThreads)
    {
      const int n = min_int(BlockThreads, p_.num_seqs - base);
      if (threadIdx.x < n) { temp_.lens[threadIdx.x] = valid_len(base + threadIdx.x); }
      __syncthreads();
      for (int j = lane; j < n; j += lanes_per_candidate) { items += static_cast<unsigned long long>(items_of(temp_.lens[j], t)); }
      __syncthreads();
    }
    temp_.items[lane][c] = items * static_cast<unsigned long long>(p_.segments_per_seq);
    __syncthreads();
    if (threadIdx.x < max_candidates)
    {
      unsigned long long total = 0;
      for (int l = 0; l < lanes_per_candidate; ++l) { total += temp_.items[l][c]; }
      ScheduleChoice choice = ScheduleChoice::none();
      if (c < count && total <= p_.capacity_items) { choice = {wave_cost(total, t, p_.model), t}; }
      temp_.choice_cost[c] = choice.cost;
      temp_.choice_tokens[c] = choice.partition_tokens;
    }
    __syncthreads();
    for (int stride = max_candidates / 2; stride > 0; stride /= 2)
    {
      if (threadIdx.x < stride)
      {
        const ScheduleChoice mine{temp_.choice_cost[threadIdx.x], temp_.choice_tokens[threadIdx.x]};
        const ScheduleChoice other{temp_.choice_cost[threadIdx.x + stride], temp_.choice_tokens[threadIdx.x + stride]};
        if (other.beats(mine))
        {
          temp_.choice_cost[threadIdx.x] = other.cost;
          temp_.choice_tokens[threadIdx.x] = other.partition_tokens;
        }
      }
      __syncthreads();
    }
    // No candidate fits only if capacity_items is below schedule_capacity's bound, which always admits the
    // policy's limit: then the limit (the host reference does the same); the writes stay within capacity.
    if (threadIdx.x == 0) { temp_.partition_tokens = temp_.choice_tokens[0] > 0 ? temp_.choice_tokens[0] : p_.model.max_partition_tokens; }
  }

  /// The items, chunk by chunk of sequences: each thread works out one sequence's schedule, a block-wide
  /// scan gives every sequence its first item and group, and the whole block writes the chunk's items
  /// (thread i takes items i, i + BlockThreads, ..., finding its sequence by a binary search of the scan).
  PAGEDATTN_DEVICE void WriteItems(int t)
  {
    int first_item = 0, first_group = 0; // of the chunk
    for (int base = 0; base < p_.num_seqs; base += BlockThreads)
    {
      const int n = min_int(BlockThreads, p_.num_seqs - base);
      SequenceSchedule s{0, 0, 0};
      if (static_cast<int>(threadIdx.x) < n)
      {
        s = schedule_sequence(p_.lens[base + threadIdx.x], valid(base + threadIdx.x), t, partition_group_size);
        atomicMax(&temp_.max_partitions, s.partitions);
      }
      temp_.schedule[threadIdx.x] = s;
      temp_.scan_items[threadIdx.x] = p_.segments_per_seq * s.items_per_seg;
      temp_.scan_groups[threadIdx.x] = p_.segments_per_seq * s.groups_per_seg;
      __syncthreads();
      for (int stride = 1; stride < BlockThreads; stride *= 2) // Hillis-Steele inclusive scan
      {
        const int add_items = threadIdx.x >= static_cast<unsigned>(stride) ? temp_.scan_items[threadIdx.x - stride] : 0;
        const int add_groups = threadIdx.x >= static_cast<unsigned>(stride) ? temp_.scan_groups[threadIdx.x - stride] : 0;
        __syncthreads();
        temp_.scan_items[threadIdx.x] += add_items;
        temp_.scan_groups[threadIdx.x] += add_groups;
        __syncthreads();
      }
      const int chunk_items = temp_.scan_items[BlockThreads - 1];
      for (int i = threadIdx.x; i < chunk_items; i += BlockThreads)
      {
        int lo = 0, hi = n - 1; // the first sequence whose inclusive scan exceeds i
        while (lo < hi)
        {
          const int mid = (lo + hi) / 2;
          if (temp_.scan_items[mid] > i) { hi = mid; }
          else { lo = mid + 1; }
        }
        const SequenceSchedule& own = temp_.schedule[lo];
        const int own_items = p_.segments_per_seq * own.items_per_seg;
        const int offset = i - (temp_.scan_items[lo] - own_items);
        const int group0 = first_group + temp_.scan_groups[lo] - p_.segments_per_seq * own.groups_per_seg;
        const unsigned long long slot = static_cast<unsigned long long>(first_item) + i;
        if (slot < p_.capacity_items)
        {
          p_.items[slot] = planned_item(base + lo, p_.segments_per_seq, own, offset, group0, p_.lens[base + lo]);
        }
      }
      first_item += chunk_items;
      first_group += temp_.scan_groups[BlockThreads - 1];
      __syncthreads(); // the scans and schedules are read before the next chunk writes them
    }
    if (threadIdx.x == 0) { *p_.launch = PlannedLaunch{t, first_item, temp_.max_partitions, 0}; }
  }
};

} // namespace pagedattn
