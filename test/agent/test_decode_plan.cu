// GPU test of the planning pass (AgentDecodePlan, plan_decode_kernel): the device's plan equals the host
// reference built from the same pieces (decode_schedule_reference.cuh), header and every item, for random
// batches with empty and invalid lengths, more sequences than threads, and a fixed partition size.
#include <pagedattn/device/dispatch/kernels/decode_kernels.cuh>

#include "decode_schedule_reference.cuh"
#include "support/test_support.cuh"

#include <cstring>

namespace {

template <int BlockThreads>
void check_device_plan_equals_host(std::mt19937_64& rng, int trials)
{
  for (int trial = 0; trial < trials; ++trial)
  {
    const int max_seq_len = trial % 3 == 0 ? 8192 : trial % 3 == 1 ? 65536 : 131072;
    const int segments_per_seq = trial % 4 == 0 ? 8 : 4;
    const int fixed = trial % 5 == 0 ? 512 : 0;
    std::vector<int> lens(1 + rng() % (trial % 2 ? 40 : 3000));
    for (int& len : lens)
    {
      const int kind = int(rng() % 10);
      len = kind == 0 ? 0 : kind == 1 ? -1 : kind == 2 ? max_seq_len + 1 : int(rng() % (max_seq_len + 1));
    }
    INFO("trial " << trial << ", " << BlockThreads << " threads: " << lens.size() << " sequences under " << max_seq_len);
    const pagedattn::ScheduleModel model{264, 64, 4096};
    const std::size_t segments = lens.size() * segments_per_seq;
    const auto capacity = pagedattn::schedule_capacity(model, segments, max_seq_len, fixed, 4096, pagedattn::partition_group_size);
    const auto expected =
        test::plan_on_host(lens, segments_per_seq, max_seq_len, max_seq_len, model, capacity, fixed, pagedattn::partition_group_size);

    test::DeviceBuffer<int> d_lens(lens);
    test::DeviceBuffer<pagedattn::PlannedLaunch> d_launch(1);
    test::DeviceBuffer<pagedattn::PlannedItem> d_items(capacity.items);
    test::DeviceBuffer<int> d_snapshot(lens.size());
    test::DeviceBuffer<unsigned> d_words(100);
    d_items.poison();
    d_words.poison();
    const pagedattn::DecodePlanParams params{d_lens.get(), int(lens.size()), segments_per_seq, max_seq_len, max_seq_len, model,
                                             capacity.items, fixed, d_snapshot.get(), d_launch.get(), d_items.get(),
                                             d_words.get(), 100};
    pagedattn::detail::plan_decode_kernel<BlockThreads><<<1, BlockThreads>>>(params);
    CUDA_CHECK_LAUNCH();
    const auto launch = d_launch.download()[0];
    const auto items = d_items.download();
    REQUIRE(launch.partition_tokens == expected.launch.partition_tokens);
    REQUIRE(launch.total_items == expected.launch.total_items);
    REQUIRE(launch.max_partitions == expected.launch.max_partitions);
    REQUIRE(d_snapshot.download() == lens);
    for (unsigned w : d_words.download()) { REQUIRE(w == 0u); } // the look-back words it zeroes
    for (std::size_t i = 0; i < expected.items.size(); ++i)
    {
      INFO("item " << i);
      REQUIRE(std::memcmp(&items[i], &expected.items[i], sizeof(pagedattn::PlannedItem)) == 0);
    }
  }
}

} // namespace

TEST_CASE("planning pass: the device's plan is the host reference's, item by item", "[schedule][gpu]")
{
  GPU_TEST_RNG(rng, 0);
  check_device_plan_equals_host<256>(rng, 60);
  check_device_plan_equals_host<1024>(rng, 60);
}
