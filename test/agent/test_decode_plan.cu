// GPU test of the device's plan (AgentDecodePlan, which every block of the decode runs in its prologue):
// the plan equals the host reference built from the same pieces (decode_schedule_reference.cuh), header
// and every item, for random batches with empty and invalid lengths, more sequences than threads, and a
// fixed partition size. One block asks for every item in order, another for every 97th (the cursor skips
// chunks, and reloads its chunk before each item), as the decode's blocks do with their tickets.
#include <pagedattn/agent/agent_decode_plan.cuh>

#include "decode_schedule_reference.cuh"
#include "support/test_support.cuh"

#include <cstring>

namespace {

constexpr unsigned item_stride = 97;

template <int BlockThreads>
__global__ void plan_items_kernel(const pagedattn::DecodePlanParams params, pagedattn::PlannedLaunch* launch,
                                  pagedattn::PlannedItem* every_item, pagedattn::PlannedItem* strided_items)
{
  using Plan = pagedattn::AgentDecodePlan<BlockThreads>;
  __shared__ typename Plan::TempStorage temp;
  __shared__ typename Plan::CursorState cursor;
  Plan plan(temp, cursor, params);
  const pagedattn::PlannedLaunch l = plan.ChooseLaunch();
  if (blockIdx.x == 0 && threadIdx.x == 0) { *launch = l; }
  const unsigned total = static_cast<unsigned>(l.total_items);
  const unsigned step = blockIdx.x == 0 ? 1u : item_stride;
  pagedattn::PlannedItem* out = blockIdx.x == 0 ? every_item : strided_items;
  for (unsigned i = blockIdx.x == 0 ? 0u : 5u; i < total; i += step)
  {
    if (blockIdx.x == 1) // the storage reused between items, as a persistent decode's fold does
    {
      for (int w = threadIdx.x; w < int(sizeof(temp) / sizeof(int)); w += BlockThreads) { reinterpret_cast<int*>(&temp)[w] = 0x5a5a5a5a + w; }
      __syncthreads();
    }
    const pagedattn::PlannedItem item = plan.ItemAt(i);
    if (threadIdx.x == BlockThreads - 1) { out[i] = item; } // (every thread holds it: the last one writes)
  }
}

template <int BlockThreads>
void check_device_plan_equals_host(std::mt19937_64& rng, int trials)
{
  for (int trial = 0; trial < trials; ++trial)
  {
    const int max_seq_len = trial % 3 == 0 ? 8192 : trial % 3 == 1 ? 65536 : 131072;
    const int segments_per_seq = trial % 4 == 0 ? 8 : 4;
    const int fixed = trial % 5 == 0 ? 512 : 0;
    std::vector<int> lens(1 + rng() % (trial % 2 ? 40 : test::reduced_matrix() ? 300 : 3000));
    for (int& len : lens)
    {
      const int kind = int(rng() % 10);
      len = kind == 0 ? 0 : kind == 1 ? -1 : kind == 2 ? max_seq_len + 1 : int(rng() % (max_seq_len + 1));
    }
    if (trial % 7 == 5) { lens.assign(lens.size(), max_seq_len); } // uniform at the bound: the fast path
    INFO("trial " << trial << ", " << BlockThreads << " threads: " << lens.size() << " sequences under " << max_seq_len);
    const pagedattn::ScheduleModel model{264, 64, 4096};
    const std::size_t segments = lens.size() * segments_per_seq;
    const int host = test::host_tokens(model, segments, max_seq_len, fixed); // as make_plan
    const auto capacity = pagedattn::schedule_capacity(model, segments, max_seq_len, fixed, host, pagedattn::partition_group_size);
    const auto expected =
        test::plan_on_host(lens, segments_per_seq, max_seq_len, max_seq_len, model, capacity, fixed, pagedattn::partition_group_size);

    test::DeviceBuffer<int> d_lens(lens);
    test::DeviceBuffer<pagedattn::PlannedLaunch> d_launch(1);
    test::DeviceBuffer<pagedattn::PlannedItem> d_items(capacity.items), d_strided(capacity.items);
    d_items.poison();
    d_strided.poison();
    pagedattn::DecodePlanParams params{d_lens.get(), /*query_start_loc=*/nullptr, /*q_len=*/1, /*num_query_rows=*/0, int(lens.size()), segments_per_seq, max_seq_len, max_seq_len, model,
                                       pagedattn::plan_item_budget(model, segments, capacity.items), fixed, host, /*window_left=*/-1,
                                       /*block_size=*/16, {}};
    params.uniform = pagedattn::uniform_layout_of(params, pagedattn::partition_group_size);
    plan_items_kernel<BlockThreads><<<2, BlockThreads>>>(params, d_launch.get(), d_items.get(), d_strided.get());
    CUDA_CHECK_LAUNCH();
    const auto launch = d_launch.download()[0];
    const auto items = d_items.download();
    const auto strided = d_strided.download();
    REQUIRE(launch.partition_tokens == expected.launch.partition_tokens);
    REQUIRE(launch.total_items == expected.launch.total_items);
    REQUIRE(launch.max_partitions == expected.launch.max_partitions);
    for (std::size_t i = 0; i < expected.items.size(); ++i)
    {
      INFO("item " << i);
      REQUIRE(std::memcmp(&items[i], &expected.items[i], sizeof(pagedattn::PlannedItem)) == 0);
      if (i % item_stride == 5) { REQUIRE(std::memcmp(&strided[i], &expected.items[i], sizeof(pagedattn::PlannedItem)) == 0); }
    }
  }
}

} // namespace

TEST_CASE("device plan: every block's plan is the host reference's, item by item", "[schedule][gpu]")
{
  GPU_TEST_RNG(rng, 0);
  const int trials = test::reduced_matrix() ? 6 : 60; // (the sanitizers' run: fewer)
  check_device_plan_equals_host<128>(rng, trials);
  check_device_plan_equals_host<256>(rng, trials);
}
