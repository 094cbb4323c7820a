// Host tests of the combiner's host-side logic: temporary-storage layout and the ticket -> tile mapping.
#include <pagedattn/agent/partition_tile_state.cuh>

#include "support/test_support.cuh"

using pagedattn::PartitionTileLayout;

TEST_CASE("tile layout: aligned, disjoint regions sized for every tile", "[combine][host]")
{
  for (std::size_t tiles : {std::size_t(1), std::size_t(7), std::size_t(784), std::size_t(1) << 20})
  {
    for (int heads : {1, 6, 8})
    {
      for (int head_dim : {64, 80, 256})
      {
        INFO(tiles << " tiles, " << heads << " heads, head_dim " << head_dim);
        const PartitionTileLayout l(tiles, heads, head_dim);
        const std::size_t stats = tiles * heads * 2 * sizeof(float), values = tiles * heads * head_dim * sizeof(float);
        for (std::size_t off : {l.status_offset, l.agg_stats_offset, l.agg_values_offset, l.inc_stats_offset, l.inc_values_offset})
        {
          CHECK(off % PartitionTileLayout::alignment == 0);
        }
        CHECK(l.status_offset >= l.ticket_offset + sizeof(unsigned));
        CHECK(l.reset_bytes == l.status_offset + tiles * sizeof(unsigned));
        CHECK(l.agg_stats_offset >= l.reset_bytes);
        CHECK(l.agg_values_offset >= l.agg_stats_offset + stats);
        CHECK(l.inc_stats_offset >= l.agg_values_offset + values);
        CHECK(l.inc_values_offset >= l.inc_stats_offset + stats);
        CHECK(l.total_bytes >= l.inc_values_offset + values);
        CHECK(l.total_bytes < l.inc_values_offset + values + PartitionTileLayout::alignment);
      }
    }
  }
}

TEST_CASE("ticket -> tile: consecutive tickets are consecutive partitions of one segment", "[combine][host]")
{
  for (int max_partitions : {1, 2, 31, 196, 2048})
  {
    INFO("max_partitions " << max_partitions);
    unsigned ticket = 0;
    for (int s = 0; s < 5; ++s)
    {
      for (int q = 0; q < max_partitions; ++q, ++ticket)
      {
        const auto c = pagedattn::tile_of_ticket(ticket, max_partitions);
        REQUIRE(c.segment == s);
        REQUIRE(c.partition == q);
        REQUIRE(c.first_tile(max_partitions) + c.partition == ticket);
      }
    }
  }
}
