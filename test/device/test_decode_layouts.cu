// GPU tests of DevicePagedAttention::Decode over caches in token rows: CacheLayout hnd
// ([block][kv_head][token][dim]) and nhd ([block][token][kv_head][dim]), packed and as views (strides
// with gaps, which hold NaN: a read of a gap shows), against the same fp64 reference as vLLM's layout.
// fp16 runs the matrix (every head size x block size x GQA 1, 6, 8, 16 x ALiBi, mixed lengths) on the
// tensor-core fold (KvTileStageRows: tensor copies on sm_90 where rows are whole 128-byte slabs, else
// cp.async); bf16, fp8 caches (tensor cores on sm_90, V read by a transposing ldmatrix) and fp32 (the
// CUDA-core fold) run heads 128 and 256, fp8 also 64 and 96 (padded rows); then a long Qwen3.6 batch, the
// persistent grid, bad block ids and bad arguments.
#include "device/decode_test_support.cuh"

namespace {

using pagedattn::CacheLayout;
using pagedattn::fp8_e4m3;
using Default = pagedattn::DefaultPagedAttentionPolicies;
/// The kernels of token rows only (hnd and nhd share them).
using TokenRows = pagedattn::CacheLayoutList<CacheLayout::hnd, CacheLayout::nhd>;
using TwoHeadSizes = std::integer_sequence<int, 128, 256>;

/// Layout `view` of the shape's cache: 0 packed; 1 rows and heads padded; 2 blocks interleaved with
/// another cache's (FlashInfer's [pages][2][...] K/V tensor), padded rows. Strides are multiples of 16
/// bytes for every element type (of 16 elements).
void set_layout(test::DecodeShape& s, CacheLayout layout, int view)
{
  s.cache_layout = layout;
  s.cache_block_stride = s.cache_head_stride = s.cache_token_stride = 0;
  if (view == 0) { return; }
  const std::int64_t D = s.head_size, bs = s.block_size, H = s.num_kv_heads;
  if (layout == CacheLayout::hnd)
  {
    s.cache_token_stride = D + 16;
    s.cache_head_stride = bs * s.cache_token_stride + 32;
    s.cache_block_stride = H * s.cache_head_stride * (view == 2 ? 2 : 1) + 64;
  }
  else
  {
    s.cache_head_stride = D + 16;
    s.cache_token_stride = H * s.cache_head_stride + 32;
    s.cache_block_stride = bs * s.cache_token_stride * (view == 2 ? 2 : 1) + 64;
  }
}

template <class T, class KvT = T, class HeadDims = TwoHeadSizes>
double check(const test::DecodeShape& s, std::uint64_t seed)
{
  return test::check_decode<T, Default, KvT, HeadDims, TokenRows>(s, seed);
}

} // namespace

TEST_CASE("decode layouts: fp16 over hnd and nhd, every head size x block size x GQA, packed and views", "[decode][gpu][layouts]")
{
  GPU_TEST_SEED(seed, 2500);
  const int ratios[] = {1, 6, 8, 16};
  int combo = 0;
  double worst = 0;
  for (int head_size : {64, 80, 96, 112, 120, 128, 192, 256})
  {
    for (int block_size : {8, 16, 32})
    {
      for (CacheLayout layout : {CacheLayout::hnd, CacheLayout::nhd})
      {
        if (test::reduced_matrix() && combo % 5 != 0) { ++combo; continue; }
        test::DecodeShape s;
        s.head_size = head_size;
        s.block_size = block_size;
        s.num_kv_heads = 2;
        s.num_heads = 2 * ratios[combo % 4];
        s.alibi = combo % 2 == 1;
        s.seq_lens = test::matrix_lengths();
        s.partition_tokens = (combo % 3 == 0) ? 0 : (combo % 3 == 1) ? 512 : 64;
        set_layout(s, layout, combo % 3);
        worst = std::max(worst, check<__half, __half, pagedattn::SupportedHeadDims>(s, seed + combo));
        ++combo;
      }
    }
  }
  test::report("matrix hnd/nhd", "fp16", worst);
}

TEST_CASE("decode layouts: bf16, fp8 (e4m3, e5m2) and fp32 over hnd and nhd, heads 128 and 256", "[decode][gpu][layouts]")
{
  GPU_TEST_SEED(seed, 2600);
  int combo = 0;
  for (int head_size : {128, 256})
  {
    for (CacheLayout layout : {CacheLayout::hnd, CacheLayout::nhd})
    {
      test::DecodeShape s{{700, 33, 1, 0, 513}, /*num_heads=*/24, /*num_kv_heads=*/4, head_size};
      set_layout(s, layout, combo % 3);
      INFO("head " << head_size << " layout " << int(layout) << " view " << combo % 3);
#if PAGEDATTN_HAS_BF16
      check<__nv_bfloat16>(s, seed + combo);
#endif
      check<__half, fp8_e4m3>(s, seed + combo + 100);
      if (combo % 2 == 1) { check<__half, pagedattn::fp8_e5m2>(s, seed + combo + 150); }
      s.alibi = true;
      check<float>(s, seed + combo + 200);
      ++combo;
    }
  }
}

TEST_CASE("decode layouts: fp8 (e4m3) in token rows of other heads (shared-memory rows padded, by cp.async)", "[decode][gpu][layouts]")
{
  GPU_TEST_SEED(seed, 2650);
  int combo = 0;
  for (int head_size : {64, 96})
  {
    for (int block_size : {8, 16, 32})
    {
      test::DecodeShape s{{700, 33, 1, 0, 513}, /*num_heads=*/12, /*num_kv_heads=*/2, head_size, block_size};
      s.alibi = combo % 2 == 0;
      set_layout(s, combo % 2 ? CacheLayout::hnd : CacheLayout::nhd, combo % 3);
      INFO("head " << head_size << " block " << block_size << " view " << combo % 3);
      check<__half, fp8_e4m3, std::integer_sequence<int, 64, 96>>(s, seed + combo);
      ++combo;
    }
  }
}

TEST_CASE("decode layouts: the BI-V100 policy's CUDA-core fold over hnd and nhd (32-lane warps here)", "[decode][gpu][layouts][biv100]")
{
  GPU_TEST_SEED(seed, 2680);
  using BiV100 = pagedattn::SinglePolicyChain<pagedattn::PagedAttentionPolicyBIV100>;
  int combo = 0;
  for (int head_size : {128, 256})
  {
    for (CacheLayout layout : {CacheLayout::hnd, CacheLayout::nhd})
    {
      test::DecodeShape s{{700, 33, 1, 0, 513}, /*num_heads=*/24, /*num_kv_heads=*/4, head_size, combo % 2 ? 8 : 32};
      s.alibi = combo % 2 == 0;
      set_layout(s, layout, combo % 3);
      INFO("head " << head_size << " layout " << int(layout) << " view " << combo % 3);
      test::check_decode<__half, BiV100, __half, TwoHeadSizes, TokenRows>(s, seed + combo);
      ++combo;
    }
  }
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
