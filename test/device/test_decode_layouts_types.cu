// GPU tests of DevicePagedAttention::Decode over caches in token rows (layout_cases.cuh), the element types
// other than fp16: bf16, fp8 caches (tensor cores on sm_90, V read by a transposing ldmatrix) and fp32 (the
// CUDA-core fold) at heads 128 and 256, fp8 also at 64 and 96 (padded rows), and the BI-V100 policy.
#include "device/layout_cases.cuh"

using namespace layout_test;

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
