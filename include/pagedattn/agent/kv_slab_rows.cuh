#pragma once
// One slab of the tensor-core decode's pipeline over caches in token rows (TokenRowsKvLayout: CacheLayout hnd
// and nhd, a token's head_size elements contiguous): the K and V of 32 consecutive tokens of one KV head,
// with the interface of KvSlab and KvSlabBulk (its Layout says value_rows, so BlockTileTensorCore reads V
// transposed, ldmatrix_x4_trans).
//
// Shared-memory layout (a "unit" is 16 bytes: 8 elements of a 16-bit type, 16 of fp8), the same for K and V,
// of rows of W = tensor_core_head_dim(HeadDim) elements, the head rounded up to whole 16-dim k-steps (head
// 120: 128, whose 16th unit, past the head, cp.async zero-fills):
//   rows of whole 128-byte spans (key_vectors a multiple of 8: heads 64, 128, 192, 256 of 16 bits, 128 and
//     256 of fp8): per cache block of the tile, [row bytes / 128 spans][bs tokens][8 units], unit c of a
//     128-byte row at c ^ (token % 8). This is where a tensor copy with the 128-byte swizzle puts a box
//     {128 bytes of dims, bs tokens, spans} of the cache, so sm_90 moves a cache block's run of K or V by
//     one tensor copy (TensorCopies; the dispatch makes the 5-D maps: device/dispatch/decode_tensor_maps.cuh);
//   other heads: [32 tokens][row_units] with row_units key_vectors or key_vectors + 1, whichever is odd,
//     by cp.async only.
// An ldmatrix phase reads 8 rows of 16 bytes: 8 consecutive tokens of one vector (K's A operand, and V's
// transposed), which either placement spreads over the 8 16-byte bank groups.
//
// cp.async copies: unit u = thread + i * BlockThreads of the tile's 32 x key_vectors units is token
// u / key_vectors, vector u % key_vectors, so a warp copies 512 consecutive bytes of rows. Tokens at or
// past the partition's end, and the tokens of a live block whose id lies outside [0, num_blocks)
// (reported), are zero-filled.
// Tensor copies: as KvSlabBulk's (one warp, lane r the run r: K of cache block r / 2 when r is even,
// its V when odd; blocks past the end or outside the cache are not copied, ClearDeadValues zeroes the dead
// tokens' V of the step that holds the end).
#include <pagedattn/agent/agent_paged_attention_params.cuh>
#include <pagedattn/agent/agent_paged_attention_policy.cuh>
#include <pagedattn/agent/kv_slab_bulk.cuh>
#include <pagedattn/util_arch.cuh>

#include <cstdint>

namespace pagedattn {

/// Whether token-row slabs of this head size and element size can be moved by tensor copies (rows of
/// whole 128-byte swizzle spans).
inline constexpr bool token_rows_tensor_copies_fit(int head_dim, int element_bytes) { return head_dim * element_bytes % 128 == 0; }

template <class T, int HeadDim, int BlockThreads, bool TensorCopies = false>
class KvSlabRows {
public:
  static constexpr int tile_tokens = 32;
  static constexpr int elements_per_unit = 16 / static_cast<int>(sizeof(T));
  static constexpr int tile_dim = tensor_core_head_dim(HeadDim);
  static constexpr int key_vectors = tile_dim / elements_per_unit;  ///< units (16-byte vectors) per token row in the slab
  static constexpr int cache_vectors = HeadDim / elements_per_unit; ///< of them, those the cache holds (the rest are zero)
  /// Rows of whole 128-byte spans: the tensor copies' swizzled layout (for cp.async too).
  static constexpr bool span_layout = token_rows_tensor_copies_fit(tile_dim, sizeof(T));
  static constexpr int row_units = span_layout || key_vectors % 2 == 1 ? key_vectors : key_vectors + 1; ///< (the padded layout's row)
  static constexpr int k_units = tile_tokens * row_units;
  static constexpr int v_units = k_units;
  static constexpr int tile_units = tile_tokens * key_vectors;
  static constexpr int copies = (tile_units + BlockThreads - 1) / BlockThreads; ///< cp.async: per thread, per cache
  static_assert(sizeof(T) == 2 || sizeof(T) == 1, "KvSlabRows: 16-bit or fp8 element types");
  static_assert(HeadDim % elements_per_unit == 0, "a token row is whole 16-byte vectors");
  static_assert(span_layout || row_units % 2 == 1, "unswizzled rows of an odd number of units");
  static_assert(!TensorCopies || token_rows_tensor_copies_fit(HeadDim, sizeof(T)), "tensor copies need cache rows of whole 128-byte spans");
  /// A run (one cache block's K or V of one KV head, HeadDim x bs x sizeof(T) bytes >= 1 KB) starts 1024-byte
  /// aligned, as the swizzle's period requires, when the slab array does (the fold's storage).
  static_assert(!span_layout || (k_units * 16) % 1024 == 0, "KvSlabRows: 1024-byte aligned v array");

  struct alignas(16) Storage {
    uint4 k[k_units];
    uint4 v[v_units];
  };

  /// How Load moves the tile: tensor copies (one warp, through the 5-D maps of the cache's strides) or
  /// every thread's cp.async copies.
  static constexpr KvCopy copy = TensorCopies ? KvCopy::bulk_tensor : KvCopy::cp_async;
  /// Whether the fold must clear the V of dead tokens itself (tensor copies bring whole cache blocks).
  static constexpr bool copies_whole_blocks = TensorCopies;

  /// Where a tile's units lie, for the launch's block size (8, 16 or 32 tokens: log2 3, 4 or 5).
  class Layout {
  public:
    /// V lies in token rows: the PV product reads it with ldmatrix_x4_trans at value_row_unit.
    static constexpr bool value_rows = true;
    PAGEDATTN_HOST_DEVICE explicit Layout(int log2_block_size) : log2_bs_(log2_block_size) {}
    PAGEDATTN_HOST_DEVICE int log2_block_size() const { return log2_bs_; }
    /// The unit holding dims elements_per_unit x (vector, vector + 1) of tile token `token`, in K's array or V's.
    PAGEDATTN_HOST_DEVICE int unit(int token, int vector) const
    {
      if constexpr (span_layout)
      {
        const int block = token >> log2_bs_, slot = token & ((1 << log2_bs_) - 1);
        return ((block * key_vectors) << log2_bs_) + (((vector >> 3) << log2_bs_) + slot) * 8 + ((vector & 7) ^ (slot & 7));
      }
      else { return token * row_units + vector; }
    }
    PAGEDATTN_HOST_DEVICE int k_unit(int vector, int token) const { return unit(token, vector); }
    PAGEDATTN_HOST_DEVICE int value_row_unit(int token, int vector) const { return unit(token, vector); }

  private:
    int log2_bs_;
  };

  /// Issue the copies of the Slabs consecutive 32-token slabs (`slab[0 .. Slabs-1]`) of the tile `offset`
  /// tokens (a multiple of 32) into the partition from first_token. cp.async: block-wide, the caller
  /// commits the group (`landed` unused). Tensor copies: warp-wide, one warp, and one arrival on `landed`
  /// that expects their bytes. `block_ids` are the partition's cache block ids (read only for blocks
  /// holding a live token). Sets `bad` (tensor copies: in the lane that saw it) if a live token's block id
  /// was outside the cache.
  template <int Slabs, class Q>
  static PAGEDATTN_DEVICE void Load(Storage* slab, std::uint64_t* landed, const PagedAttentionParams<Q, T>& p, const int* block_ids, int kv_head,
                                    int first_token, int offset, int end_token, int log2_block_size, bool& bad)
  {
    if constexpr (TensorCopies)
    {
#if defined(PAGEDATTN_HAS_BULK_COPY) && PAGEDATTN_HAS_TENSOR_MAPS
      bad |= issue_block_runs<Slabs, tile_tokens>(landed, p, block_ids + (offset >> log2_block_size), first_token + offset, end_token,
                                                  log2_block_size, static_cast<unsigned>(HeadDim * sizeof(T)),
                                                  [&](int in_slab, int block, bool value, int id) {
        uint4* dst = (value ? slab[in_slab].v : slab[in_slab].k) + ((block * key_vectors) << log2_block_size);
        arch::copy_tensor_5d(dst, value ? &p.value_map : &p.key_map, 0, 0, 0, kv_head, id, landed);
      });
#else
      (void)slab; (void)landed; (void)p; (void)block_ids; (void)kv_head; (void)first_token; (void)offset; (void)end_token; (void)log2_block_size;
      (void)bad;
      static_assert(dependent_value<T>(0) != 0, "KvSlabRows: tensor copies need sm_90 code and tensor maps");
#endif
    }
    else
    {
      (void)landed;
  #pragma unroll
      for (int j = 0; j < Slabs; ++j)
      {
        const int slab_offset = offset + j * tile_tokens; // from the partition's first token
        bad |= LoadSlab(slab[j], p, block_ids + (slab_offset >> log2_block_size), kv_head, first_token + slab_offset, end_token, log2_block_size);
      }
    }
  }

  /// Block-wide: zero the V of the dead tokens (at or past end_token) of the 16-token step that holds
  /// end_token, in a landed tile of `slab[0 .. Slabs-1]` (tensor copies bring whole cache blocks).
  template <int Slabs>
  static PAGEDATTN_DEVICE void ClearDeadValues(Storage* slab, int token0, int end_token, int log2_block_size)
  {
    const int live_tokens = end_token - token0; // 1 .. Slabs * tile_tokens - 1: the tile is partly live
    if (live_tokens % 16 == 0) { return; }       // the end is a step boundary: nothing dead is read
    const Layout layout(log2_block_size);
    const int first_dead = live_tokens, step_end = (live_tokens | 15) + 1;
    for (int i = threadIdx.x; i < (step_end - first_dead) * key_vectors; i += BlockThreads)
    {
      const int token = first_dead + i / key_vectors, vector = i % key_vectors;
      slab[token / tile_tokens].v[layout.value_row_unit(token % tile_tokens, vector)] = uint4{0, 0, 0, 0}; // +0 in every type
    }
  }

private:
  /// cp.async, block-wide: one slab of Load.
  template <class Q>
  static PAGEDATTN_DEVICE bool LoadSlab(Storage& slab, const PagedAttentionParams<Q, T>& p, const int* block_ids, int kv_head, int token0,
                                        int end_token, int log2_block_size)
  {
    const Layout layout(log2_block_size);
    bool bad = false;
#pragma unroll
    for (int i = 0; i < copies; ++i)
    {
      const int u = static_cast<int>(threadIdx.x) + i * BlockThreads;
      if (copies * BlockThreads != tile_units && u >= tile_units) { break; }
      const int t = u / key_vectors, c = u % key_vectors;
      std::int64_t offset = -1; // of the unit in either cache, or -1: not readable (a unit past the head too)
      if (token0 + t < end_token && (cache_vectors == key_vectors || c < cache_vectors))
      {
        const int id = block_ids[t >> log2_block_size];
        if (id < 0 || id >= p.num_blocks) { bad = true; }
        else
        {
          offset = id * p.cache_block_stride + kv_head * p.cache_head_stride + (t & ((1 << log2_block_size) - 1)) * p.cache_token_stride +
                   elements_per_unit * c;
        }
      }
      const int bytes = offset >= 0 ? 16 : 0; // 0: zero-fill (the source is not read)
      const int dst = layout.unit(t, c);
      arch::copy_async_16(&slab.k[dst], offset >= 0 ? p.key_cache + offset : p.key_cache, bytes);
      arch::copy_async_16(&slab.v[dst], offset >= 0 ? p.value_cache + offset : p.value_cache, bytes);
    }
    return bad;
  }
};

} // namespace pagedattn
