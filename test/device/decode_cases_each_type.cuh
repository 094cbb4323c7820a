#pragma once
// GPU tests of DevicePagedAttention::Decode that every element type passes: every head size x block
// size x GQA ratio x length, a long Qwen3.6 batch, the longest partitions. Included once per type by
// test_decode_fp16.cu, test_decode_bf16.cu and test_decode_fp32.cu, which define T and DTYPE first (one
// translation unit per type: each type's kernels compile once, and the two CI cores build them in parallel).
#include "device/decode_test_support.cuh"

TEST_CASE("decode " DTYPE ": head sizes x block sizes x GQA x lengths, mixed batches", "[decode][gpu][" DTYPE "]")
{
  GPU_TEST_SEED(seed, 0);
  test::run_matrix<T>(seed);
}

TEST_CASE("decode " DTYPE ": Qwen3.6 shape, long mixed batch", "[decode][gpu][" DTYPE "][long]")
{
  test::require_gpu_or_skip();
  if (test::reduced_matrix()) { return; }
  test::DecodeShape s{{40000, 4097, 1}, /*num_heads=*/24, /*num_kv_heads=*/4, /*head_size=*/256};
  s.reference_heads = 6;
  s.max_seq_len_override = 50000; // max_seq_len is only a host-side bound: a looser one still gives the right answer
  test::check_decode<T>(s, test::test_seed() + 1100);
}

TEST_CASE("decode " DTYPE ": the longest partitions (4096 tokens, 2048 at block size 8: 256 staged block ids)", "[decode][gpu][" DTYPE "]")
{
  GPU_TEST_SEED(seed, 350);
  for (int block_size : {8, 16, 32})
  {
    for (int head_size : {128, 256})
    {
      INFO("block size " << block_size << " head " << head_size);
      test::DecodeShape s;
      s.num_heads = 8;
      s.num_kv_heads = 2;
      s.head_size = head_size;
      s.block_size = block_size;
      s.partition_tokens = block_size == 8 ? 2048 : 4096;
      s.seq_lens = {9000, s.partition_tokens, s.partition_tokens + 1, 1}; // a short last partition, exactly one, one token over
      test::check_decode<T>(s, seed + block_size + head_size);
    }
  }
}
