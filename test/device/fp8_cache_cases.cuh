#pragma once
// What the two fp8 test translation units share (test_decode_fp8.cu: e4m3, test_decode_fp8_more.cu: e5m2):
// a cache filled with chosen bytes, and the check of a format's extremes against the fp64 reference.
#include "device/decode_test_support.cuh"

#include <pagedattn/util_fp8.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace test {

/// Overwrite a one-sequence problem's cache (whole blocks, all live) with the given bytes, cycled; returns
/// the values the fp64 reference sees ([token][kv_head][dim], dequantized with the KV head's scales).
template <class KvT>
void fill_live_cache(DeviceDecode<__half, KvT>& dd, const std::vector<std::uint8_t>& key_bytes,
                     const std::vector<std::uint8_t>& value_bytes, std::vector<float>& key_values, std::vector<float>& value_values)
{
  // One sequence of whole blocks: its blocks hold only live tokens.
  const auto& s = dd.prob.shape;
  REQUIRE(dd.prob.num_seqs == 1);
  REQUIRE(s.seq_lens[0] % s.block_size == 0);
  const paged_decode::CacheLayout<KvT> layout{s.num_kv_heads, s.head_size, s.block_size};
  const std::size_t block_elements = layout.block_elements();
  std::vector<KvT> key_block(block_elements), value_block(block_elements);
  key_values.assign(std::size_t(s.seq_lens[0]) * s.num_kv_heads * s.head_size, 0.f);
  value_values = key_values;
  std::size_t n = 0;
  for (int b = 0; b < s.blocks_of(0); ++b)
  {
    for (int kvh = 0; kvh < s.num_kv_heads; ++kvh)
    {
      for (int t = 0; t < s.block_size; ++t)
      {
        for (int d = 0; d < s.head_size; ++d, ++n)
        {
          const KvT k{key_bytes[n % key_bytes.size()]}, v{value_bytes[(n * 7) % value_bytes.size()]};
          key_block[layout.key_offset(0, kvh, d, t)] = k;
          value_block[layout.value_offset(0, kvh, d, t)] = v;
          const std::size_t i = ((std::size_t(b) * s.block_size + t) * s.num_kv_heads + kvh) * s.head_size + d;
          key_values[i] = pagedattn::ElementTraits<KvT>::to_float(k) * float(dd.k_scale_of(kvh));
          value_values[i] = pagedattn::ElementTraits<KvT>::to_float(v) * float(dd.v_scale_of(kvh));
        }
      }
    }
    const std::size_t offset = std::size_t(dd.prob.block_tables[b]) * block_elements;
    CUDA_CHECK(cudaMemcpy(dd.d_key + offset, key_block.data(), block_elements * sizeof(KvT), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dd.d_value + offset, value_block.data(), block_elements * sizeof(KvT), cudaMemcpyHostToDevice));
  }
}

/// One sequence of 256 live tokens whose every K and V byte is one of `bytes` (cycled), dequantized with
/// the given scales, against the fp64 reference over the same values (heads 128, GQA 4).
template <class KvT>
void check_fp8_extremes(const std::vector<std::uint8_t>& bytes, float k_scale, float v_scale, std::uint64_t seed)
{
  using Default = pagedattn::DefaultPagedAttentionPolicies;
  using HeadDims = std::integer_sequence<int, 128, 256>;
  DecodeShape s{{256}, /*num_heads=*/8, /*num_kv_heads=*/2, /*head_size=*/128};
  DeviceDecode<__half, KvT> dd(s, seed);
  dd.set_scales({k_scale, k_scale}, {v_scale, v_scale});
  std::vector<float> keys, values;
  fill_live_cache(dd, bytes, bytes, keys, values);
  const auto out = dd.template run<Default, HeadDims>();
  // The reference over the same dequantized values.
  const int D = s.head_size, group = s.num_heads / s.num_kv_heads, len = s.seq_lens[0];
  for (int h = 0; h < s.num_heads; ++h)
  {
    const int kvh = h / group;
    std::vector<double> score(len), ref(D, 0.0);
    for (int t = 0; t < len; ++t)
    {
      double acc = 0;
      for (int d = 0; d < D; ++d)
      {
        acc += double(__half2float(dd.prob.query[std::size_t(h) * D + d])) * keys[(std::size_t(t) * s.num_kv_heads + kvh) * D + d];
      }
      score[t] = acc * dd.prob.scale;
    }
    const double m = *std::max_element(score.begin(), score.end());
    double sum = 0;
    for (int t = 0; t < len; ++t)
    {
      const double p = std::exp(score[t] - m);
      sum += p;
      for (int d = 0; d < D; ++d) { ref[d] += p * values[(std::size_t(t) * s.num_kv_heads + kvh) * D + d]; }
    }
    std::vector<float> got(D);
    for (int d = 0; d < D; ++d)
    {
      ref[d] /= sum;
      got[d] = __half2float(out[std::size_t(h) * D + d]);
    }
    INFO("head " << h);
    REQUIRE(relative_l2_error(got, ref) < tolerance<__half>());
  }
}

} // namespace test
