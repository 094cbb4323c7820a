// Host tests of the schedule model (agent/decode_schedule.cuh): its pieces, and the host's partition size
// (detail::choose_partition_tokens), which evaluates the model with every sequence max_seq_len long.
#include <pagedattn/device/dispatch/decode_plan.cuh>
#include <pagedattn/device/dispatch/tuning/tuning_paged_attention.cuh>

#include "support/test_support.cuh"

#include <cuda_fp16.h>

#include <cstdint>

using pagedattn::ScheduleModel;

TEST_CASE("schedule model: partitions and work items of a sequence", "[schedule][host]")
{
  CHECK(pagedattn::partitions_of(0, 32) == 0);
  CHECK(pagedattn::partitions_of(-5, 32) == 0);
  CHECK(pagedattn::partitions_of(1, 32) == 1);
  CHECK(pagedattn::partitions_of(32, 32) == 1);
  CHECK(pagedattn::partitions_of(33, 32) == 2);
  CHECK(pagedattn::partitions_of(100000, 1536) == 66);
  CHECK(pagedattn::partitions_of(0x7fffffff, 32) == 67108864); // no overflow at the largest length
  CHECK(pagedattn::items_of(0, 64) == 1);  // an empty sequence: one block writes its zeros
  CHECK(pagedattn::items_of(-1, 64) == 1); // an invalid one: one block writes its NaN
  CHECK(pagedattn::items_of(65, 64) == 2);
  // fp16 at head 256: 1 KB of K and V per token, so the 64 KB fixed cost is 64 tokens.
  CHECK(pagedattn::fixed_cost_tokens(256, 2) == 64);
  CHECK(pagedattn::fixed_cost_tokens(128, 4) == 64);
  CHECK(pagedattn::fixed_cost_tokens(80, 2) == 205); // rounded up
}

TEST_CASE("schedule model: candidates are the multiples of 32 from the longest sequence down to 32", "[schedule][host]")
{
  const ScheduleModel m{264, 64, 4096};
  CHECK(pagedattn::longest_candidate(0, m) == 32);
  CHECK(pagedattn::longest_candidate(1, m) == 32);
  CHECK(pagedattn::longest_candidate(33, m) == 64);
  CHECK(pagedattn::longest_candidate(1000, m) == 1024);
  CHECK(pagedattn::longest_candidate(100000, m) == 4096);
  CHECK(pagedattn::longest_candidate(4096, m) == 4096);
  CHECK(pagedattn::longest_candidate(4065, m) == 4096);
  CHECK(pagedattn::longest_candidate(0x7fffffff, m) == 4096); // no overflow in the rounding
  CHECK(pagedattn::candidate_count(32) == 1);
  CHECK(pagedattn::candidate_count(4096) == 128);
  CHECK(pagedattn::candidate_tokens(4096, 127) == 32);
}

TEST_CASE("schedule model: ties go to the longer partition, in any order of comparison", "[schedule][host]")
{
  const pagedattn::ScheduleChoice a{100, 512}, b{100, 256}, c{90, 32};
  CHECK(a.beats(b));
  CHECK_FALSE(b.beats(a));
  CHECK(c.beats(a));
  CHECK(a.beats(pagedattn::ScheduleChoice::none()));
  CHECK_FALSE(a.beats(a));
}

// The host's model as bench/NOTES.md v21 states it, written out on its own: a launch of
// segments x ceil(max_seq_len / t) blocks, ceil(blocks / wave) waves of t + fixed tokens each.
static int reference_choice(int max_seq_len, std::size_t segments, int wave, int fixed, int limit)
{
  const std::uint64_t length = max_seq_len > 0 ? max_seq_len : 1;
  const std::uint64_t whole = (length + 31) / 32 * 32;
  const std::uint64_t longest = whole < std::uint64_t(limit) ? whole : limit;
  std::uint64_t best = longest, best_cost = ~std::uint64_t{0};
  for (std::uint64_t t = longest; t >= 32; t -= 32)
  {
    const std::uint64_t blocks = segments * ((length + t - 1) / t);
    const std::uint64_t cost = (blocks + wave - 1) / wave * (t + fixed);
    if (cost < best_cost) { best_cost = cost; best = t; }
  }
  return static_cast<int>(best);
}

TEST_CASE("host partition size: the schedule model at max_seq_len equals the wave model of bench/NOTES.md", "[schedule][host]")
{
  using P = pagedattn::PagedAttentionPolicySm90;
  TEST_RNG(rng, 0);
  for (int trial = 0; trial < 4000; ++trial)
  {
    pagedattn::DecodeArguments<__half> a{};
    a.head_size = trial % 3 == 0 ? 128 : 256;
    a.block_size = trial % 5 == 0 ? 8 : 16;
    const int shape = trial % 4;
    a.max_seq_len = shape == 0 ? int(rng() % 64) : shape == 1 ? int(rng() % 5000) : int(rng() % 200000);
    const std::size_t segments = 1 + rng() % (trial % 2 ? 64 : 4096);
    const int sms = trial % 7 == 0 ? 1 : 108 + int(rng() % 40);
    INFO("max_seq_len " << a.max_seq_len << ", " << segments << " segments, " << sms << " SMs, head " << a.head_size);
    const int fixed = pagedattn::fixed_cost_tokens(a.head_size, 2);
    CHECK(pagedattn::detail::choose_partition_tokens<P>(a, segments, sms) ==
          reference_choice(a.max_seq_len, segments, sms * P::min_blocks_per_sm, fixed, pagedattn::detail::partition_token_limit<P>(a.block_size)));
  }
}
