#pragma once
// The planning pass of a launch planned on the device, written out sequentially on the host from the
// same pieces (agent/decode_schedule.cuh): the reference the host tests check for its invariants and
// the GPU tests compare the device's plan with, item by item.
#include <pagedattn/agent/decode_schedule.cuh>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace test {

struct HostPlan {
  pagedattn::PlannedLaunch launch;
  std::vector<pagedattn::PlannedItem> items;
  std::size_t groups = 0; ///< group slots used
};

/// The host's partition size for `segments` segments of max_seq_len tokens (what make_plan passes to
/// schedule_capacity and to the device as host_tokens).
struct UniformItems {
  std::uint64_t segments;
  int length;
  PAGEDATTN_HOST_DEVICE pagedattn::ItemCounts operator()(int t) const { return pagedattn::item_counts_of(length, t, segments); }
};
inline int host_tokens(const pagedattn::ScheduleModel& m, std::size_t segments, int max_seq_len, int fixed_tokens)
{
  return fixed_tokens > 0 ? fixed_tokens : pagedattn::choose_partition_tokens(m, max_seq_len, UniformItems{segments, max_seq_len});
}

/// lens: the sequences' lengths as the device reads them (any int); fixed_tokens > 0: the caller's size;
/// window_left >= 0: a sliding window (each length planned over its window_span at block_size).
inline HostPlan plan_on_host(const std::vector<int>& lens, int segments_per_seq, int max_seq_len, long long table_tokens,
                             const pagedattn::ScheduleModel& m, const pagedattn::ScheduleCapacity& capacity, int fixed_tokens,
                             int group_size, int window_left = -1, int block_size = 16)
{
  using namespace pagedattn;
  std::vector<bool> valid(lens.size());
  std::vector<int> span(lens.size()); // what the plan lays out: 0 where invalid
  int longest = 0;
  for (std::size_t i = 0; i < lens.size(); ++i)
  {
    valid[i] = valid_seq_len(lens[i], max_seq_len, table_tokens);
    span[i] = valid[i] ? window_span(lens[i], window_left, block_size) : 0;
    if (span[i] > longest) { longest = span[i]; }
  }
  auto items_at = [&](int t) {
    ItemCounts n{0, 0, 0};
    for (std::size_t i = 0; i < lens.size(); ++i) { n = combined(n, item_counts_of(span[i], t, std::uint64_t(segments_per_seq))); }
    return n;
  };
  const std::size_t segments = lens.size() * std::size_t(segments_per_seq);
  const std::uint64_t budget = plan_item_budget(m, segments, capacity.items);
  // Every length max_seq_len: the host's own plan (AgentDecodePlan::UniformLaunch), whatever the budget.
  const bool uniform = std::all_of(lens.begin(), lens.end(), [&](int len) { return len == max_seq_len; });
  int t = uniform ? host_tokens(m, segments, window_span(max_seq_len, window_left, block_size), fixed_tokens) : fixed_tokens;
  if (t == 0)
  {
    ScheduleChoice best = ScheduleChoice::none();
    const int top = longest_candidate(longest, m);
    for (int c = 0; c < candidate_count(top); ++c)
    {
      const int tokens = candidate_tokens(top, c);
      const ItemCounts n = items_at(tokens);
      if (n.items > budget) { continue; }
      const ScheduleChoice choice{wave_cost(n, tokens, m), tokens};
      if (choice.beats(best)) { best = choice; }
    }
    t = best.partition_tokens > 0 ? best.partition_tokens : m.max_partition_tokens; // as the device: the limit always fits
  }
  HostPlan plan{};
  plan.launch.partition_tokens = t;
  int first_group = 0;
  for (std::size_t i = 0; i < lens.size(); ++i)
  {
    const SequenceSchedule s = schedule_sequence(span[i], valid[i], t, group_size);
    for (int offset = 0; offset < segments_per_seq * s.items_per_seg; ++offset)
    {
      plan.items.push_back(planned_item(int(i), segments_per_seq, s, offset, first_group, lens[i]));
    }
    if (s.partitions > plan.launch.max_partitions) { plan.launch.max_partitions = s.partitions; }
    first_group += segments_per_seq * s.groups_per_seg;
  }
  plan.launch.total_items = int(plan.items.size());
  plan.groups = std::size_t(first_group);
  return plan;
}

} // namespace test
