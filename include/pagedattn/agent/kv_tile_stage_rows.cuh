#pragma once
// One pipeline stage of the tensor-core decode over caches in token rows (CacheLayout hnd and nhd: a
// token's head_size elements contiguous, PagedAttentionParams::token_rows): the K and V of 32 consecutive
// tokens of one KV head, copied with 16-byte asynchronous copies (sm_80+), with the interface of
// KvTileStage (its Layout says value_rows, so BlockTileTensorCore reads V transposed).
//
// Shared-memory layout (a "unit" is 16 bytes = 8 elements of the 16-bit type), the same for K and V:
//   [32 tokens][row_units] units; unit (t, c) holds dims 8c .. 8c+7 of token t at t * row_units + (c ^ (t % 8))
//   when key_vectors is a multiple of 8 (heads 64, 128, 192, 256), else at t * row_units + c with
//   row_units = key_vectors + 1 (odd: heads 80, 96, 112).
// An ldmatrix phase reads 8 rows of 16 bytes: 8 consecutive tokens of one vector c (K's A operand, and V's
// transposed), which either placement spreads over the 8 16-byte bank groups.
//
// Copy assignment: unit u = thread + i * BlockThreads of the tile's 32 x key_vectors units is token
// u / key_vectors, vector u % key_vectors, so a warp copies 512 consecutive bytes of rows (a whole run
// of a cache block in HND, token rows of head_size elements in NHD). Tokens at or past the partition's end,
// and the tokens of a live block whose id lies outside [0, num_blocks) (reported), are zero-filled.
#include <pagedattn/agent/agent_paged_attention_params.cuh>
#include <pagedattn/util_arch.cuh>

#include <cstdint>

namespace pagedattn {

template <class T, int HeadDim, int BlockThreads>
class KvTileStageRows {
public:
  static constexpr int tile_tokens = 32;
  static constexpr int key_vectors = HeadDim / 8; ///< units (16-byte vectors) per token row
  static constexpr bool swizzled = key_vectors % 8 == 0;
  static constexpr int row_units = swizzled ? key_vectors : key_vectors + 1;
  static constexpr int k_units = tile_tokens * row_units;
  static constexpr int v_units = k_units;
  static constexpr int tile_units = tile_tokens * key_vectors;
  static constexpr int copies = (tile_units + BlockThreads - 1) / BlockThreads; ///< per thread, per cache
  static_assert(sizeof(T) == 2, "KvTileStageRows: 16-bit element types");
  static_assert(HeadDim % 16 == 0, "head size must be a multiple of 16");
  static_assert(swizzled || row_units % 2 == 1, "unswizzled rows of an odd number of units");

  struct alignas(16) Storage {
    uint4 k[k_units];
    uint4 v[v_units];
  };

  /// Whether the fold must clear the V of dead tokens itself (no: Load zero-fills them).
  static constexpr bool copies_whole_blocks = false;

  static PAGEDATTN_HOST_DEVICE int unit(int token, int vector)
  {
    return token * row_units + (swizzled ? vector ^ (token & 7) : vector);
  }

  /// The units' places, as BlockTileTensorCore asks for them (the same for every block size).
  struct Layout {
    /// V lies in token rows: the PV product reads it with ldmatrix_x4_trans at value_row_unit.
    static constexpr bool value_rows = true;
    PAGEDATTN_DEVICE explicit Layout(int /*log2_block_size*/) {}
    PAGEDATTN_DEVICE int k_unit(int vector, int token) const { return unit(token, vector); }
    PAGEDATTN_DEVICE int value_row_unit(int token, int vector) const { return unit(token, vector); }
  };

  /// Issue the copies of the tile starting at token0 (a multiple of the block size) into `stage`; the
  /// caller commits the group. `block_ids` are the tile's cache block ids (read only for blocks holding a
  /// live token). Returns true if a live token's block id was outside the cache.
  static PAGEDATTN_DEVICE bool Load(Storage& stage, const PagedAttentionParams<T>& p, const int* block_ids, int kv_head, int token0,
                                    int end_token, int log2_block_size)
  {
    bool bad = false;
#pragma unroll
    for (int i = 0; i < copies; ++i)
    {
      const int u = static_cast<int>(threadIdx.x) + i * BlockThreads;
      if (copies * BlockThreads != tile_units && u >= tile_units) { break; }
      const int t = u / key_vectors, c = u % key_vectors;
      std::int64_t offset = -1; // of the unit's row in either cache, or -1: not readable
      if (token0 + t < end_token)
      {
        const int id = block_ids[t >> log2_block_size];
        if (id < 0 || id >= p.num_blocks) { bad = true; }
        else
        {
          offset = id * p.cache_block_stride + kv_head * p.cache_head_stride + (t & ((1 << log2_block_size) - 1)) * p.cache_token_stride +
                   8 * c;
        }
      }
      const int bytes = offset >= 0 ? 16 : 0; // 0: zero-fill (the source is not read)
      arch::copy_async_16(&stage.k[unit(t, c)], offset >= 0 ? p.key_cache + offset : p.key_cache, bytes);
      arch::copy_async_16(&stage.v[unit(t, c)], offset >= 0 ? p.value_cache + offset : p.value_cache, bytes);
    }
    return bad;
  }
};

} // namespace pagedattn
