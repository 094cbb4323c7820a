#pragma once
// One slab of the tensor-core decode's pipeline on sm_90: the K and V of 32 consecutive tokens of one KV
// head, moved from vLLM's paged cache into shared memory by bulk copies (cp.async.bulk, the Tensor Memory
// Accelerator), one per cache block and per K or V, with completion on its pipeline buffer's mbarrier. It has the
// interface of KvSlab (the cp.async slab of sm_80), so BlockTileTensorCore folds either.
//
// A bulk copy moves a cache block's run of one KV head as it lies in the cache, so the shared layout
// follows the cache's and depends on the block size bs (a "unit" is 16 bytes = 8 elements; W =
// tensor_core_head_dim(HeadDim), the head rounded up to whole 16-dim k-steps):
//   K: per cache block of the tile, [W / 8 vectors][bs tokens] units (the cache's [head/8][bs][8]);
//   V: per cache block of the tile, [W dims][bs / 8] units (the cache's [head][bs]).
// A run fills the first HeadDim / 8 vectors or HeadDim dims of its block's place. K's vectors past the head
// (head 120: vector 15) are zeroed once per partition (ClearKeyPadding), so the padded k-step adds 0 * 0;
// V's dims past the head stay stale: they only reach output rows the tile never stores.
// An ldmatrix phase reads 8 rows of 16 bytes: for K, 8 consecutive tokens of one vector (128 contiguous
// bytes, conflict-free); for V, one 8-token unit of 8 consecutive dims, which lie 2 * bs bytes apart: no
// conflict at bs 8, two-way at bs 16, four-way at bs 32 with plain bulk copies. TensorCopies (copies of a
// run seen as rows of tensor_copy_row_bytes, V's with the 128-byte swizzle) swizzle V so that every phase
// is conflict-free: the hardware moves 16-byte chunk c of 128-byte row r of shared memory to chunk
// c ^ (r % 8), by address bits, so unit o of the slab's v array lies at o ^ ((o >> 3) & 7) (the array
// starts 1024-byte aligned; a run may start anywhere 128-byte aligned).
// compute-sanitizer's racecheck orders tensor copies by their mbarrier, not plain bulk copies
// (bench/racecheck_bulk_probe.cu): with plain ones it reports hazards that are not there.
//
// An fp8 cache (T of one byte) is staged the same way, its runs as they lie (K [head/16][bs][16], V
// [head][bs] bytes, not swizzled). A K unit is 16 dims of a token (k_unit, the same formula); an ldmatrix
// row of V is a dim's 16 tokens of one cache block (v_fp8_unit, bs >= 16), or, at bs 8, the fold reads
// V by 4-byte words (v_fp8_byte).
//
// Copies: one warp issues a tile's copies, lane r the run r (K of cache block r / 2 when r is even, its V
// when odd). Blocks past the partition's end, and blocks whose id lies outside [0, num_blocks) (reported,
// the caller poisons the partial), are not copied: their shared bytes are stale. Stale K only gives scores
// that the fold masks; stale V would meet a weight of 0 in the PV product (0 * NaN = NaN). The fold skips
// the 16-token steps wholly past the end, and ClearDeadValues zeroes the dead tokens' V in the step that
// holds the end, after the tile lands.
#include <pagedattn/agent/agent_paged_attention_params.cuh>
#include <pagedattn/agent/agent_paged_attention_policy.cuh>
#include <pagedattn/util_arch.cuh>

#include <cstdint>

namespace pagedattn {

/// The rows a tensor copy moves a run in (its box's inner dimension): 128 bytes, the 128-byte swizzle's span.
inline constexpr int tensor_copy_row_bytes = 128;

#if defined(PAGEDATTN_HAS_BULK_COPY)
/// Warp-wide, one warp: the copies of the cache blocks of a tile of Slabs slabs of SlabTokens tokens from
/// token0 (a multiple of SlabTokens), one per run (a cache block's K or V of one KV head: head_bytes per token):
/// lane r issues run r, K of the tile's cache block r / 2 when r is even, its V when odd, by
/// copy(slab, block in the slab, value, block id). One arrival on `landed` expects the bytes of every run
/// copied, before any copy can complete. Blocks past end_token, and blocks whose id lies outside
/// [0, num_blocks), are not copied. Returns true, in the lane that saw it, if a live block's id was
/// outside the cache. (KvSlabBulk's runs as they lie, KvSlabRows' through 5-D tensor maps.)
template <int Slabs, int SlabTokens, class Params, class Copy>
PAGEDATTN_DEVICE bool issue_block_runs(std::uint64_t* landed, const Params& p, const int* block_ids, int token0, int end_token,
                                       int log2_block_size, unsigned head_bytes, Copy&& copy)
{
  static_assert(2 * Slabs * SlabTokens / 8 <= warp_threads, "a lane per copy, at block size 8");
  const int lane = arch::lane_id();
  const int block = lane >> 1, blocks_per_slab = SlabTokens >> log2_block_size;
  const bool value = lane & 1;
  const bool live = block < Slabs * blocks_per_slab && token0 + (block << log2_block_size) < end_token;
  const int id = live ? block_ids[block] : 0;
  const bool readable = live && id >= 0 && id < p.num_blocks;
  const unsigned run_bytes = head_bytes << log2_block_size;
  unsigned bytes = readable ? run_bytes : 0u;
#pragma unroll
  for (int mask = 1; mask < warp_threads; mask *= 2) { bytes += arch::shfl_xor(bytes, mask); }
  if (lane == 0) { arch::mbarrier_arrive_expect_tx(landed, bytes); } // before any copy can complete
  arch::sync_warp();
  if (readable) { copy(block / blocks_per_slab, block & (blocks_per_slab - 1), value, id); }
  return live && !readable;
}
#endif

template <class T, int HeadDim, int BlockThreads, bool TensorCopies = false>
class KvSlabBulk {
public:
  static constexpr int tile_tokens = 32;
  static constexpr int elements_per_unit = 16 / static_cast<int>(sizeof(T)); ///< 8 (16-bit types) or 16 (fp8)
  static constexpr int tile_dim = tensor_core_head_dim(HeadDim);
  static constexpr int key_vectors = tile_dim / elements_per_unit;   ///< K units (16-byte vectors) per token in the slab
  static constexpr int cache_vectors = HeadDim / elements_per_unit;  ///< of them, those a run fills
  static constexpr int v_units_per_dim = tile_tokens / 8;           ///< (16-bit slabs)
  static constexpr int k_units = key_vectors * tile_tokens;
  static constexpr int v_units = k_units;
  /// How Load moves the tile: one warp's bulk copies (tensor copies: through the maps of the cache's
  /// tensor-map shape), which land on the buffer's mbarrier.
  static constexpr KvCopy copy = TensorCopies ? KvCopy::bulk_tensor : KvCopy::bulk;
  /// Whether the fold must clear the V of dead tokens itself (the copies bring whole cache blocks).
  static constexpr bool copies_whole_blocks = true;
  static_assert(sizeof(T) == 2 || sizeof(T) == 1, "KvSlabBulk: 16-bit or fp8 element types");
  static_assert(HeadDim % elements_per_unit == 0, "a key is whole 16-byte vectors");
  // Runs are whole 128-byte rows (head x bs x sizeof(T) bytes, bs >= 8); the v arrays of 16-bit slabs
  // (swizzled by tensor copies) start at multiples of 1024 bytes (the 128-byte swizzle's period) from a
  // 1024-byte aligned slab array, fp8 slabs' (not swizzled) at multiples of 128.
  static constexpr int v_alignment = sizeof(T) == 2 ? 1024 : tensor_copy_row_bytes;
  static_assert(HeadDim * 8 * sizeof(T) % tensor_copy_row_bytes == 0 && k_units * 16 % v_alignment == 0 &&
                    (k_units + v_units) * 16 % v_alignment == 0,
                "KvSlabBulk: the tensor copies' row and swizzle alignment");

  struct alignas(16) Storage {
    uint4 k[k_units];
    uint4 v[v_units];
  };

  /// Where a tile's units lie, for the launch's block size (8, 16 or 32 tokens: log2 3, 4 or 5).
  class Layout {
  public:
    static constexpr bool value_rows = false; ///< V lies dim-major (v_unit, v_fp8_unit)
    PAGEDATTN_HOST_DEVICE explicit Layout(int log2_block_size) : log2_bs_(log2_block_size) {}
    PAGEDATTN_HOST_DEVICE int log2_block_size() const { return log2_bs_; }
    /// Unit holding dims 8 vector .. 8 vector + 7 of tile token `token`.
    PAGEDATTN_HOST_DEVICE int k_unit(int vector, int token) const
    {
      return (((token >> log2_bs_) * key_vectors + vector) << log2_bs_) + (token & ((1 << log2_bs_) - 1));
    }
    /// Unit holding tile tokens 8 unit .. 8 unit + 7 of dim `dim`.
    PAGEDATTN_HOST_DEVICE int v_unit(int dim, int unit) const
    {
      const int log2_units = log2_bs_ - 3; // 8-token units per block row
      return v_place(((unit >> log2_units) * tile_dim << log2_units) + (dim << log2_units) + (unit & ((1 << log2_units) - 1)));
    }
    /// Where unit o of the v array's runs, counted in the cache's order, lies.
    static PAGEDATTN_HOST_DEVICE int v_place(int o) { return TensorCopies ? o ^ ((o >> 3) & 7) : o; }
    /// fp8 slabs, bs >= 16: the unit holding tile tokens 16 unit .. 16 unit + 15 of dim `dim`.
    PAGEDATTN_HOST_DEVICE int v_fp8_unit(int dim, int unit) const
    {
      const int log2_units = log2_bs_ - 4; // 16-token units per block row
      return ((((unit << 4) >> log2_bs_) * tile_dim + dim) << log2_units) + (unit & ((1 << log2_units) - 1));
    }
    /// fp8 slabs: the byte of tile token `token` of dim `dim`.
    PAGEDATTN_HOST_DEVICE int v_fp8_byte(int dim, int token) const
    {
      return (((token >> log2_bs_) * tile_dim + dim) << log2_bs_) + (token & ((1 << log2_bs_) - 1));
    }

  private:
    int log2_bs_;
  };

  /// Where a bulk copy puts the run of cache block `block_in_slab` (0 .. 32 / bs - 1) of a slab: the
  /// first of its units in the slab's k (K run) or v (V run) array. The run's units follow in the cache's order.
  static PAGEDATTN_HOST_DEVICE int run_first_unit(int block_in_slab, bool /*value*/, int log2_block_size)
  {
    return (block_in_slab * key_vectors) << log2_block_size; // a place for a run of K or V: W x bs elements
  }

  /// Warp-wide, one warp: issue the copies of the Slabs consecutive 32-token slabs (`slab[0 .. Slabs-1]`)
  /// of the tile `offset` tokens (a multiple of 32) into the partition from first_token, and one arrival
  /// on `landed` that expects their bytes. `block_ids` are the partition's cache block ids (read only for
  /// blocks holding a live token). Sets `bad`, in the lane that saw it, if a live block's id was outside
  /// the cache.
  template <int Slabs, class Q>
  static PAGEDATTN_DEVICE void Load(Storage* slab, std::uint64_t* landed, const PagedAttentionParams<Q, T>& p, const int* block_ids,
                                    int kv_head, int first_token, int offset, int end_token, int log2_block_size, bool& bad)
  {
#if defined(PAGEDATTN_HAS_BULK_COPY)
    constexpr unsigned head_bytes = static_cast<unsigned>(HeadDim * sizeof(T));
    bad |= issue_block_runs<Slabs, tile_tokens>(landed, p, block_ids + (offset >> log2_block_size), first_token + offset, end_token,
                                                log2_block_size, head_bytes, [&](int in_slab, int block, bool value, int id) {
      uint4* dst = (value ? slab[in_slab].v : slab[in_slab].k) + run_first_unit(block, value, log2_block_size);
      const std::int64_t run = static_cast<std::int64_t>(id) * p.num_kv_heads + kv_head; // the run's index in its cache
      if constexpr (TensorCopies)
      {
#if PAGEDATTN_HAS_TENSOR_MAPS
        arch::copy_tensor_3d(dst, value ? &p.value_map : &p.key_map, 0, 0, static_cast<int>(run), landed);
#else
        static_assert(dependent_value<T>(0) != 0, "KvSlabBulk: tensor copies need a toolkit with tensor maps (CUDA 12+)");
#endif
      }
      else
      {
        const T* cache = value ? p.value_cache : p.key_cache;
        arch::copy_bulk(dst, cache + (run * HeadDim << log2_block_size), head_bytes << log2_block_size, landed);
      }
    });
#else
    (void)slab; (void)landed; (void)p; (void)block_ids; (void)kv_head; (void)first_token; (void)offset; (void)end_token; (void)log2_block_size;
    (void)bad;
    static_assert(dependent_value<T>(0) != 0, "KvSlabBulk needs code compiled for sm_90 (the sm_90 policy only)");
#endif
  }

  /// Block-wide, before the partition's first copies: zero K's vectors past the head (cache_vectors ..
  /// key_vectors - 1) of every token place of `count` x Slabs slabs: runs never write them, and whatever the
  /// storage held before could be NaN.
  template <int Slabs>
  static PAGEDATTN_DEVICE void ClearKeyPadding(Storage* slab, int count, int log2_block_size)
  {
    constexpr int pad = key_vectors - cache_vectors;
    const Layout layout(log2_block_size);
    for (int i = threadIdx.x; i < count * Slabs * tile_tokens * pad; i += BlockThreads)
    {
      const int token = i % tile_tokens, vector = cache_vectors + (i / tile_tokens) % pad, s = i / (tile_tokens * pad);
      slab[s].k[layout.k_unit(vector, token)] = uint4{0, 0, 0, 0};
    }
  }

  /// Block-wide: zero the V of the dead tokens (at or past end_token) of the 16-token step that holds
  /// end_token, in a landed tile of `slab[0 .. Slabs-1]`; BlockTileTensorCore skips the steps after it.
  template <int Slabs>
  static PAGEDATTN_DEVICE void ClearDeadValues(Storage* slab, int token0, int end_token, int log2_block_size)
  {
    const int live_tokens = end_token - token0; // 1 .. Slabs * tile_tokens - 1: the tile is partly live
    if (live_tokens % 16 == 0) { return; }       // the end is a step boundary: nothing dead is read
    const Layout layout(log2_block_size);
    if constexpr (sizeof(T) == 1)
    {
      // fp8: the step's dead tokens of every dim, a byte each (0x00 is +0 in both formats).
      const int first = live_tokens & ~15;
      for (int i = threadIdx.x; i < 16 * HeadDim; i += BlockThreads)
      {
        const int dim = i >> 4, token = first + (i & 15);
        if (token < live_tokens) { continue; }
        reinterpret_cast<unsigned char*>(slab[token / tile_tokens].v)[layout.v_fp8_byte(dim, token % tile_tokens)] = 0;
      }
      return;
    }
    const int first_unit = 2 * (live_tokens / 16); // the step's two 8-token units, counted over the tile
    for (int i = threadIdx.x; i < 2 * HeadDim; i += BlockThreads)
    {
      const int dim = i >> 1, unit = first_unit + (i & 1), first = 8 * unit;
      if (first + 8 <= live_tokens) { continue; }
      uint4& v = slab[unit / v_units_per_dim].v[layout.v_unit(dim, unit % v_units_per_dim)];
      if (first >= live_tokens) { v = uint4{0, 0, 0, 0}; }
      else
      {
        std::uint16_t* e = reinterpret_cast<std::uint16_t*>(&v); // +0 in fp16 and bf16
        for (int k = live_tokens - first; k < 8; ++k) { e[k] = 0; }
      }
    }
  }
};

} // namespace pagedattn
