// GPU tests of fp8 caches, the second translation unit of test_decode_fp8 (see test_decode_fp8.cu): e5m2,
// its matrix (heads 128 and 256), its extremes, infinity and NaN bytes, a long sequence and bf16 queries.
#include "device/fp8_cache_cases.cuh"

namespace {
using pagedattn::fp8_e5m2;
using Default = pagedattn::DefaultPagedAttentionPolicies;
/// The cases beyond the matrix instantiate two head sizes only (the binary compiles in half the time).
using TwoHeadSizes = std::integer_sequence<int, 128, 256>;
} // namespace

// e5m2 differs from e4m3 only in the byte-to-value conversion (the staging, addressing and fold are the
// same code for every one-byte format), so its matrix runs heads 128 and 256 only: both folds of sm_90
// (256: 64-token steps; 128: 4 stages) and the CUDA-core fold of sm_80, at every block size and GQA ratio.
TEST_CASE("decode fp8: fp16 queries over e5m2 caches, heads 128 and 256 x block size x GQA", "[decode][gpu][fp8]")
{
  GPU_TEST_SEED(seed, 1750);
  test::run_fp8_matrix<__half, fp8_e5m2>(seed, TwoHeadSizes{});
}

TEST_CASE("decode fp8: e5m2 extremes (largest finite, subnormals, zeros) in the cache", "[decode][gpu][fp8]")
{
  test::require_gpu_or_skip();
  // +-57344, the smallest subnormal 2^-16 and others, zeros; small scales keep the scores moderate.
  test::check_fp8_extremes<fp8_e5m2>({0x7b, 0xfb, 0x01, 0x81, 0x03, 0x00, 0x80, 0x3c, 0x04}, 1.f / 57344.f, 1.f / 4096.f,
                                     test::test_seed() + 2101);
}

TEST_CASE("decode fp8: e5m2 infinity and NaN bytes in a live token give the documented non-finite outputs", "[decode][gpu][fp8]")
{
  test::require_gpu_or_skip();
  // Two sequences; only sequence 0's token 5 of KV head 0 holds the non-finite byte. docs/api.md: a NaN key
  // element makes the scores of its KV head's query heads NaN, hence their outputs NaN; an infinite value
  // element, weighted by a positive softmax weight, makes that dimension of their outputs infinite. Other
  // KV heads and other sequences are untouched (checked against the reference).
  const test::DecodeShape s{{64, 48}, /*num_heads=*/8, /*num_kv_heads=*/2, /*head_size=*/128, /*block_size=*/16};
  for (const bool nan_key : {true, false})
  {
    INFO((nan_key ? "NaN key byte" : "infinite value byte"));
    test::DeviceDecode<__half, fp8_e5m2> dd(s, test::test_seed() + 2200);
    const auto clean = dd.run<Default, TwoHeadSizes>();
    const paged_decode::CacheLayout<fp8_e5m2> layout{s.num_kv_heads, s.head_size, s.block_size};
    const int token = 5, dim = 9, kvh = 0;
    const std::size_t block = std::size_t(dd.prob.block_tables[token / s.block_size]);
    const std::uint8_t byte = nan_key ? 0x7e : 0x7c; // e5m2: exponent 31 with mantissa 2 (NaN), 0 (+infinity)
    const std::size_t offset = block * layout.block_elements() +
                               (nan_key ? layout.key_offset(0, kvh, dim, token % s.block_size) : layout.value_offset(0, kvh, dim, token % s.block_size));
    CUDA_CHECK(cudaMemcpy(reinterpret_cast<std::uint8_t*>(nan_key ? static_cast<void*>(dd.d_key) : static_cast<void*>(dd.d_value)) + offset,
                          &byte, 1, cudaMemcpyHostToDevice));
    const auto out = dd.run<Default, TwoHeadSizes>();
    const int group = s.num_heads / s.num_kv_heads;
    for (int q = 0; q < 2; ++q)
    {
      for (int h = 0; h < s.num_heads; ++h)
      {
        for (int d = 0; d < s.head_size; ++d)
        {
          const std::size_t i = (std::size_t(q) * s.num_heads + h) * s.head_size + d;
          const float got = __half2float(out[i]);
          INFO("sequence " << q << " head " << h << " dim " << d);
          if (q == 0 && h / group == kvh)
          {
            if (nan_key) { REQUIRE(std::isnan(got)); }
            else if (d == dim) { REQUIRE(got == INFINITY); }
            else { REQUIRE(std::isfinite(got)); }
          }
          else { REQUIRE(test::bitwise_equal(std::vector<__half>{out[i]}, std::vector<__half>{clean[i]})); }
        }
      }
    }
  }
}

TEST_CASE("decode fp8: Qwen3.6 shapes over e5m2, a long sequence", "[decode][gpu][fp8][long]")
{
  GPU_TEST_SEED(seed, 1950);
  if (test::reduced_matrix()) { return; }
  test::DecodeShape longest{{100000}, 24, 4, 256};
  longest.reference_heads = 4;
  test::check_decode<__half, Default, fp8_e5m2, TwoHeadSizes>(longest, seed);
}

// fp32 queries over e5m2: the CUDA-core fold's e5m2 conversion (e4m3's matrix: test_decode_fp8.cu).
TEST_CASE("decode fp8: fp32 queries over e5m2 (head 256)", "[decode][gpu][fp8]")
{
  GPU_TEST_SEED(seed, 3150);
  const test::DecodeShape s{{700, 33, 1, 0, 3001}, /*num_heads=*/24, /*num_kv_heads=*/4, /*head_size=*/256};
  test::check_decode<float, Default, fp8_e5m2, std::integer_sequence<int, 256>>(s, seed);
}

#if PAGEDATTN_HAS_BF16
// bf16 queries differ from fp16 only where the queries are loaded and the output stored: one head size.
TEST_CASE("decode fp8: bf16 queries over e5m2 (head 128)", "[decode][gpu][fp8]")
{
  GPU_TEST_SEED(seed, 1850);
  const test::DecodeShape s{{700, 33, 1, 0}, /*num_heads=*/24, /*num_kv_heads=*/4, /*head_size=*/128};
  test::check_decode<__nv_bfloat16, Default, fp8_e5m2, std::integer_sequence<int, 128>>(s, seed);
}
#endif
