#pragma once
// Level 3 state: where the partition combiner keeps its tile status words and partial values.
//
// One "tile" is one KV partition of one segment (a segment is a (sequence, KV head, head group) whose
// partitions are merged into one output). Tiles are numbered segment-major:
//     tile = segment * max_partitions + partition
// Each tile has a status word and two values of `heads` partials (fp32 stats and weighted_v[head_dim]):
// its own aggregate and, once known, its inclusive prefix (the left fold of partitions 0..p).
// All of it lives in the caller's temporary storage (CUB's two-phase API); PartitionTileLayout computes
// the byte offsets on the host and the device alike.
#include <cstddef>
#include <cstdint>

#include <pagedattn/config.cuh>

namespace pagedattn {

/// Status of a tile's published value. The status words are zeroed (INVALID) by the dispatch at the
/// start of every launch, in the same stream (so CUDA-graph replays reset them too).
enum TileStatus : unsigned {
  tile_status_invalid = 0,   ///< nothing published yet
  tile_status_aggregate = 1, ///< aggregate value readable
  tile_status_inclusive = 2, ///< inclusive value readable (and the aggregate too, unless partition 0)
};

/// Byte layout of the combiner's temporary storage.
struct PartitionTileLayout {
  static constexpr std::size_t alignment = 256;

  std::size_t num_tiles = 0;  ///< num_segments * max_partitions
  int heads = 0;              ///< partials per tile (query heads of one segment)
  int head_dim = 0;

  // Offsets in bytes from the start of the temporary storage.
  std::size_t ticket_offset = 0;     ///< unsigned ticket counter (zeroed per launch with the statuses)
  std::size_t status_offset = 0;     ///< unsigned[num_tiles]
  std::size_t reset_bytes = 0;       ///< bytes from 0 to zero per launch: ticket + statuses
  std::size_t agg_stats_offset = 0;  ///< float2[num_tiles][heads] (max_score, exp_sum)
  std::size_t agg_values_offset = 0; ///< float[num_tiles][heads][head_dim]
  std::size_t inc_stats_offset = 0;
  std::size_t inc_values_offset = 0;
  std::size_t total_bytes = 0;

  PAGEDATTN_HOST_DEVICE static std::size_t align_up(std::size_t n) { return (n + alignment - 1) / alignment * alignment; }

  PartitionTileLayout() = default;
  PAGEDATTN_HOST_DEVICE PartitionTileLayout(std::size_t tiles, int heads_, int head_dim_)
      : num_tiles(tiles), heads(heads_), head_dim(head_dim_)
  {
    const std::size_t stats_bytes = align_up(tiles * heads * 2 * sizeof(float));
    const std::size_t values_bytes = align_up(tiles * heads * static_cast<std::size_t>(head_dim) * sizeof(float));
    ticket_offset = 0;
    status_offset = alignment; // the ticket gets a 256-byte line of its own
    reset_bytes = status_offset + tiles * sizeof(unsigned);
    agg_stats_offset = align_up(reset_bytes);
    agg_values_offset = agg_stats_offset + stats_bytes;
    inc_stats_offset = agg_values_offset + values_bytes;
    inc_values_offset = inc_stats_offset + stats_bytes;
    total_bytes = inc_values_offset + values_bytes;
  }
};

/// The (segment, partition) a block works on, from the ticket it drew when it started. Consecutive tickets
/// are consecutive partitions of one segment, so a block that looks back only waits on blocks that drew
/// smaller tickets, i.e. that have already started.
struct TileCoordinates {
  int segment;
  int partition;
  PAGEDATTN_HOST_DEVICE std::size_t first_tile(int max_partitions) const { return static_cast<std::size_t>(segment) * max_partitions; }
};
PAGEDATTN_HOST_DEVICE TileCoordinates tile_of_ticket(unsigned ticket, int max_partitions)
{
  return {static_cast<int>(ticket / static_cast<unsigned>(max_partitions)), static_cast<int>(ticket % static_cast<unsigned>(max_partitions))};
}

/// Typed view of the storage described by a PartitionTileLayout.
struct PartitionTileState {
  unsigned* ticket;
  unsigned* status;
  float* agg_stats;
  float* agg_values;
  float* inc_stats;
  float* inc_values;
  int heads;
  int head_dim;

  PAGEDATTN_HOST_DEVICE static PartitionTileState bind(void* storage, const PartitionTileLayout& layout)
  {
    char* base = static_cast<char*>(storage);
    return {reinterpret_cast<unsigned*>(base + layout.ticket_offset),
            reinterpret_cast<unsigned*>(base + layout.status_offset),
            reinterpret_cast<float*>(base + layout.agg_stats_offset),
            reinterpret_cast<float*>(base + layout.agg_values_offset),
            reinterpret_cast<float*>(base + layout.inc_stats_offset),
            reinterpret_cast<float*>(base + layout.inc_values_offset),
            layout.heads,
            layout.head_dim};
  }

  PAGEDATTN_HOST_DEVICE std::size_t values_per_tile() const { return static_cast<std::size_t>(heads) * head_dim; }
  PAGEDATTN_HOST_DEVICE float* stats(bool inclusive, std::size_t tile) const { return (inclusive ? inc_stats : agg_stats) + tile * heads * 2; }
  PAGEDATTN_HOST_DEVICE float* values(bool inclusive, std::size_t tile) const { return (inclusive ? inc_values : agg_values) + tile * values_per_tile(); }
};

} // namespace pagedattn
