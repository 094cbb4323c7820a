// Host tests of the schedule model (agent/decode_schedule.cuh): its pieces, and the host's partition size
// (detail::choose_partition_tokens), which evaluates the model with every sequence max_seq_len long.
#include <pagedattn/device/dispatch/decode_plan.cuh>
#include <pagedattn/device/dispatch/tuning/tuning_paged_attention.cuh>

#include "decode_schedule_reference.cuh"
#include "support/test_support.cuh"

#include <algorithm>
#include <map>
#include <set>

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

TEST_CASE("query offsets: each sequence's rows, invalid ones clamped into range, what the plan reads", "[schedule][host][q_len]")
{
  using pagedattn::query_span;
  // Without offsets: q_len rows from s * q_len.
  CHECK(query_span(nullptr, 5, 3, 0).first == 15);
  CHECK(query_span(nullptr, 5, 3, 0).count == 3);
  // Lengths 2, 0, 4, 1 of at most 4.
  const int good[] = {0, 2, 2, 6, 7};
  const int expect_first[] = {0, 2, 2, 6}, expect_count[] = {2, 0, 4, 1};
  for (int s = 0; s < 4; ++s)
  {
    const pagedattn::QuerySpan span = query_span(good, s, 4, 7);
    CHECK(span.valid);
    CHECK(span.first == expect_first[s]);
    CHECK(span.count == expect_count[s]);
  }
  CHECK_FALSE(query_span(good, 3, 4, 6).valid); // past the rows: clamped to them
  CHECK(query_span(good, 3, 4, 6).first == 6);
  CHECK(query_span(good, 3, 4, 6).count == 0);
  CHECK_FALSE(query_span(good, 2, 3, 7).valid); // more than q_len rows: the first q_len get NaN
  CHECK(query_span(good, 2, 3, 7).count == 3);
  const int not_zero[] = {1, 3};
  CHECK_FALSE(query_span(not_zero, 0, 4, 8).valid);
  CHECK(query_span(not_zero, 0, 4, 8).first == 1);
  const int decreasing[] = {0, 4, 2, 6};
  CHECK(query_span(decreasing, 0, 4, 8).valid);
  CHECK_FALSE(query_span(decreasing, 1, 4, 8).valid); // its end is before its start: no rows
  CHECK(query_span(decreasing, 1, 4, 8).count == 0);
  CHECK_FALSE(query_span(decreasing, 2, 4, 8).valid); // it starts before the previous sequence
  const int negative[] = {0, -5, -3, 1 << 30, 0x7fffffff};
  for (int s = 1; s < 4; ++s)
  {
    const pagedattn::QuerySpan span = query_span(negative, s, 8, 100);
    CHECK_FALSE(span.valid);
    CHECK(span.first >= 0);
    CHECK(span.count >= 0);
    CHECK(span.first + span.count <= 100);
    CHECK(span.count <= 8);
  }
  const int below_zero[] = {0, -5, -3, -1}; // non-decreasing from sequence 1 on, but before row 0
  CHECK_FALSE(query_span(below_zero, 2, 4, 8).valid);
  CHECK(query_span(below_zero, 2, 4, 8).first == 0);
  CHECK(query_span(below_zero, 2, 4, 8).count == 0);
  // What the plan reads: the length, 0 without rows, -1 where the offsets are invalid; at the bound only with
  // the length max_seq_len and q_len rows.
  const int lens[] = {50, 50, 50, 50};
  pagedattn::DecodePlanParams p{};
  p.seq_lens = lens;
  p.max_seq_len = 50;
  p.query_start_loc = good;
  p.q_len = 4;
  p.num_query_rows = 7;
  CHECK(pagedattn::planned_length(p, 0).len == 50);
  CHECK_FALSE(pagedattn::planned_length(p, 0).at_bound); // two rows of four
  CHECK(pagedattn::planned_length(p, 1).len == 0);
  CHECK(pagedattn::planned_length(p, 2).len == 50);
  CHECK(pagedattn::planned_length(p, 2).at_bound);
  p.num_query_rows = 6;
  CHECK(pagedattn::planned_length(p, 3).len == -1);
  p.query_start_loc = nullptr;
  CHECK(pagedattn::planned_length(p, 3).at_bound);
}

TEST_CASE("sliding windows: the fold start, the span and the host's bound", "[schedule][host][window]")
{
  using pagedattn::window_first_visible;
  using pagedattn::window_fold_start;
  using pagedattn::window_span;
  CHECK(window_first_visible(100, -1) == 0);
  CHECK(window_first_visible(100, 0) == 99); // the token itself
  CHECK(window_first_visible(100, 99) == 0);
  CHECK(window_first_visible(100, 1 << 30) == 0);
  CHECK(window_first_visible(0, 5) == 0);
  CHECK(window_fold_start(100, 40, 16) == 48); // first visible 59, its block's first token
  CHECK(window_span(100, 40, 16) == 52);
  CHECK(window_span(100, -1, 16) == 100);
  CHECK(window_span(0x7fffffff, 0, 32) == 31); // first visible 2^31 - 2 = 32k + 30: no overflow at the largest length
  // Every length and window: the fold start lies on a block boundary at most one block before the first
  // visible token, and the span never exceeds window_span_bound, which some length reaches.
  for (int block_size : {8, 16, 32})
  {
    for (int window_left : {-1, 0, 1, 7, 8, 31, 100})
    {
      for (int max_seq_len : {0, 1, 9, 40, 200})
      {
        int longest = 0;
        for (int len = 0; len <= max_seq_len; ++len)
        {
          const int start = window_fold_start(len, window_left, block_size), first = window_first_visible(len, window_left);
          INFO("block " << block_size << " window " << window_left << " len " << len);
          REQUIRE(start % block_size == 0);
          REQUIRE(start <= first);
          REQUIRE(first - start < block_size);
          REQUIRE((len == 0 || first < len));
          longest = std::max(longest, window_span(len, window_left, block_size));
        }
        INFO("block " << block_size << " window " << window_left << " max_seq_len " << max_seq_len);
        REQUIRE(pagedattn::window_span_bound(max_seq_len, window_left, block_size) == longest);
      }
    }
  }
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

// The host's model as bench/NOTES.md, "Partition size: the wave model", states it,
// written out on its own: a launch of segments x ceil(max_seq_len / t) blocks, of which segments x
// floor(max_seq_len / t) fold t tokens: ceil(full / wave) waves of t + fixed tokens, then the blocks the
// full waves leave over, in waves of the short partition (max_seq_len mod t) + fixed tokens.
static int reference_choice(int max_seq_len, std::size_t segments, int wave, int fixed, int limit)
{
  const std::uint64_t length = max_seq_len > 0 ? max_seq_len : 1;
  const std::uint64_t whole = (length + 31) / 32 * 32;
  const std::uint64_t longest = whole < std::uint64_t(limit) ? whole : limit;
  std::uint64_t best = longest, best_cost = ~std::uint64_t{0};
  for (std::uint64_t t = longest; t >= 32; t -= 32)
  {
    const std::uint64_t blocks = segments * ((length + t - 1) / t), full = segments * (length / t);
    const std::uint64_t full_waves = (full + wave - 1) / wave, left = blocks > full_waves * wave ? blocks - full_waves * wave : 0;
    const std::uint64_t cost = full_waves * (t + fixed) + (left + wave - 1) / wave * (length % t + fixed);
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

// ---- plans from the lengths on the device -----------------------------------------------------------------

namespace {
using P90 = pagedattn::PagedAttentionPolicySm90;
constexpr int group = pagedattn::partition_group_size;

struct Launch {
  int segments_per_seq = 4; // 24/4 heads: one head part per KV head
  int max_seq_len = 0;
  long long table_tokens = 0;
  int fixed_tokens = 0;
  ScheduleModel model{264, 64, 4096}; // H200 (132 SMs, 2 blocks each), fp16, head 256, block 16
  std::size_t num_seqs = 0;

  pagedattn::ScheduleCapacity capacity() const
  {
    pagedattn::DecodeArguments<__half> a{};
    a.head_size = 256;
    a.block_size = 16;
    a.max_seq_len = max_seq_len;
    const int host = pagedattn::detail::choose_partition_tokens<P90>(a, num_seqs * segments_per_seq, 132);
    return pagedattn::schedule_capacity(model, num_seqs * segments_per_seq, max_seq_len, fixed_tokens, host, group);
  }
  test::HostPlan plan(const std::vector<int>& lens)
  {
    num_seqs = lens.size();
    if (table_tokens == 0) { table_tokens = max_seq_len; }
    return test::plan_on_host(lens, segments_per_seq, max_seq_len, table_tokens, model, capacity(), fixed_tokens, group);
  }
};

/// What every plan must satisfy: each (segment, partition) once, in ticket order segment by segment (a
/// block looking back waits only on smaller tickets), within the storage, group runs disjoint.
void check_plan_invariants(const Launch& launch, const std::vector<int>& lens, const test::HostPlan& plan)
{
  const auto cap = launch.capacity();
  REQUIRE(plan.items.size() <= cap.items);
  REQUIRE(plan.groups <= cap.groups);
  const int t = plan.launch.partition_tokens;
  REQUIRE(t >= 32);
  REQUIRE(t % 32 == 0);
  std::set<int> segments_seen;
  int previous_segment = -1, next_partition = 0, next_group = 0;
  for (std::size_t i = 0; i < plan.items.size(); ++i)
  {
    const auto& item = plan.items[i];
    const int seq = item.segment / launch.segments_per_seq;
    REQUIRE(seq < int(lens.size()));
    const bool valid = pagedattn::valid_seq_len(lens[seq], launch.max_seq_len, launch.table_tokens);
    const int expected_partitions = valid ? pagedattn::partitions_of(lens[seq], t) : -1;
    REQUIRE(item.num_partitions == expected_partitions);
    if (item.segment != previous_segment)
    {
      REQUIRE(next_partition == 0);                     // the previous segment was complete
      REQUIRE(segments_seen.insert(item.segment).second); // and is not seen again
      REQUIRE(item.segment == previous_segment + 1);      // sequences and their segments in order
      REQUIRE(item.first_group == next_group);            // group runs back to back
      next_group += pagedattn::groups_of(item.num_partitions, group);
      previous_segment = item.segment;
    }
    REQUIRE(item.partition == next_partition);
    next_partition = item.partition + 1 == std::max(item.num_partitions, 1) ? 0 : item.partition + 1;
  }
  REQUIRE(next_partition == 0);
  REQUIRE(int(segments_seen.size()) == int(lens.size()) * launch.segments_per_seq);
  REQUIRE(std::size_t(next_group) == plan.groups);
}
} // namespace

TEST_CASE("device plan: a batch of max_seq_len sequences is planned as the host plans it", "[schedule][host]")
{
  for (int max_seq_len : {1, 17, 1000, 2049, 4096, 16384, 32768, 100000})
  {
    for (std::size_t num_seqs : {std::size_t(1), std::size_t(4), std::size_t(8), std::size_t(64), std::size_t(256)})
    {
      INFO(num_seqs << "x" << max_seq_len);
      Launch launch;
      launch.max_seq_len = max_seq_len;
      const std::vector<int> lens(num_seqs, max_seq_len);
      const auto plan = launch.plan(lens);
      check_plan_invariants(launch, lens, plan);
      pagedattn::DecodeArguments<__half> a{};
      a.head_size = 256;
      a.block_size = 16;
      a.max_seq_len = max_seq_len;
      const int host = pagedattn::detail::choose_partition_tokens<P90>(a, num_seqs * 4, 132);
      CHECK(plan.launch.partition_tokens == host);
      CHECK(plan.items.size() == num_seqs * 4 * pagedattn::items_of(max_seq_len, host));
    }
  }
}

TEST_CASE("device plan: random batches, empty and invalid lengths, under any captured bound", "[schedule][host]")
{
  TEST_RNG(rng, 1);
  for (int trial = 0; trial < 300; ++trial)
  {
    Launch launch;
    launch.max_seq_len = trial % 3 == 0 ? 8192 : trial % 3 == 1 ? 65536 : 131072;
    launch.segments_per_seq = trial % 4 == 0 ? 8 : 4;
    launch.fixed_tokens = trial % 5 == 0 ? 512 : 0;
    std::vector<int> lens(1 + rng() % 300);
    for (int& len : lens)
    {
      const int kind = int(rng() % 10);
      len = kind == 0 ? 0 : kind == 1 ? -int(rng() % 5) - 1 : kind == 2 ? launch.max_seq_len + 1 + int(rng() % 100)
                                                                       : int(rng() % (launch.max_seq_len + 1));
    }
    INFO("trial " << trial << ": " << lens.size() << " sequences under " << launch.max_seq_len);
    const auto plan = launch.plan(lens);
    check_plan_invariants(launch, lens, plan);
  }
}

TEST_CASE("device plan: with a fixed partition size, a sequence's partitions do not depend on the batch", "[schedule][host]")
{
  Launch launch;
  launch.max_seq_len = 65536;
  launch.fixed_tokens = 1024;
  const auto alone = launch.plan({40000});
  const auto batched = launch.plan({17, 0, 40000, 65536, 3});
  auto partitions_of_seq = [&](const test::HostPlan& plan, int seq) {
    for (const auto& item : plan.items)
    {
      if (item.segment / launch.segments_per_seq == seq) { return item.num_partitions; }
    }
    return -2;
  };
  CHECK(alone.launch.partition_tokens == 1024);
  CHECK(batched.launch.partition_tokens == 1024);
  CHECK(partitions_of_seq(alone, 0) == 40);
  CHECK(partitions_of_seq(batched, 2) == 40);
}

TEST_CASE("device plan: graph replays under one captured bound, 1000 -> 50000 -> 17 tokens and padding rows", "[schedule][host]")
{
  Launch launch;
  launch.max_seq_len = 65536;
  for (const std::vector<int>& lens : {std::vector<int>(32, 1000), std::vector<int>(32, 50000), std::vector<int>(32, 17),
                                       std::vector<int>{1000, 0, 0, 0, 50000, 0, 17, 0}})
  {
    const auto plan = launch.plan(lens);
    check_plan_invariants(launch, lens, plan);
  }
  // The plan follows the lengths, not the bound: 32 x 1000 under 65536 gets the items of 32 x 1000.
  Launch exact;
  exact.max_seq_len = 1000;
  CHECK(launch.plan(std::vector<int>(32, 1000)).launch.partition_tokens == exact.plan(std::vector<int>(32, 1000)).launch.partition_tokens);
}

TEST_CASE("device plan: skewed batches split the long sequence over the GPU", "[schedule][host]")
{
  Launch launch;
  launch.max_seq_len = 32768;
  std::vector<int> lens(64, 100);
  lens[0] = 32768;
  const auto skewed = launch.plan(lens);
  check_plan_invariants(launch, lens, skewed);
  // The host plans 8 partitions of 4096 for every sequence; the lengths give the long one >= 32 per KV head.
  CHECK(pagedattn::partitions_of(32768, skewed.launch.partition_tokens) >= 32);
  // Short items charged their own length: 512 tokens (a wave of the long sequence's 256 items, then the
  // short ones), where waves of whole partitions would pick 256.
  CHECK(skewed.launch.partition_tokens == 512);

  launch.max_seq_len = 100000;
  launch.table_tokens = 0; // (the table of the bound: 32768's would make the long length invalid)
  std::fill(lens.begin(), lens.end(), 512);
  lens[0] = 100000;
  const auto long_one = launch.plan(lens);
  check_plan_invariants(launch, lens, long_one);
  CHECK(pagedattn::partitions_of(100000, long_one.launch.partition_tokens) >= 32);
  CHECK(long_one.launch.partition_tokens == 1536); // (waves of whole partitions: 512)
}

TEST_CASE("PartitionDivisor: partitions_of and items_of by multiply and shift, exact over [0, 2^31)", "[schedule][host]")
{
  TEST_RNG(rng, 7);
  std::vector<int> divisors;
  for (int t = 1; t <= 4096; ++t) { divisors.push_back(t); } // every candidate and fixed size, and more
  for (int i = 0; i < 2000; ++i) { divisors.push_back(static_cast<int>(rng() % 0x7fffffffu) + 1); }
  divisors.push_back(0x7fffffff);
  for (const int t : divisors)
  {
    const pagedattn::PartitionDivisor d = pagedattn::PartitionDivisor::of(t);
    auto check = [&](long long len) {
      if (len < 0 || len > 0x7fffffffLL) { return; }
      const int n = static_cast<int>(len);
      INFO("t " << t << ", length " << n);
      REQUIRE(d.partitions(n) == pagedattn::partitions_of(n, t));
      REQUIRE(d.items(n) == pagedattn::items_of(n, t));
    };
    for (long long k : {0LL, 1LL, 2LL, 3LL, 1000LL, (0x7fffffffLL / t) - 1, 0x7fffffffLL / t, 0x7fffffffLL / t + 1})
    {
      for (long long delta : {-1LL, 0LL, 1LL}) { check(k * t + delta); }
    }
    check(0x7fffffffLL);
    check(0x7ffffffeLL);
    for (int i = 0; i < 64; ++i) { check(static_cast<long long>(rng() % 0x80000000u)); }
  }
}
