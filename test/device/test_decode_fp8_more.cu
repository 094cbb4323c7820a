// GPU tests of fp8 caches, the second translation unit of test_decode_fp8 (see test_decode_fp8.cu): the e5m2
// matrix (heads 128 and 256), bf16 queries over both formats, a long sequence and a skewed batch.
#include "device/decode_test_support.cuh"

namespace {
using pagedattn::fp8_e4m3;
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

#if PAGEDATTN_HAS_BF16
TEST_CASE("decode fp8: bf16 queries, e4m3 and e5m2 caches", "[decode][gpu][fp8]")
{
  GPU_TEST_SEED(seed, 1800);
  for (int head_size : {128, 256})
  {
    test::DecodeShape s{{700, 33, 1, 0}, /*num_heads=*/24, /*num_kv_heads=*/4, head_size};
    test::check_decode<__nv_bfloat16, Default, fp8_e4m3, TwoHeadSizes>(s, seed + head_size);
    test::check_decode<__nv_bfloat16, Default, fp8_e5m2, TwoHeadSizes>(s, seed + head_size + 1);
  }
}
#endif

TEST_CASE("decode fp8: Qwen3.6 shapes, a long sequence and a skewed batch", "[decode][gpu][fp8][long]")
{
  GPU_TEST_SEED(seed, 1900);
  test::DecodeShape skewed{{30000, 100, 100, 0, 1, 100}, /*num_heads=*/24, /*num_kv_heads=*/4, /*head_size=*/256};
  test::check_decode<__half, Default, fp8_e4m3, TwoHeadSizes>(skewed, seed);
  if (test::reduced_matrix()) { return; }
  test::DecodeShape longest{{100000}, 24, 4, 256};
  longest.reference_heads = 4;
  test::check_decode<__half, Default, fp8_e4m3, TwoHeadSizes>(longest, seed + 1);
  test::check_decode<__half, Default, fp8_e5m2, TwoHeadSizes>(longest, seed + 2);
}

