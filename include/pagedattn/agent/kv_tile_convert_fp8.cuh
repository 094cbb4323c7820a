#pragma once
// The tensor-core fold of an fp8 cache (sm_90): a tile's fp8 K and V, staged by bulk or tensor copies as
// they lie in the cache (KvTileStageBulk<fp8>), turned into the 16-bit stage that BlockTileTensorCore folds
// (KvTileStageBulk<T> with tensor copies' layout: V swizzled), block-wide, after the fp8 tile landed.
// Every fp8 value is exact in fp16 and bf16, so the fold sees the cache's values; the scales are applied
// by the fold (K's to the scores, V's to the partial).
//
// Units are 16 bytes: 16 fp8 elements, or 8 of T. Per cache block of bs tokens (the stages hold whole
// blocks, in the cache's order):
//   K: fp8 unit (c, t) = dims 16c .. 16c + 15 of token t (the cache's [head/16][bs][16]) becomes the T
//      units (2c, t) and (2c + 1, t) of the 16-bit layout [head/8][bs][8]: one 16-byte read, two 16-byte
//      writes, each phase over consecutive tokens (conflict-free).
//   V: both layouts are [head][bs] elements, so T unit o holds the fp8 elements 8o .. 8o + 7: an 8-byte
//      read and a 16-byte write per unit (consecutive across lanes), placed by the swizzle (Layout::v_place).
// Stale bytes (blocks past the end or outside the cache, never copied) convert to whatever they hold; the
// fold masks their scores, ClearDeadValues zeroes the dead V of the step holding the end, and a bad block
// poisons the partial.
#include <pagedattn/agent/kv_tile_stage_bulk.cuh>
#include <pagedattn/thread/thread_fp8.cuh>
#include <pagedattn/util_fp8.cuh>

#include <cstdint>

namespace pagedattn {

template <class T, class KvT, int HeadDim, int BlockThreads, bool TensorCopies>
class KvTileConvertFp8 {
public:
  static_assert(is_fp8<KvT> && sizeof(T) == 2, "KvTileConvertFp8: an fp8 cache into a 16-bit stage");
  using CacheStage = KvTileStageBulk<KvT, HeadDim, BlockThreads, TensorCopies>; ///< how the fp8 tile lands (V not swizzled)
  using Stage = KvTileStageBulk<T, HeadDim, BlockThreads, true>;         ///< what the fold reads
  static_assert(CacheStage::tile_tokens == Stage::tile_tokens && 2 * CacheStage::k_units == Stage::k_units, "the same tokens");

  /// The 16-bit stage's K unit that half `half` (dims 8 half .. 8 half + 7 of the 16) of fp8 K unit u becomes.
  static PAGEDATTN_HOST_DEVICE int converted_key_unit(int u, int half, int log2_block_size)
  {
    const int row = u >> log2_block_size, token = u & ((1 << log2_block_size) - 1); // row: (cache block, 16-dim vector)
    return ((2 * row + half) << log2_block_size) + token;
  }

  /// Block-wide: convert the Slabs 32-token stages `from[0 .. Slabs-1]` into `to[0 .. Slabs-1]`. The
  /// caller orders the fp8 tile's landing before, and a barrier before the fold reads `to`.
  template <int Slabs>
  static PAGEDATTN_DEVICE void Convert(const typename CacheStage::Storage* from, typename Stage::Storage* to, int log2_block_size)
  {
    constexpr Fp8Format format = KvT::format;
#pragma unroll
    for (int j = 0; j < Slabs; ++j)
    {
      for (int u = threadIdx.x; u < CacheStage::k_units; u += BlockThreads)
      {
        const uint4 w = from[j].k[u];
        uint4 lo, hi;
        fp8x4_to_pairs<format, T>(w.x, lo.x, lo.y);
        fp8x4_to_pairs<format, T>(w.y, lo.z, lo.w);
        fp8x4_to_pairs<format, T>(w.z, hi.x, hi.y);
        fp8x4_to_pairs<format, T>(w.w, hi.z, hi.w);
        to[j].k[converted_key_unit(u, 0, log2_block_size)] = lo;
        to[j].k[converted_key_unit(u, 1, log2_block_size)] = hi;
      }
      const uint2* v = reinterpret_cast<const uint2*>(from[j].v);
      for (int o = threadIdx.x; o < Stage::v_units; o += BlockThreads)
      {
        const uint2 w = v[o];
        uint4 r;
        fp8x4_to_pairs<format, T>(w.x, r.x, r.y);
        fp8x4_to_pairs<format, T>(w.y, r.z, r.w);
        to[j].v[Stage::Layout::v_place(o)] = r;
      }
    }
  }
};

} // namespace pagedattn
