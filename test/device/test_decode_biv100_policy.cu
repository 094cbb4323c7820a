// The BI-V100 policy's tile configuration, instantiated on NVIDIA (32-lane warps), passes the same
// correctness matrix as the default policies.
#include "device/decode_test_support.cuh"

using BIV100 = pagedattn::SinglePolicyChain<pagedattn::PagedAttentionPolicyBIV100>;

TEST_CASE("decode with the BI-V100 policy: fp16 matrix", "[decode][gpu][biv100]")
{
  test::require_gpu_or_skip();
  const auto seed = test::test_seed() + 2000;
  INFO("seed " << seed);
  test::run_matrix<__half, BIV100>(seed);
}

TEST_CASE("decode with the BI-V100 policy: logit soft-cap, attention sinks, sliding windows, several new tokens", "[decode][gpu][biv100][variants]")
{
  GPU_TEST_SEED(seed, 2800);
  for (int head_size : {96, 256})
  {
    for (const int config : {0, 1, 2}) // no window; a window; a window and four new tokens
    {
      const int window_left = config > 0 ? 300 : -1, q_len = config == 2 ? 4 : 1;
      const test::DecodeShape s = test::variants_shape(head_size, /*alibi=*/head_size == 96, window_left, q_len);
      INFO("head " << head_size << " window_left " << window_left << " q_len " << q_len);
      test::check_decode<__half, BIV100>(s, seed + head_size + window_left + q_len);
    }
  }
}

TEST_CASE("decode with the BI-V100 policy: the output epilogue (a sigmoid gate)", "[decode][gpu][biv100][variants][epilogue]")
{
  GPU_TEST_SEED(seed, 2850);
  test::DecodeShape s{{1, 17, 1000, 0, 5003}, /*num_heads=*/24, /*num_kv_heads=*/4, /*head_size=*/256};
  s.partition_tokens = 64;
  test::check_decode_with_gate<__half, BIV100, __half, std::integer_sequence<int, 256>>(s, seed);
}
