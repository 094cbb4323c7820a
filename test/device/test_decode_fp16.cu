// GPU tests of DevicePagedAttention::Decode for fp16: the cases of every type (decode_cases_each_type.cuh),
// and the primary type's own: every GQA ratio, long sequences (100K, 1M), a cache over 4 GiB, determinism,
// the one-wave combine against look-back, the refused cooperative launch, graph replay, invalid device
// data and bad host arguments.
#include "device/decode_test_support.cuh"

using T = __half;
#define DTYPE "fp16"
#include "device/decode_cases_each_type.cuh"

TEST_CASE("decode fp16: every GQA ratio from 1 to 16", "[decode][gpu][fp16]")
{
  GPU_TEST_SEED(seed, 100);
  const std::vector<int> ratios = test::reduced_matrix() ? std::vector<int>{3, 12} : std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16};
  for (int ratio : ratios)
  {
    for (int head_size : {128, 256})
    {
      test::DecodeShape s;
      s.num_kv_heads = 2;
      s.num_heads = 2 * ratio;
      s.head_size = head_size;
      s.seq_lens = {700, 33, 1};
      test::check_decode<T>(s, seed + ratio);
    }
  }
}

TEST_CASE("decode fp16: Qwen3.6 shape, 100000 tokens", "[decode][gpu][fp16][long]")
{
  test::require_gpu_or_skip();
  if (test::reduced_matrix()) { return; }
  test::check_decode<T>(test::DecodeShape{{100000}, /*num_heads=*/24, /*num_kv_heads=*/4, /*head_size=*/256}, test::test_seed() + 200);
}

TEST_CASE("decode fp16: 1,000,000 tokens", "[decode][gpu][fp16][long]")
{
  test::require_gpu_or_skip();
  if (test::reduced_matrix()) { return; }
  test::DecodeShape s{{1000000}, /*num_heads=*/6, /*num_kv_heads=*/1, /*head_size=*/128, /*block_size=*/32};
  s.reference_heads = 2;
  test::check_decode<T>(s, test::test_seed() + 300);
}

TEST_CASE("decode fp16: a cache larger than 4 GiB (64-bit offsets)", "[decode][gpu][fp16][long]")
{
  test::require_gpu_or_skip();
  if (test::reduced_matrix()) { return; }
  test::DecodeShape s{{5000, 77}, /*num_heads=*/8, /*num_kv_heads=*/1, /*head_size=*/128, /*block_size=*/16};
  // One block is 1 * 128 * 16 * 2 bytes = 4 KiB: ids from 1.2M up put every used block past 4.9 GB.
  s.min_block_id = 1200000;
  test::check_decode<T>(s, test::test_seed() + 400);
}

TEST_CASE("decode fp16: with a fixed partition size, a sequence's output is bitwise the same in any batch and over 20 launches",
          "[decode][gpu][fp16]")
{
  GPU_TEST_SEED(seed, 500);
  // Lengths 200 (the single-partition path alone, the partitioned path in the batch), 300 and 5000; plain,
  // then with the decode variants (a window through a partition, soft-cap, sinks, ALiBi), then with four
  // new tokens per sequence too (the tensor-core tile's 24 rows).
  const int lengths[] = {200, 300, 5000};
  for (int combo = 0; combo < 9; ++combo)
  {
    const int len = lengths[combo % 3];
    const bool variants = combo >= 3;
    const int q_len = combo >= 6 ? 4 : 1;
    INFO("length " << len << " variants " << variants << " q_len " << q_len);
    test::DecodeShape alone;
    alone.num_heads = 12;
    alone.num_kv_heads = 2;
    alone.head_size = 128;
    alone.seq_lens = {len};
    alone.partition_tokens = 256; // automatic partitioning depends on the batch; a fixed size does not
    alone.q_len = q_len;
    if (variants)
    {
      alone.window_left = 1000;
      alone.softcap = 30.f;
      alone.sinks = true;
      alone.alibi = true;
    }
    test::DecodeShape batched = alone; // the shared sequence is sequence 0 of all: same data
    batched.seq_lens = {len, 9000, 17, 1};
    test::DecodeShape skewed = alone; // a long sequence beside short ones and a padding row
    skewed.seq_lens = {len, 30000, 100, 100, 0, 100, 100, 100};
    test::DeviceDecode<T> a(alone, seed), b(batched, seed), c(skewed, seed);
    const auto out_a = a.run();
    const auto out_b = b.run();
    const auto out_c = c.run();
    const std::size_t n = std::size_t(q_len) * alone.num_heads * alone.head_size; // sequence 0's rows
    REQUIRE(std::memcmp(out_a.data(), out_b.data(), n * sizeof(T)) == 0);
    REQUIRE(std::memcmp(out_a.data(), out_c.data(), n * sizeof(T)) == 0);
    REQUIRE(a.worst_error(out_a) < test::tolerance<T>());
    const int launches = test::reduced_matrix() ? 2 : 20;
    for (int i = 0; i < launches; ++i) { REQUIRE(test::bitwise_equal(b.run(), out_b)); }
  }
}

namespace {
/// The sm_90 policy without the one-wave combine: every partitioned launch combines by look-back.
struct LookBackOnlyPolicy : pagedattn::PagedAttentionPolicySm90 {
  static constexpr bool one_wave_combine = false;
};
} // namespace

TEST_CASE("decode fp16: the one-wave combine (grid barrier, slices) gives the look-back combine's bits", "[decode][gpu][fp16]")
{
  GPU_TEST_SEED(seed, 550);
  using HeadDims = std::integer_sequence<int, 128, 256>;
  // 2 .. 66 partitions per segment (one group, several, a last group of 1 or 2), an empty and a 1-token
  // sequence beside them, automatic and fixed partition sizes; GQA 6 (one head tile) and 9 (tiles of 5
  // and 4 heads)
  const std::vector<std::vector<int>> batches = {{100000}, {16384}, {1000}, {5000, 0, 1, 700}, {2049, 2049, 2049, 2049}};
  for (const auto& lens : batches)
  {
    for (int head_size : {128, 256})
    {
      for (int partition_tokens : {0, 64})
      {
        const int num_heads = head_size == 128 ? 36 : 24;
        INFO("first length " << lens[0] << " heads " << num_heads << " head " << head_size << " partition_tokens " << partition_tokens);
        test::DecodeShape s;
        s.num_heads = num_heads;
        s.num_kv_heads = 4;
        s.head_size = head_size;
        s.seq_lens = lens;
        s.partition_tokens = partition_tokens;
        s.reference_heads = 2;
        test::DeviceDecode<T> dd(s, seed);
        const auto one_wave = dd.template run<pagedattn::DefaultPagedAttentionPolicies, HeadDims>();
        const auto look_back = dd.template run<pagedattn::SinglePolicyChain<LookBackOnlyPolicy>, HeadDims>();
        REQUIRE(test::bitwise_equal(one_wave, look_back));
        REQUIRE(dd.worst_error(one_wave) < test::tolerance<T>());
      }
    }
  }
}

// Tagged [api_error]: the refused launch is a CUDA API error on purpose, which compute-sanitizer would
// count; the device script's sanitizer runs leave this case out.
TEST_CASE("decode fp16: a cooperative launch the runtime refuses runs as look-back, with the same bits", "[decode][gpu][fp16][api_error]")
{
  GPU_TEST_SEED(seed, 560);
  // 64 x 4 segments of 32 partitions: 8192 work items. The grid is forced to 8192 cooperative blocks, more
  // than any GPU holds at once, so the runtime refuses the launch (cudaErrorCooperativeLaunchTooLarge);
  // it must fall back to a plain launch combining by look-back (the path a GPU shared with another
  // context takes).
  test::DecodeShape s;
  s.num_heads = 24;
  s.num_kv_heads = 4;
  s.head_size = 128;
  s.seq_lens = std::vector<int>(64, 2000);
  s.partition_tokens = 64;
  s.reference_heads = 2;
  test::DeviceDecode<T> dd(s, seed);
  const auto expected = dd.run(); // the plan's own grid

  pagedattn::detail::DeviceInfo device;
  REQUIRE(pagedattn::detail::current_device_info(device) == cudaSuccess);
  const auto a = dd.arguments();
  std::size_t bytes = 0;
  REQUIRE(test::decode_vllm(nullptr, bytes, a) == cudaSuccess);
  test::DeviceBuffer<char> temp(bytes);
  // The default chain's policy for this device, and its kernel (the one the other tests launch).
  const cudaError_t err = pagedattn::DefaultPagedAttentionPolicies::invoke(device.ptx_version, [&](auto policy) {
    using Policy = decltype(policy);
    using Kernel = pagedattn::detail::DecodeKernel<pagedattn::DecodeTraits<T, 128, 8, Policy>, pagedattn::DefaultPagedAttentionPolicies, false>;
    pagedattn::detail::DecodePlan plan = pagedattn::detail::make_plan<Policy>(a, device.sm_count);
    REQUIRE(plan.temp_bytes == bytes);
    pagedattn::detail::choose_grid(plan, std::size_t(1) << 20, /*cooperative_capable=*/true, /*persistent=*/false);
    REQUIRE(plan.grid == 64u * 4u * 32u);
    dd.output.poison();
    return pagedattn::detail::launch_decode<Kernel>(plan, device, pagedattn::detail::make_params(a, plan, temp.get()),
                                                    typename Kernel::Variant{a.score_variant, a.output_epilogue},
                                                    temp.get(), 0);
  });
  INFO(pagedattn::last_error_message());
  REQUIRE(err == cudaSuccess);
  CUDA_CHECK_LAUNCH();
  REQUIRE(test::bitwise_equal(dd.output.download(), expected));
  REQUIRE(dd.worst_error(expected) < test::tolerance<T>());
}

TEST_CASE("decode fp16: a skewed batch (one long sequence, many short ones) against fp64", "[decode][gpu][fp16][skewed]")
{
  GPU_TEST_SEED(seed, 580);
  test::DecodeShape s{{test::reduced_matrix() ? 3000 : 20000}, /*num_heads=*/24, /*num_kv_heads=*/4, /*head_size=*/256};
  for (int i = 0; i < 63; ++i) { s.seq_lens.push_back(i % 9 == 0 ? 0 : 100 + i); }
  s.reference_heads = 2;
  test::DeviceDecode<T> dd(s, seed);
  const auto out = dd.run();
  REQUIRE(dd.worst_error(out) < test::tolerance<T>());
  REQUIRE(dd.error_count.download()[0] == 0u);
  for (int i = 0; i < 3; ++i) { REQUIRE(test::bitwise_equal(dd.run(), out)); }
}

/// Captures one decode of dd's arguments in a CUDA graph (as vLLM captures its decode step, under a bound),
/// then for each of `steps` steps: step(i) rewrites the device inputs in place (and dd's shape, for the
/// reference) and says what it wrote, the graph replays, and its output must equal a fresh launch's bit for bit
/// and the fp64 reference. QueryRowForms: PerSequenceQueryRows for dd with query offsets.
template <class QueryRowForms = pagedattn::UniformQueryRows, class Step>
void check_graph_replays(test::DeviceDecode<T>& dd, int steps, Step&& step)
{
  const auto args = dd.arguments();
  std::size_t bytes = 0;
  REQUIRE(test::decode_vllm<QueryRowForms>(nullptr, bytes, args) == cudaSuccess);
  test::DeviceBuffer<char> graph_temp(bytes), fresh_temp(bytes);
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  REQUIRE(test::decode_vllm<QueryRowForms>(graph_temp.get(), bytes, args, stream) == cudaSuccess);
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < steps; ++i)
  {
    INFO(step(i));
    dd.output.poison();
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const auto replayed = dd.output.download();
    dd.output.poison();
    REQUIRE(test::decode_vllm<QueryRowForms>(fresh_temp.get(), bytes, args, stream) == cudaSuccess);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    REQUIRE(test::bitwise_equal(replayed, dd.output.download())); // each replay equals a fresh launch
    REQUIRE(dd.worst_error(replayed) < test::tolerance<T>());
  }
  REQUIRE(dd.error_count.download()[0] == 0u);
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_CASE("decode fp16: one captured graph, replayed with seq_lens rewritten in place (1000, 50000, 17, padding rows)",
          "[decode][gpu][fp16][graph]")
{
  GPU_TEST_SEED(seed, 620);
  // The cache holds 50000 tokens per sequence; the graph is captured under max_seq_len 65536, as vLLM
  // captures under max_seq_len_to_capture, then replayed with each set of lengths written to seq_lens.
  const int longest = test::reduced_matrix() ? 5000 : 50000; // (the sanitizers' run: shorter)
  test::DecodeShape s{{longest, longest, longest, longest}, /*num_heads=*/24, /*num_kv_heads=*/4, /*head_size=*/256};
  s.max_seq_len_override = 65536;
  s.reference_heads = 2;
  test::DeviceDecode<T> dd(s, seed);
  const std::vector<std::vector<int>> replays = {{1000, 1000, 1000, 1000}, {longest, longest, longest, longest}, {17, 17, 17, 17}, {1000, 0, longest, 0}};
  check_graph_replays(dd, int(replays.size()), [&](int i) {
    const auto& lens = replays[std::size_t(i)];
    dd.seq_lens.upload(lens);
    dd.prob.shape.seq_lens = lens; // the reference of these lengths
    return "lengths " + test::joined(lens);
  });
}

TEST_CASE("decode fp16: one captured graph, replayed with new query offsets and lengths in place", "[decode][gpu][fp16][graph][q_len]")
{
  GPU_TEST_SEED(seed, 630);
  // Captured with 4 new tokens per sequence at most and 16 rows, replayed with each batch's rows and lengths.
  test::DecodeShape s{{3000, 3000, 3000, 3000}, /*num_heads=*/24, /*num_kv_heads=*/4, /*head_size=*/256};
  s.q_len = 4;
  s.query_rows = {4, 4, 4, 4};
  s.max_seq_len_override = 8192;
  test::DeviceDecode<T> dd(s, seed);
  const std::vector<std::pair<std::vector<int>, std::vector<int>>> replays = {
      {{1, 0, 4, 2}, {3000, 17, 1000, 2}}, {{4, 4, 4, 4}, {3000, 3000, 3000, 3000}}, {{0, 0, 0, 3}, {5, 3000, 0, 2999}}, {{2, 3, 0, 1}, {1, 2, 3, 4}}};
  check_graph_replays<pagedattn::PerSequenceQueryRows>(dd, int(replays.size()), [&](int i) {
    const auto& [rows, lens] = replays[std::size_t(i)];
    dd.prob.shape.query_rows = rows;
    dd.prob.shape.seq_lens = lens; // the reference of these rows and lengths
    dd.query_start_loc.upload(dd.prob.shape.query_offsets());
    dd.seq_lens.upload(lens);
    return "rows " + test::joined(rows) + ", lengths " + test::joined(lens);
  });
}

TEST_CASE("decode fp16: CUDA-graph capture and replay", "[decode][gpu][fp16][graph]")
{
  test::require_gpu_or_skip();
  const test::DecodeShape s{{3000, 1, 700}, /*num_heads=*/24, /*num_kv_heads=*/4, /*head_size=*/256};
  test::DeviceDecode<T> dd(s, test::test_seed() + 600);
  const auto expected = dd.run();
  REQUIRE(dd.worst_error(expected) < test::tolerance<T>());

  const auto args = dd.arguments();
  std::size_t bytes = 0;
  REQUIRE(test::decode_vllm(nullptr, bytes, args) == cudaSuccess);
  test::DeviceBuffer<char> temp(bytes);
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  REQUIRE(test::decode_vllm(temp.get(), bytes, args, stream) == cudaSuccess);
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 10; ++replay)
  {
    dd.output.poison();
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    REQUIRE(test::bitwise_equal(dd.output.download(), expected));
  }
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_CASE("decode fp16: invalid device data gives NaN for that sequence and an error count, nothing else", "[decode][gpu][fp16][invalid]")
{
  test::require_gpu_or_skip();
  const test::DecodeShape s{{600, 0, 40, 100}, /*num_heads=*/8, /*num_kv_heads=*/2, /*head_size=*/128};
  test::DeviceDecode<T> dd(s, test::test_seed() + 700);
  const auto good = dd.run();
  REQUIRE(dd.worst_error(good) < test::tolerance<T>()); // includes: seq_len 0 gives zeros

  // Corrupt: sequence 0 gets a block id past the cache, sequence 2 a negative one, and sequence 3 a
  // seq_len beyond its block table (max_blocks_per_seq * block_size).
  auto tables = dd.prob.block_tables;
  tables[0 * dd.prob.max_blocks_per_seq + 20] = int(dd.prob.num_blocks) + 5;
  tables[2 * dd.prob.max_blocks_per_seq + 1] = -3;
  dd.block_tables.upload(tables);
  auto lens = s.seq_lens;
  lens[3] = dd.prob.max_blocks_per_seq * s.block_size + 1;
  dd.seq_lens.upload(lens);
  auto args = dd.arguments();
  args.max_seq_len = dd.prob.max_blocks_per_seq * s.block_size; // host bound stays consistent
  std::size_t bytes = 0;
  REQUIRE(test::decode_vllm(nullptr, bytes, args) == cudaSuccess);
  test::DeviceBuffer<char> temp(bytes);
  CUDA_CHECK(cudaMemset(dd.error_count.get(), 0, sizeof(unsigned)));
  dd.output.poison();
  REQUIRE(test::decode_vllm(temp.get(), bytes, args) == cudaSuccess);
  CUDA_CHECK_LAUNCH();
  const auto out = dd.output.download();
  const std::size_t per_seq = std::size_t(s.num_heads) * s.head_size;
  auto all_nan = [&](int q) {
    for (std::size_t i = 0; i < per_seq; ++i) { if (!std::isnan(__half2float(out[q * per_seq + i]))) { return false; } }
    return true;
  };
  CHECK(all_nan(0));
  CHECK(all_nan(2));
  CHECK(all_nan(3));
  for (std::size_t i = 0; i < per_seq; ++i) { REQUIRE(__half2float(out[1 * per_seq + i]) == 0.f); } // seq_len 0
  unsigned errors = 0;
  CUDA_CHECK(cudaMemcpy(&errors, dd.error_count.get(), sizeof(unsigned), cudaMemcpyDeviceToHost));
  CHECK(errors > 0);
  CHECK(errors <= 3u * 2u * 8u); // at most one per (sequence, KV head, partition) block
}

TEST_CASE("decode fp16: invalid query offsets give NaN in the rows they name and an error count, nothing else", "[decode][gpu][fp16][invalid][q_len]")
{
  test::require_gpu_or_skip();
  test::DecodeShape s{{600, 30, 40, 100, 70, 55}, /*num_heads=*/24, /*num_kv_heads=*/4, /*head_size=*/128};
  s.q_len = 4;
  s.query_rows = {2, 4, 1, 3, 0, 2};
  s.spare_query_rows = 2; // 14 rows
  test::DeviceDecode<T> dd(s, test::test_seed() + 710);
  const auto good = dd.run_per_sequence();
  REQUIRE(dd.worst_error(good) < test::tolerance<T>());
  REQUIRE(dd.error_count.download()[0] == 0u);
  // Sequence 1 given rows 2 .. 7 (five, more than q_len: NaN in its first four, 2 .. 5), sequence 5 rows
  // 10 .. 15 (past the 14 rows: NaN in 10 .. 13); 2 (row 7), 3 (8, 9) and 4 (none) are well formed; row 6 is
  // nobody's and keeps the poison.
  dd.query_start_loc.upload(std::vector<int>{0, 2, 7, 8, 10, 10, 15});
  CUDA_CHECK(cudaMemset(dd.error_count.get(), 0, sizeof(unsigned)));
  const auto out = dd.run_per_sequence();
  const std::size_t per_row = std::size_t(s.num_heads) * s.head_size;
  auto rows = [&](int first, int count, auto&& ok) {
    for (std::size_t i = first * per_row; i < (first + count) * per_row; ++i)
    {
      if (!ok(i)) { return false; }
    }
    return true;
  };
  auto bits = [](T v) { std::uint16_t b; std::memcpy(&b, &v, 2); return b; };
  CHECK(rows(0, 2, [&](std::size_t i) { return bits(out[i]) == bits(good[i]); }));
  CHECK(rows(2, 4, [&](std::size_t i) { return std::isnan(__half2float(out[i])) && bits(out[i]) != 0xFFFF; }));
  CHECK(rows(6, 1, [&](std::size_t i) { return bits(out[i]) == 0xFFFF; }));
  CHECK(rows(7, 3, [&](std::size_t i) { return std::isfinite(__half2float(out[i])); }));
  CHECK(rows(10, 4, [&](std::size_t i) { return std::isnan(__half2float(out[i])) && bits(out[i]) != 0xFFFF; }));
  CHECK(dd.error_count.download()[0] == 2u * 4u); // one per (invalid sequence, KV head)
}

TEST_CASE("decode fp16: bad host arguments return cudaErrorInvalidValue naming the argument", "[decode][gpu][fp16][invalid]")
{
  test::require_gpu_or_skip();
  test::DecodeShape s;
  s.seq_lens = {100};
  test::DeviceDecode<T> dd(s, 1);
  std::size_t bytes = 0;
  auto expect_error = [&](pagedattn::DecodeArguments<T> a, const char* name) {
    INFO("argument " << name);
    std::size_t b = 1 << 20;
    test::DeviceBuffer<char> temp(b);
    CHECK(test::decode_vllm(temp.get(), b, a) == cudaErrorInvalidValue);
    CHECK(pagedattn::last_error_message().find(name) != std::string::npos);
  };
  auto a = dd.arguments();
  REQUIRE(test::decode_vllm(nullptr, bytes, a) == cudaSuccess);
  { auto b = a; b.query = nullptr; expect_error(b, "query"); }
  { auto b = a; b.key_cache = nullptr; expect_error(b, "key_cache"); }
  { auto b = a; b.value_cache = nullptr; expect_error(b, "value_cache"); }
  { auto b = a; b.output = nullptr; expect_error(b, "output"); }
  { auto b = a; b.block_tables = nullptr; expect_error(b, "block_tables"); }
  { auto b = a; b.seq_lens = nullptr; expect_error(b, "seq_lens"); }
  { auto b = a; b.head_size = 100; expect_error(b, "head_size"); }
  { auto b = a; b.block_size = 12; expect_error(b, "block_size"); }
  { auto b = a; b.num_heads = 7; expect_error(b, "num_heads"); }
  { auto b = a; b.max_seq_len = -1; expect_error(b, "max_seq_len"); }
  { auto b = a; b.key_cache = reinterpret_cast<const T*>(reinterpret_cast<const char*>(a.key_cache) + 2); expect_error(b, "key_cache"); }
  { auto b = a; b.logit_softcap = -1.f; expect_error(b, "logit_softcap"); }
  { auto b = a; b.logit_softcap = NAN; expect_error(b, "logit_softcap"); }
  { auto b = a; b.logit_softcap = INFINITY; expect_error(b, "logit_softcap"); }
  { auto b = a; b.window_left = -2; expect_error(b, "window_left"); }
  { auto b = a; b.q_len = 0; expect_error(b, "q_len"); }
  { auto b = a; b.q_len = pagedattn::max_q_len + 1; expect_error(b, "q_len"); }
  { auto b = a; b.query_start_loc = dd.seq_lens.get(); b.num_query_rows = -1; expect_error(b, "num_query_rows"); }
  { auto b = a; b.num_query_rows = 4; expect_error(b, "num_query_rows"); } // without query_start_loc
  // A form of query rows the call did not instantiate: offsets where decode_vllm has uniform rows only, and
  // none where only per-sequence rows are.
  { auto b = a; b.query_start_loc = dd.seq_lens.get(); b.num_query_rows = 1; expect_error(b, "QueryRowForms"); }
  {
    std::size_t b = 1 << 20;
    test::DeviceBuffer<char> temp(b);
    CHECK(test::decode_vllm<pagedattn::PerSequenceQueryRows>(temp.get(), b, a) == cudaErrorInvalidValue);
    CHECK(pagedattn::last_error_message().find("query_start_loc is null") != std::string::npos);
  }
  {
    std::size_t small = 8;
    test::DeviceBuffer<char> temp(small);
    auto b = a;
    b.max_seq_len = 4000;
    b.max_blocks_per_seq = 1000;
    CHECK(test::decode_vllm(temp.get(), small, b) == cudaErrorInvalidValue);
    CHECK(pagedattn::last_error_message().find("temp_storage_bytes") != std::string::npos);
  }
}
