// GPU tests of DevicePagedAttention::Decode over caches in token rows (layout_cases.cuh), fp16: the matrix at
// heads 120 to 256, a long Qwen3.6 batch, the persistent grid, the score variants, bad block ids and bad
// arguments.
#include "device/layout_cases.cuh"

using namespace layout_test;

TEST_CASE("decode layouts: fp16 over hnd and nhd, heads 120 to 256 x block size x GQA, packed and views", "[decode][gpu][layouts]")
{
  GPU_TEST_SEED(seed, 2500);
  test::report("matrix hnd/nhd, heads 120-256", "fp16", fp16_matrix<120, 128, 192, 256>(seed, 4 * 3 * 2));
}

TEST_CASE("decode layouts: Qwen3.6 shapes over hnd and nhd, a long sequence, a skewed batch, the persistent grid",
          "[decode][gpu][layouts][long]")
{
  GPU_TEST_SEED(seed, 2700);
  for (CacheLayout layout : {CacheLayout::hnd, CacheLayout::nhd})
  {
    test::DecodeShape skewed{{30000, 100, 100, 0, 1, 100}, /*num_heads=*/24, /*num_kv_heads=*/4, /*head_size=*/256};
    skewed.reference_heads = 6;
    set_layout(skewed, layout, layout == CacheLayout::hnd ? 0 : 2);
    check<__half>(skewed, seed + int(layout));
    // A loose bound (max_seq_len 8192 over 1000-token sequences): the persistent grid.
    test::DecodeShape loose{std::vector<int>(32, 1000), 24, 4, 128};
    loose.max_seq_len_override = 8192;
    loose.reference_heads = 4;
    set_layout(loose, layout, 1);
    check<__half>(loose, seed + 10 + int(layout));
  }
}

TEST_CASE("decode layouts: logit soft-cap, attention sinks, sliding windows, several new tokens over hnd and nhd", "[decode][gpu][layouts][variants]")
{
  GPU_TEST_SEED(seed, 2750);
  for (CacheLayout layout : {CacheLayout::hnd, CacheLayout::nhd})
  {
    for (const int config : {0, 1, 2}) // no window; a window; a window and four new tokens
    {
      const int window_left = config > 0 ? 300 : -1, q_len = config == 2 ? 4 : 1;
      test::DecodeShape s = test::variants_shape(256, /*alibi=*/false, window_left, q_len);
      set_layout(s, layout, 0);
      INFO("window_left " << window_left << " q_len " << q_len);
      check<__half>(s, seed + int(layout) + window_left + q_len);
    }
  }
}

TEST_CASE("decode layouts: bad block ids in token rows give NaN for that sequence and an error count", "[decode][gpu][layouts][invalid]")
{
  test::require_gpu_or_skip();
  for (CacheLayout layout : {CacheLayout::hnd, CacheLayout::nhd})
  {
    test::DecodeShape s{{600, 0, 40}, /*num_heads=*/8, /*num_kv_heads=*/2, /*head_size=*/128};
    set_layout(s, layout, 1);
    test::DeviceDecode<__half> dd(s, test::test_seed() + 2800);
    auto tables = dd.prob.block_tables;
    tables[0 * dd.prob.max_blocks_per_seq + 20] = int(dd.prob.num_blocks) + 5;
    tables[2 * dd.prob.max_blocks_per_seq + 1] = -3;
    dd.block_tables.upload(tables);
    CUDA_CHECK(cudaMemset(dd.error_count.get(), 0, sizeof(unsigned)));
    const auto out = dd.run<Default, TwoHeadSizes, TokenRows>();
    const std::size_t per_seq = std::size_t(s.num_heads) * s.head_size;
    for (int q : {0, 2})
    {
      for (std::size_t i = 0; i < per_seq; ++i) { REQUIRE(std::isnan(__half2float(out[q * per_seq + i]))); }
    }
    for (std::size_t i = 0; i < per_seq; ++i) { REQUIRE(__half2float(out[1 * per_seq + i]) == 0.f); } // seq_len 0
    CHECK(dd.error_count.download()[0] > 0u);
  }
}

TEST_CASE("decode layouts: bad layouts and strides return cudaErrorInvalidValue naming them", "[decode][gpu][layouts][invalid]")
{
  test::require_gpu_or_skip();
  test::DecodeShape s{{100}, /*num_heads=*/8, /*num_kv_heads=*/2, /*head_size=*/128};
  set_layout(s, CacheLayout::hnd, 0);
  test::DeviceDecode<__half> dd(s, 1);
  auto expect_error = [&](const pagedattn::DecodeArguments<__half>& a, const char* named) {
    std::size_t bytes = 0;
    CHECK((pagedattn::DevicePagedAttention::Decode<Default, TwoHeadSizes, TokenRows>(nullptr, bytes, a)) == cudaErrorInvalidValue);
    INFO(pagedattn::last_error_message());
    CHECK(pagedattn::last_error_message().find(named) != std::string::npos);
  };
  auto a = dd.arguments();
  a.cache_token_stride = 100; // 200 bytes
  expect_error(a, "cache_token_stride");
  a = dd.arguments();
  a.cache_token_stride = 120; // a multiple of 16 bytes, shorter than a row
  expect_error(a, "cache_token_stride");
  a = dd.arguments();
  a.cache_head_stride = -8;
  expect_error(a, "cache_head_stride");
  a = dd.arguments();
  a.cache_block_stride = 4;
  expect_error(a, "cache_block_stride");
  a = dd.arguments();
  a.cache_layout = static_cast<CacheLayout>(7);
  expect_error(a, "cache_layout");
  a = dd.arguments();
  a.cache_layout = CacheLayout::vllm; // not instantiated by TokenRows
  expect_error(a, "cache_layout vllm is not instantiated");
  a = dd.arguments();
  std::size_t bytes = 0;
  CHECK(test::decode_vllm(nullptr, bytes, a) == cudaErrorInvalidValue); // hnd, not instantiated
  CHECK(pagedattn::last_error_message().find("cache_layout hnd is not instantiated") != std::string::npos);
  a.cache_layout = CacheLayout::vllm;
  a.cache_token_stride = 128;
  CHECK(test::decode_vllm(nullptr, bytes, a) == cudaErrorInvalidValue);
  CHECK(pagedattn::last_error_message().find("must be 0 with cache_layout vllm") != std::string::npos);
}
