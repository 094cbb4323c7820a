// The device's plan (AgentDecodePlan, run by every block of the decode in its prologue) run on the host by
// the emulated CUDA machine of test/emulation (one std::thread per CUDA thread), against the sequential
// host reference: the same partition size, total, largest partition count and the items, asked for in
// order (every one up to 500, then every 7th) and every 97th, at 128 and 256 threads (the decode's blocks on sm_80/sm_90 and on BI-V100). CI has
// no GPU; this is where the block-level code (its scans, reductions, barriers and the cursor) is checked
// there, on many more batches than the whole decode's emulated run (test/emulated/).
#include <pagedattn/agent/agent_decode_plan.cuh>

#include <emulated_launch.h>

#include "decode_schedule_reference.cuh"
#include "support/test_seed.h"

#include <cstring>
#include <vector>

namespace {

template <int BlockThreads>
void check_emulated_plan(std::mt19937_64& rng, int trial)
{
  using namespace pagedattn;
  const int max_seq_len = trial % 3 == 0 ? 8192 : trial % 3 == 1 ? 65536 : 131072;
  const int segments_per_seq = trial % 4 == 0 ? 8 : 4;
  const int fixed = trial % 5 == 0 ? 512 : 0;
  std::vector<int> lens(1 + rng() % (trial % 2 ? 40 : 700)); // (up to 3 chunks of 256)
  for (int& len : lens)
  {
    const int kind = int(rng() % 10);
    len = kind == 0 ? 0 : kind == 1 ? -1 : kind == 2 ? max_seq_len + 1 : int(rng() % (max_seq_len + 1));
  }
  if (trial % 7 == 3) // skewed: a few long sequences among short ones
  {
    for (int& len : lens) { len = rng() % 8 == 0 ? max_seq_len : 100; }
  }
  if (trial % 7 == 5) { lens.assign(lens.size(), max_seq_len); } // uniform at the bound: the fast path
  INFO("trial " << trial << ", " << BlockThreads << " threads, " << lens.size() << " sequences under " << max_seq_len);
  const ScheduleModel model{264, 64, trial % 6 == 5 ? 2048 : 4096};
  const std::size_t segments = lens.size() * segments_per_seq;
  // A sliding window in every third trial (window_span: the plan lays out the window's blocks).
  const int block_size = 8 << (trial % 3);
  const int window_left = trial % 3 == 1 ? int(rng() % (max_seq_len + 2)) : -1;
  INFO("window_left " << window_left << ", block_size " << block_size);
  const int span_bound = window_span_bound(max_seq_len, window_left, block_size);
  const int host = test::host_tokens(model, segments, window_span(max_seq_len, window_left, block_size), fixed); // as make_plan
  const auto capacity = schedule_capacity(model, segments, span_bound, fixed, host, partition_group_size);
  const auto expected = test::plan_on_host(lens, segments_per_seq, max_seq_len, max_seq_len, model, capacity, fixed, partition_group_size,
                                           window_left, block_size);

  const PlannedItem poison{-7, -7, -7, -7, -7, {-7, -7, -7}};
  std::vector<PlannedItem> items(capacity.items, poison), strided(capacity.items, poison);
  PlannedLaunch launch{-1, -1, -1, -1};
  DecodePlanParams params{lens.data(), /*query_start_loc=*/nullptr, /*q_len=*/1, /*num_query_rows=*/0, int(lens.size()), segments_per_seq, max_seq_len, max_seq_len, model, pagedattn::plan_item_budget(model, segments, capacity.items), fixed, host,
                          window_left, block_size, {}};
  params.uniform = pagedattn::uniform_layout_of(params, partition_group_size);
  using Plan = AgentDecodePlan<BlockThreads>;
  static typename Plan::TempStorage temp; // the block's static shared memory
  static typename Plan::CursorState cursor;
  constexpr unsigned stride = 97;
  for (const bool every : {true, false})
  {
    std::memset(&temp, 0x5a, sizeof temp); // garbage, as shared memory starts
    std::memset(&cursor, 0x5a, sizeof cursor);
    emu::LaunchConfig config;
    config.block = BlockThreads;
    emu::launch(config, [&] {
      Plan plan(temp, cursor, params);
      const PlannedLaunch l = plan.ChooseLaunch();
      if (threadIdx.x == 0 && every) { launch = l; }
      // (Every item up to 500, then every 7th: a barrier per item is slow on the emulated machine.)
      for (unsigned i = every ? 0u : 5u; i < static_cast<unsigned>(l.total_items); i += every ? (i < 500 ? 1u : 7u) : stride)
      {
        if (!every) // the storage reused between items, as a persistent decode's fold does
        {
          __syncthreads();
          if (threadIdx.x == 0) { std::memset(&temp, 0x5a, sizeof temp); }
          __syncthreads();
        }
        const PlannedItem item = plan.ItemAt(i);
        if (threadIdx.x == BlockThreads - 1) { (every ? items : strided)[i] = item; }
      }
    });
  }

  REQUIRE(launch.partition_tokens == expected.launch.partition_tokens);
  REQUIRE(launch.total_items == expected.launch.total_items);
  REQUIRE(launch.max_partitions == expected.launch.max_partitions);
  for (std::size_t i = 0; i < expected.items.size(); ++i)
  {
    INFO("item " << i);
    if (i < 500 || (i - 500) % 7 == 0) { REQUIRE(std::memcmp(&items[i], &expected.items[i], sizeof(PlannedItem)) == 0); }
    if (i % stride == 5) { REQUIRE(std::memcmp(&strided[i], &expected.items[i], sizeof(PlannedItem)) == 0); }
  }
}

} // namespace

TEST_CASE("device plan, emulated on the host: the block's plan is the host reference's, item by item", "[schedule][host]")
{
  TEST_RNG(rng, 3);
  for (int trial = 0; trial < 14; ++trial)
  {
    check_emulated_plan<128>(rng, trial);
    check_emulated_plan<256>(rng, trial);
  }
}
