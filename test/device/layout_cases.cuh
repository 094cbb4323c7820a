#pragma once
// What the GPU tests of caches in token rows share (test_decode_layouts*.cu): CacheLayout hnd
// ([block][kv_head][token][dim]) and nhd ([block][token][kv_head][dim]), packed and as views (strides with
// gaps, which hold NaN: a read of a gap shows), checked against the same fp64 reference as vLLM's layout.
// The tests are three units, each a third of the kernels, so that a parallel build compiles them at once.
#include "device/decode_test_support.cuh"

namespace layout_test {

using pagedattn::CacheLayout;
using pagedattn::fp8_e4m3;
using Default = pagedattn::DefaultPagedAttentionPolicies;
/// The kernels of token rows only (hnd and nhd share them).
using TokenRows = pagedattn::CacheLayoutList<CacheLayout::hnd, CacheLayout::nhd>;
using TwoHeadSizes = std::integer_sequence<int, 128, 256>;

/// Layout `view` of the shape's cache: 0 packed; 1 rows and heads padded; 2 blocks interleaved with
/// another cache's (FlashInfer's [pages][2][...] K/V tensor), padded rows. Strides are multiples of 16
/// bytes for every element type (of 16 elements).
inline void set_layout(test::DecodeShape& s, CacheLayout layout, int view)
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

/// fp16's matrix over the head sizes HeadDims (each block size x layout x GQA 1, 6, 8, 16 x ALiBi, mixed
/// lengths, packed and views), its combinations numbered from first_combo; returns the worst error.
template <int... HeadDims>
double fp16_matrix(std::uint64_t seed, int first_combo)
{
  const int ratios[] = {1, 6, 8, 16};
  int combo = first_combo;
  double worst = 0;
  for (int head_size : {HeadDims...})
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
        worst = std::max(worst, check<__half, __half, std::integer_sequence<int, HeadDims...>>(s, seed + combo));
        ++combo;
      }
    }
  }
  return worst;
}

} // namespace layout_test
