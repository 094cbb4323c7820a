#pragma once
// GPU tests of DevicePagedAttention::Decode that every element type passes: every head size x block
// size x GQA ratio x length, a long Qwen3.6 batch, the longest partitions, the decode variants (logit
// soft-cap, attention sinks, sliding windows, the output epilogue). Included once per type by
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

TEST_CASE("decode " DTYPE ": logit soft-cap and attention sinks, alone and combined, against fp64", "[decode][gpu][" DTYPE "][variants]")
{
  GPU_TEST_SEED(seed, 2600);
  // Scores of tens (scale 0.5 instead of 1 / sqrt(head)) under caps of 1.5 and 30; sinks of -inf, 0.5, 2
  // and 4 per head (the sink joins partition 0's partial: one partition, several, and many combine
  // groups); ALiBi on top; a loose max_seq_len (the persistent grid) and a fixed partition size. Sinks
  // with the default scale: beside uncapped scores of tens, a sink makes some outputs so small that fp16
  // holds them as subnormals, whose rounding alone exceeds the tolerance (0.009 at scale 0.5;
  // at the default scale the rounding of the exact outputs stays under 3e-4 for every case here).
  int combo = 0;
  for (const float softcap : {0.f, 1.5f, 30.f})
  {
    for (const bool sinks : {false, true})
    {
      if (softcap == 0.f && !sinks) { continue; }
      for (int head_size : {80, 120, 128, 256})
      {
        ++combo;
        test::DecodeShape s{{1, 17, 1000, 0, 5003}, /*num_heads=*/24, /*num_kv_heads=*/4, head_size};
        s.softcap = softcap;
        s.sinks = sinks;
        s.scale = sinks ? 0.f : 0.5f;
        s.alibi = combo % 2 == 0;
        s.max_seq_len_override = combo % 3 == 0 ? 20000 : -1;
        s.partition_tokens = combo % 4 == 1 ? 64 : 0;
        INFO("softcap " << softcap << " sinks " << sinks << " head " << head_size << " alibi " << s.alibi << " max_seq_len "
                        << s.max_seq_len_override << " partition_tokens " << s.partition_tokens);
        test::check_decode<T>(s, seed + combo);
      }
    }
  }
}

TEST_CASE("decode " DTYPE ": a sink that takes the whole softmax gives exactly 0, a cap of 0 and sinks of -inf the plain bits",
          "[decode][gpu][" DTYPE "][variants]")
{
  GPU_TEST_SEED(seed, 2700);
  test::DecodeShape s{{3000, 1, 40}, /*num_heads=*/8, /*num_kv_heads=*/2, /*head_size=*/128};
  test::DeviceDecode<T> plain(s, seed);
  const auto plain_out = plain.run();
  // Every sink -inf: the same bits as no sinks.
  {
    test::DecodeShape with_sinks = s;
    with_sinks.sinks = true;
    test::DeviceDecode<T> dd(with_sinks, seed);
    dd.sinks.upload(std::vector<float>(std::size_t(s.num_heads), -INFINITY));
    REQUIRE(test::bitwise_equal(dd.run(), plain_out));
  }
  // Sinks of 1e4 (every head but the -inf ones): their outputs are exactly 0, the others unchanged.
  {
    test::DecodeShape big = s;
    big.sinks = true;
    big.sink_base = 1e4f;
    test::DeviceDecode<T> dd(big, seed);
    const auto out = dd.run();
    for (std::size_t i = 0; i < out.size(); ++i)
    {
      const int h = int(i / s.head_size) % s.num_heads;
      INFO("element " << i << " head " << h);
      if (h % 4 == 0) { REQUIRE(test::bitwise_equal(std::vector<T>{out[i]}, std::vector<T>{plain_out[i]})); }
      else { REQUIRE(float(pagedattn::ElementTraits<T>::to_float(out[i])) == 0.f); }
    }
  }
}

TEST_CASE("decode " DTYPE ": sliding windows, alone and with the other variants, against fp64", "[decode][gpu][" DTYPE "][variants][window]")
{
  GPU_TEST_SEED(seed, 3100);
  // Windows that cut through cache blocks and partitions (fixed partitions of 32 and 96 tokens too), longer
  // than every sequence, 0 (the token itself), at every block size; ALiBi, soft-cap and sinks on top; a
  // loose max_seq_len (the persistent grid). The table entries of the blocks wholly before a window are
  // invalid ids: reading one would give NaN and an error count (check_decode requires none).
  int combo = 0;
  for (const int window_left : {0, 1, 37, 100, 1000, 4095, 20000})
  {
    for (int block_size : {8, 16, 32})
    {
      ++combo;
      const int head_size = combo % 3 == 0 ? 256 : combo % 3 == 1 ? 128 : 80;
      test::DecodeShape s{{1, 17, 1000, 0, 5003, 4096}, /*num_heads=*/24, /*num_kv_heads=*/4, head_size, block_size};
      s.window_left = window_left;
      s.alibi = combo % 2 == 0;
      s.softcap = combo % 4 == 1 ? 30.f : 0.f;
      s.sinks = combo % 5 == 2;
      s.max_seq_len_override = combo % 3 == 0 ? 20000 : -1;
      s.partition_tokens = combo % 4 == 3 ? 32 : combo % 4 == 2 ? 96 : 0;
      INFO("window_left " << window_left << " block " << block_size << " head " << head_size << " alibi " << s.alibi << " softcap "
                          << s.softcap << " sinks " << s.sinks << " max_seq_len " << s.max_seq_len_override << " partition_tokens "
                          << s.partition_tokens);
      test::check_decode<T>(s, seed + combo);
    }
  }
}

TEST_CASE("decode " DTYPE ": several new tokens per sequence (q_len 1 .. 8), alone and with the other variants, against fp64",
          "[decode][gpu][" DTYPE "][variants][q_len]")
{
  GPU_TEST_SEED(seed, 3400);
  // New token i of a sequence sees seq_len - q_len + 1 + i positions: lengths shorter than q_len (rows that
  // see nothing, 0), of one block, not multiples of the block or the partition; GQA 1, 6 (24 rows at q_len
  // 4: the tensor-core tile's four n-tiles) and 8 (64 rows at q_len 8: two head parts); windows, ALiBi,
  // soft-cap and sinks on top; fixed partitions of 32 tokens (a new token's last positions in another
  // partition than its first), the persistent grid (a loose max_seq_len); every head size in turn.
  const int heads[][2] = {{24, 4}, {8, 8}, {16, 2}};
  const int head_sizes[] = {64, 80, 96, 112, 120, 128, 192, 256};
  int combo = 0;
  for (int q_len = 1; q_len <= pagedattn::max_q_len; ++q_len)
  {
    for (int variant = 0; variant < 2; ++variant)
    {
      ++combo;
      const auto& h = heads[combo % 3];
      test::DecodeShape s{{1, q_len - 1, 16, 0, 1000 + q_len, 5003}, h[0], h[1], head_sizes[combo % 8], combo % 2 ? 16 : 32};
      s.q_len = q_len;
      s.partition_tokens = variant == 1 && combo % 3 != 1 ? 32 : 0;
      s.max_seq_len_override = variant == 0 && q_len % 3 == 0 ? 20000 : -1;
      if (variant == 1)
      {
        s.window_left = q_len % 2 ? 37 : 700;
        s.alibi = q_len % 3 == 1;
        s.softcap = q_len % 3 == 2 ? 30.f : 0.f;
        s.sinks = q_len % 4 == 3;
      }
      INFO(s.describe());
      test::check_decode<T>(s, seed + combo);
    }
  }
}

TEST_CASE("decode " DTYPE ": per-sequence new tokens (query_start_loc), with the other variants, against fp64", "[decode][gpu][" DTYPE "][variants][q_len]")
{
  GPU_TEST_SEED(seed, 3500);
  // Each sequence its own number of new tokens, 0 .. q_len (packed rows, vLLM's query_start_loc): sequences
  // without rows, fewer rows than the bound (a head part with none at GQA 8), lengths shorter than their
  // rows; rows past the last sequence's, which nothing may write; the variants, fixed partitions and the
  // persistent grid on top, every head size in turn.
  const int heads[][2] = {{24, 4}, {8, 1}, {16, 2}};
  const int head_sizes[] = {64, 80, 96, 112, 120, 128, 192, 256};
  int combo = 0;
  for (int q_len : {1, 3, 4, 8})
  {
    for (int variant = 0; variant < 2; ++variant)
    {
      ++combo;
      const auto& h = heads[combo % 3];
      test::DecodeShape s{{1, q_len, 0, 40, 1000 + q_len, 5003, 700}, h[0], h[1], head_sizes[(combo * 3) % 8], combo % 2 ? 16 : 32};
      s.q_len = q_len;
      for (int q = 0; q < int(s.seq_lens.size()); ++q) { s.query_rows.push_back((q + combo) % (q_len + 1)); }
      s.spare_query_rows = 3;
      s.partition_tokens = variant == 1 && combo % 3 != 1 ? 32 : 0;
      s.max_seq_len_override = variant == 0 && combo % 3 == 0 ? 20000 : -1;
      if (variant == 1)
      {
        s.window_left = q_len % 2 ? 37 : 700;
        s.alibi = combo % 3 == 1;
        s.softcap = combo % 3 == 2 ? 30.f : 0.f;
        s.sinks = combo % 2 == 1;
      }
      INFO(s.describe());
      test::DeviceDecode<T> dd(s, seed + combo);
      const auto out = dd.run_per_sequence();
      const double err = dd.worst_error(out);
      test::report("per-sequence new tokens", DTYPE, err);
      CHECK(err < test::tolerance<T>());
      // The rows past the last sequence's keep the poison.
      const std::size_t written = std::size_t(s.first_row_of(int(s.seq_lens.size()))) * s.num_heads * s.head_size;
      std::vector<unsigned char> poison((out.size() - written) * sizeof(T), 0xFF);
      CHECK(std::memcmp(out.data() + written, poison.data(), poison.size()) == 0);
      CHECK(dd.error_count.download()[0] == 0u);
    }
  }
  // Qwen3.6's heads, 4 and 1 new tokens, 16 sequences under a bound of 100000: the bound's 2112 items are over
  // four waves and within eight, so the tensor-core path keeps the 32-row kernel's plain grid (loose_bound),
  // and most of its blocks find no item.
  std::vector<int> lens{3001};
  for (int i = 1; i < 16; ++i) { lens.push_back(40 + 37 * i); }
  test::DecodeShape s{lens, 24, 4, 256, 16};
  s.q_len = 4;
  for (int i = 0; i < 16; ++i) { s.query_rows.push_back(i % 5 == 4 ? 0 : i % 2 ? 1 : 4); }
  s.max_seq_len_override = 100000;
  test::DeviceDecode<T> dd(s, seed + 99);
  const auto out = dd.run_per_sequence();
  const double err = dd.worst_error(out);
  test::report("per-sequence new tokens", DTYPE, err);
  CHECK(err < test::tolerance<T>());
  CHECK(dd.error_count.download()[0] == 0u);
}

TEST_CASE("decode " DTYPE ": offsets of q_len rows each give the bits of the uniform q_len launch", "[decode][gpu][" DTYPE "][q_len]")
{
  GPU_TEST_SEED(seed, 3600);
  for (int q_len : {1, 2, 5})
  {
    test::DecodeShape s{{3000, 17, 4096, 1, 250}, 24, 4, q_len == 2 ? 128 : 256};
    s.q_len = q_len;
    INFO("q_len " << q_len);
    test::DeviceDecode<T> uniform(s, seed + q_len);
    const auto expected = uniform.run();
    s.query_rows.assign(s.seq_lens.size(), q_len);
    test::DeviceDecode<T> offsets(s, seed + q_len);
    REQUIRE(test::bitwise_equal(offsets.run_per_sequence(), expected));
  }
}

TEST_CASE("decode " DTYPE ": a window as long as the sequence gives the plain bits", "[decode][gpu][" DTYPE "][variants][window]")
{
  GPU_TEST_SEED(seed, 3200);
  test::DecodeShape s{{3000, 1, 40, 0}, /*num_heads=*/8, /*num_kv_heads=*/2, /*head_size=*/128};
  const auto plain_out = test::DeviceDecode<T>(s, seed).run();
  for (const int window_left : {2999, 3000, 1 << 30})
  {
    test::DecodeShape windowed = s;
    windowed.window_left = window_left;
    INFO("window_left " << window_left);
    REQUIRE(test::bitwise_equal(test::DeviceDecode<T>(windowed, seed).run(), plain_out));
  }
}

TEST_CASE("decode " DTYPE ": the output epilogue (a sigmoid gate) on every combine, with the other variants", "[decode][gpu][" DTYPE "][variants][epilogue]")
{
  GPU_TEST_SEED(seed, 3300);
  // One partition (a direct write), several and many combine groups (look-back), an empty sequence; the
  // persistent grid (loose max_seq_len); with a window, soft-cap, sinks and ALiBi on top; three new tokens. One head size:
  // each epilogue type compiles kernels of its own.
  using OneHead = std::integer_sequence<int, 128>;
  for (int combo = 0; combo < 5; ++combo)
  {
    test::DecodeShape s{{1, 17, 1000, 0, 5003}, /*num_heads=*/24, /*num_kv_heads=*/4, /*head_size=*/128};
    s.q_len = combo == 4 ? 3 : 1; // (the gate's rows are the output's: [num_seqs * q_len][heads][head])
    s.partition_tokens = combo == 1 ? 32 : 0;
    s.max_seq_len_override = combo == 2 ? 20000 : -1;
    if (combo == 3)
    {
      s.window_left = 700;
      s.softcap = 30.f;
      s.sinks = true;
      s.alibi = true;
    }
    INFO("combo " << combo);
    test::check_decode_with_gate<T, pagedattn::DefaultPagedAttentionPolicies, T, OneHead>(s, seed + combo);
  }
}
