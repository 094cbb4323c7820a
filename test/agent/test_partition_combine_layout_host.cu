// Host tests of the combiner's host-side logic: temporary-storage layout and the ticket -> work item mapping.
#include <pagedattn/agent/partition_combine_state.cuh>

#include "support/test_support.cuh"

using pagedattn::PartitionCombineLayout;

TEST_CASE("combine layout: aligned, disjoint regions sized for every partial and group", "[combine][host]")
{
  for (std::size_t segments : {std::size_t(1), std::size_t(7), std::size_t(256), std::size_t(1) << 14})
  {
    for (int max_partitions : {1, 2, 16, 17, 196, 2048})
    {
      for (int heads : {1, 6, 8})
      {
        const int head_dim = 256;
        INFO(segments << " segments, " << max_partitions << " partitions, " << heads << " heads");
        const PartitionCombineLayout l(segments, max_partitions, heads, head_dim);
        const std::size_t partials = segments * max_partitions;
        const std::size_t groups = segments * l.max_groups;
        CHECK(l.max_groups == (max_partitions + pagedattn::partition_group_size - 1) / pagedattn::partition_group_size);
        for (std::size_t off : {l.arrivals_offset, l.status_offset, l.partial_stats_offset, l.partial_values_offset, l.group_stats_offset,
                                l.group_values_offset, l.total_bytes})
        {
          CHECK(off % PartitionCombineLayout::alignment == 0);
        }
        CHECK(l.arrivals_offset >= l.ticket_offset + sizeof(unsigned));
        CHECK(l.status_offset >= l.arrivals_offset + groups * sizeof(unsigned));
        CHECK(l.reset_bytes == l.status_offset + groups * sizeof(unsigned)); // ticket..statuses, zeroed per launch
        CHECK(l.partial_stats_offset >= l.reset_bytes);
        CHECK(l.partial_values_offset >= l.partial_stats_offset + partials * heads * 2 * sizeof(float));
        CHECK(l.group_stats_offset >= l.partial_values_offset + partials * heads * head_dim * sizeof(float));
        CHECK(l.group_values_offset >= l.group_stats_offset + 2 * groups * heads * 2 * sizeof(float));
        CHECK(l.total_bytes >= l.group_values_offset + 2 * groups * heads * head_dim * sizeof(float));

        // Views of the last partial and group end inside the storage.
        static char base_storage[1];
        const auto st = pagedattn::PartitionCombineState::bind(base_storage, l);
        const auto last_partial = st.partial(st.slots(int(segments) - 1), max_partitions - 1);
        const auto last_group = st.group(st.slots(int(segments) - 1), l.max_groups - 1, true);
        CHECK(reinterpret_cast<char*>(last_partial.values + heads * head_dim) <= base_storage + l.group_stats_offset);
        CHECK(reinterpret_cast<char*>(last_group.values + heads * head_dim) <= base_storage + l.total_bytes);
      }
    }
  }
}

TEST_CASE("ticket -> work item: consecutive tickets are consecutive partitions of one segment", "[combine][host]")
{
  for (int max_partitions : {1, 2, 31, 196, 2048})
  {
    INFO("max_partitions " << max_partitions);
    unsigned ticket = 0;
    for (int s = 0; s < 5; ++s)
    {
      for (int q = 0; q < max_partitions; ++q, ++ticket)
      {
        const auto c = pagedattn::work_item_of_ticket(ticket, max_partitions);
        REQUIRE(c.segment == s);
        REQUIRE(c.partition == q);
        REQUIRE(c.first_partial(max_partitions) + c.partition == ticket);
      }
    }
  }
}
