// GPU tests of DevicePagedAttention::Decode for fp32: every head size x block size x GQA ratio x length.
#include "device/decode_test_support.cuh"

using T = float;

TEST_CASE("decode fp32: head sizes x block sizes x GQA x lengths, mixed batches", "[decode][gpu][fp32]")
{
  test::require_gpu_or_skip();
  const auto seed = test::test_seed() + 1000;
  INFO("seed " << seed);
  test::run_matrix<T>(seed);
}

TEST_CASE("decode fp32: Qwen3.6 shape, long mixed batch", "[decode][gpu][fp32][long]")
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

TEST_CASE("decode fp32: the longest partitions (CUDA-core fold)", "[decode][gpu][fp32]")
{
  test::require_gpu_or_skip();
  for (int block_size : {8, 32})
  {
    INFO("block size " << block_size);
    test::DecodeShape s;
    s.num_heads = 8;
    s.num_kv_heads = 2;
    s.head_size = 128;
    s.block_size = block_size;
    s.partition_tokens = block_size == 8 ? 2048 : 4096;
    s.seq_lens = {9000, s.partition_tokens + 1, 1};
    test::check_decode<T>(s, test::test_seed() + 1200 + block_size);
  }
}
