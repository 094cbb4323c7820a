#pragma once
// Level 3 state: where the partition combiner keeps its counters, status words and partial values.
//
// A segment is one (sequence, KV head, head part) whose KV partitions merge into one output. Its
// partitions are numbered 0..P-1 and grouped in fixed runs of partition_group_size. Its partials occupy
// consecutive slots from its first partial slot, its groups consecutive slots from its first group slot
// (SegmentSlots): in a fixed layout segment s starts at s * max_partitions and s * max_groups; a launch
// planned on the device packs the segments back to back.
// Each thread block stores its partial (one per head: fp32 stats and weighted_v[head_dim]). Each group has
// an arrival counter, a status word and two values: its aggregate (the fold of its partials) and, once
// known, its inclusive prefix (the fold of groups 0..g). All of it lives in the caller's temporary
// storage (CUB's two-phase API); PartitionCombineLayout computes the offsets on the host and device alike.
#include <cstddef>
#include <cstdint>

#include <pagedattn/config.cuh>

namespace pagedattn {

/// Partitions per group: the last of a group to finish folds the group (<= this many partials, one L2
/// round trip), then the groups are merged by decoupled look-back. 8 keeps a group fold to one round trip
/// with the values of all of its partials in registers.
inline constexpr int partition_group_size = 8;

/// Status of a group's published value. Zeroed (INVALID) with the counters before every launch that
/// combines by look-back (the init pass), in the same stream (so CUDA-graph replays reset them too).
enum GroupStatus : unsigned {
  group_status_invalid = 0,   ///< nothing published yet
  group_status_aggregate = 1, ///< group aggregate readable
  group_status_inclusive = 2, ///< group inclusive prefix readable
};

/// Byte layout of the combiner's temporary storage.
struct PartitionCombineLayout {
  static constexpr std::size_t alignment = 256;

  std::size_t num_segments = 0;
  int max_partitions = 0;
  int max_groups = 0;
  int heads = 0; ///< heads per stored partial (query heads of one segment)
  int head_dim = 0;

  // Offsets in bytes from the start of the temporary storage.
  std::size_t ticket_offset = 0;       ///< unsigned ticket counter
  std::size_t arrivals_offset = 0;     ///< unsigned[num_segments * max_groups]
  std::size_t status_offset = 0;       ///< unsigned[num_segments * max_groups]
  std::size_t reset_bytes = 0;         ///< bytes from 0 the init pass zeroes: ticket, arrivals, statuses
  std::size_t partial_stats_offset = 0;   ///< float2[partials][heads] (max_score, exp_sum)
  std::size_t partial_values_offset = 0;  ///< float[partials][heads][head_dim]
  std::size_t group_stats_offset = 0;  ///< [2 (aggregate, inclusive)][groups][heads] float2
  std::size_t group_values_offset = 0; ///< [2][groups][heads][head_dim] float
  std::size_t total_bytes = 0;

  PAGEDATTN_HOST_DEVICE static std::size_t align_up(std::size_t n) { return (n + alignment - 1) / alignment * alignment; }

  std::size_t partial_slots = 0; ///< partials the storage holds
  std::size_t group_slots = 0;   ///< combine groups the storage holds

  PartitionCombineLayout() = default;
  /// num_segments segments of up to max_partitions partitions each, segment s at partial slot
  /// s * max_partitions and group slot s * max_groups (PartitionCombineState::slots).
  PAGEDATTN_HOST_DEVICE PartitionCombineLayout(std::size_t segments, int max_partitions_, int heads_, int head_dim_)
      : num_segments(segments), max_partitions(max_partitions_),
        max_groups((max_partitions_ + partition_group_size - 1) / partition_group_size), heads(heads_), head_dim(head_dim_)
  {
    place(segments * static_cast<std::size_t>(max_partitions), segments * static_cast<std::size_t>(max_groups));
  }
  /// Storage for partial_slots partials and group_slots groups, wherever each segment's are (a launch
  /// planned on the device says so per work item: SegmentSlots).
  PAGEDATTN_HOST_DEVICE static PartitionCombineLayout for_slots(std::size_t partial_slots, std::size_t group_slots, int heads, int head_dim)
  {
    PartitionCombineLayout l;
    l.heads = heads;
    l.head_dim = head_dim;
    l.place(partial_slots, group_slots);
    return l;
  }

private:
  PAGEDATTN_HOST_DEVICE void place(std::size_t partials, std::size_t groups)
  {
    partial_slots = partials;
    group_slots = groups;
    const std::size_t partial_floats = static_cast<std::size_t>(heads) * head_dim;
    ticket_offset = 0;
    arrivals_offset = alignment; // the ticket gets a 256-byte line of its own
    status_offset = align_up(arrivals_offset + groups * sizeof(unsigned));
    reset_bytes = status_offset + groups * sizeof(unsigned);
    partial_stats_offset = align_up(reset_bytes);
    partial_values_offset = partial_stats_offset + align_up(partials * heads * 2 * sizeof(float));
    group_stats_offset = partial_values_offset + align_up(partials * partial_floats * sizeof(float));
    group_values_offset = group_stats_offset + align_up(2 * groups * heads * 2 * sizeof(float));
    total_bytes = group_values_offset + align_up(2 * groups * partial_floats * sizeof(float));
  }
};

/// The (segment, partition) a block works on, from the ticket it drew when it started. Consecutive tickets
/// are consecutive partitions of one segment, so a block that looks back only waits on blocks that drew
/// smaller tickets, i.e. that have already started.
struct WorkItem {
  int segment;
  int partition;
  PAGEDATTN_HOST_DEVICE std::size_t first_partial(int max_partitions) const { return static_cast<std::size_t>(segment) * max_partitions; }
};
PAGEDATTN_HOST_DEVICE WorkItem work_item_of_ticket(unsigned ticket, int max_partitions)
{
  return {static_cast<int>(ticket / static_cast<unsigned>(max_partitions)), static_cast<int>(ticket % static_cast<unsigned>(max_partitions))};
}

/// Where a segment's partials and combine groups live: its first partial slot and its first group slot.
/// Partials 0..P-1 of the segment are consecutive slots from first_partial, its groups consecutive slots
/// from first_group.
struct SegmentSlots {
  std::size_t first_partial;
  std::size_t first_group;
};

/// A stored partial value: stats [heads][2] and values [heads][head_dim].
struct PartialRef {
  float* stats;
  float* values;
};

/// Typed view of the storage described by a PartitionCombineLayout.
struct PartitionCombineState {
  unsigned* ticket;
  unsigned* arrivals;
  unsigned* status;
  float* partial_stats;
  float* partial_values;
  float* group_stats;
  float* group_values;
  std::size_t num_groups; ///< group slots (num_segments * max_groups for a fixed layout)
  int max_partitions;
  int max_groups;
  int heads;
  int head_dim;

  PAGEDATTN_HOST_DEVICE static PartitionCombineState bind(void* storage, const PartitionCombineLayout& l)
  {
    char* base = static_cast<char*>(storage);
    return {reinterpret_cast<unsigned*>(base + l.ticket_offset),
            reinterpret_cast<unsigned*>(base + l.arrivals_offset),
            reinterpret_cast<unsigned*>(base + l.status_offset),
            reinterpret_cast<float*>(base + l.partial_stats_offset),
            reinterpret_cast<float*>(base + l.partial_values_offset),
            reinterpret_cast<float*>(base + l.group_stats_offset),
            reinterpret_cast<float*>(base + l.group_values_offset),
            l.group_slots,
            l.max_partitions,
            l.max_groups,
            l.heads,
            l.head_dim};
  }

  PAGEDATTN_HOST_DEVICE std::size_t partial_floats() const { return static_cast<std::size_t>(heads) * head_dim; }
  /// The slots of segment `segment` in a fixed layout (segments of max_partitions partials).
  PAGEDATTN_HOST_DEVICE SegmentSlots slots(int segment) const
  {
    return {static_cast<std::size_t>(segment) * max_partitions, static_cast<std::size_t>(segment) * max_groups};
  }
  PAGEDATTN_HOST_DEVICE std::size_t partial_index(const SegmentSlots& segment, int partition) const { return segment.first_partial + partition; }
  PAGEDATTN_HOST_DEVICE std::size_t group_index(const SegmentSlots& segment, int group) const { return segment.first_group + group; }

  PAGEDATTN_HOST_DEVICE PartialRef partial(const SegmentSlots& segment, int partition) const
  {
    const std::size_t t = partial_index(segment, partition);
    return {partial_stats + t * heads * 2, partial_values + t * partial_floats()};
  }
  /// inclusive == false: the group's aggregate; true: its inclusive prefix.
  PAGEDATTN_HOST_DEVICE PartialRef group(const SegmentSlots& segment, int group, bool inclusive) const
  {
    const std::size_t g = (inclusive ? num_groups : 0) + group_index(segment, group);
    return {group_stats + g * heads * 2, group_values + g * partial_floats()};
  }
};

} // namespace pagedattn
