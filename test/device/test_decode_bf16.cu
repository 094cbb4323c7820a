// GPU tests of DevicePagedAttention::Decode for bf16: every head size x block size x GQA ratio x length.
#include "device/decode_test_support.cuh"

using T = __nv_bfloat16;

TEST_CASE("decode bf16: head sizes x block sizes x GQA x lengths, mixed batches", "[decode][gpu][bf16]")
{
  test::require_gpu_or_skip();
  const auto seed = test::test_seed() + 1000;
  INFO("seed " << seed);
  test::run_matrix<T>(seed);
}

TEST_CASE("decode bf16: Qwen3.6 shape, long mixed batch", "[decode][gpu][bf16][long]")
{
  test::require_gpu_or_skip();
  if (test::reduced_matrix()) { return; }
  test::DecodeShape s;
  s.num_heads = 24;
  s.num_kv_heads = 4;
  s.head_size = 256;
  s.seq_lens = {40000, 4097, 1};
  s.reference_heads = 6;
  test::check_decode<T>(s, test::test_seed() + 1100);
}
