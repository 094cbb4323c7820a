#pragma once
// One slab of the tensor-core decode's pipeline (a pipeline buffer holds one or two): the K and V of 32
// consecutive tokens of one KV head, copied from vLLM's paged cache into shared memory with 16-byte
// asynchronous copies, and the addresses the tensor-core block tile reads its fragments from (ldmatrix rows).
//
// Shared-memory layout of a slab (a "unit" is 16 bytes = 8 elements of the 16-bit type; W =
// tensor_core_head_dim(HeadDim), the head rounded up to whole 16-dim k-steps):
//   K: [W / 8 vectors][32 tokens] units; unit (c, t) holds dims 8c .. 8c+7 of token t. Vectors past the
//      head (head 120: vector 15) are zero-filled, so the padded k-step adds 0 * 0 to each score.
//   V: [W dims][4] units; unit (d, u) holds tokens 8u .. 8u+7 of dim d and lives at
//      d * 4 + (u ^ v_swizzle(d)). Dims past the head are never written: they only reach output rows
//      the tile never stores.
// An ldmatrix phase reads 8 rows of 16 bytes: 8 consecutive tokens of one K vector (128 contiguous bytes),
// or one V unit of 8 consecutive dims, which v_swizzle spreads over the 8 16-byte bank groups.
//
// Copy assignment (one thread = one token of K, one 8-token unit of V, so all index math is per tile):
//   K: lane t copies token t's vectors c = warp, warp + warps, ... (a warp copies 32 tokens x 16 bytes of
//      one vector: 16 * block_size contiguous bytes per cache block);
//   V: lane l copies unit l % 4 of dims l / 4 + 8 * warp + 32 * i (a warp: 8 dims x 64 bytes).
// Tokens at or past the partition's end are zero-filled (never read: the cache past a sequence may hold
// anything, and 0 * NaN would poison the PV product); so are the tokens of a live block whose id lies
// outside [0, num_blocks), which Load reports.
#include <pagedattn/agent/agent_paged_attention_params.cuh>
#include <pagedattn/agent/agent_paged_attention_policy.cuh>
#include <pagedattn/util_arch.cuh>

#include <cstdint>

namespace pagedattn {

template <class T, int HeadDim, int BlockThreads>
class KvSlab {
public:
  static constexpr int tile_tokens = 32;
  static constexpr int warps = BlockThreads / warp_threads;
  static constexpr int tile_dim = tensor_core_head_dim(HeadDim);
  static constexpr int key_vectors = tile_dim / 8;   ///< K units (16-byte vectors) per token in the slab
  static constexpr int cache_vectors = HeadDim / 8;  ///< of them, those the cache holds (the rest are zero)
  static constexpr int v_units_per_dim = tile_tokens / 8;
  static constexpr int k_units = key_vectors * tile_tokens;
  static constexpr int v_units = tile_dim * v_units_per_dim;
  static constexpr int k_copies = (key_vectors + warps - 1) / warps;               ///< K units per thread
  static constexpr int v_dims_per_pass = BlockThreads / v_units_per_dim;      ///< dims covered per V pass
  static constexpr int v_copies = (HeadDim + v_dims_per_pass - 1) / v_dims_per_pass;
  static_assert(sizeof(T) == 2, "KvSlab: 16-bit element types");
  static_assert(HeadDim % 8 == 0, "a key is whole 16-byte vectors");
  // Dependent on T, so checked per instantiation: 64-lane builds (BI-V100) read this header but never
  // instantiate the tensor-core path, and compilers that check non-dependent assertions when they read a
  // template (clang 16, CoreX's compiler) would reject the whole library.
  static_assert(dependent_value<T>(warp_threads) == tile_tokens, "one lane per token");
  static_assert(v_dims_per_pass % 8 == 0, "a V pass keeps each dim's swizzle");

  struct alignas(16) Storage {
    uint4 k[k_units];
    uint4 v[v_units];
  };

  /// How Load moves the tile: every thread's cp.async copies, one commit group per tile (the caller commits).
  static constexpr KvCopy copy = KvCopy::cp_async;
  /// Whether the fold must clear the V of dead tokens itself (no: Load zero-fills them).
  static constexpr bool copies_whole_blocks = false;

  static PAGEDATTN_HOST_DEVICE int v_swizzle(int dim) { return (dim >> 1) & 3; }
  static PAGEDATTN_HOST_DEVICE int k_unit(int vector, int token) { return vector * tile_tokens + token; }
  static PAGEDATTN_HOST_DEVICE int v_unit(int dim, int unit) { return dim * v_units_per_dim + (unit ^ v_swizzle(dim)); }

  /// The units' places, as BlockTileTensorCore asks for them (the same for every block size).
  struct Layout {
    static constexpr bool value_rows = false; ///< V lies dim-major: the PV product reads it with ldmatrix_x4 at v_unit
    PAGEDATTN_DEVICE explicit Layout(int /*log2_block_size*/) {}
    PAGEDATTN_DEVICE int k_unit(int vector, int token) const { return KvSlab::k_unit(vector, token); }
    PAGEDATTN_DEVICE int v_unit(int dim, int unit) const { return KvSlab::v_unit(dim, unit); }
  };

  /// Block-wide: issue the copies of the Slabs consecutive 32-token slabs (`slab[0 .. Slabs-1]`) of the
  /// tile `offset` tokens (a multiple of 32) into the partition from first_token; the caller commits the
  /// group (`landed` is unused: the interface of every slab). `block_ids` are the partition's cache block
  /// ids (read only for blocks holding a live token). Sets `bad` if a live token's block id was outside the
  /// cache.
  template <int Slabs, class Q>
  static PAGEDATTN_DEVICE void Load(Storage* slab, std::uint64_t* /*landed*/, const PagedAttentionParams<Q, T>& p, const int* block_ids,
                                    int kv_head, int first_token, int offset, int end_token, int log2_block_size, bool& bad)
  {
#pragma unroll
    for (int j = 0; j < Slabs; ++j)
    {
      const int slab_offset = offset + j * tile_tokens; // from the partition's first token
      bad |= LoadSlab(slab[j], p, block_ids + (slab_offset >> log2_block_size), kv_head, first_token + slab_offset, end_token, log2_block_size);
    }
  }

private:
  /// One slab of Load.
  template <class Q>
  static PAGEDATTN_DEVICE bool LoadSlab(Storage& slab, const PagedAttentionParams<Q, T>& p, const int* block_ids, int kv_head, int token0,
                                        int end_token, int log2_block_size)
  {
    const int lane = arch::lane_id(), warp = arch::warp_id();
    const std::int64_t head_elems = static_cast<std::int64_t>(HeadDim) << log2_block_size;
    bool bad = false;
    // The cache block of tile token t: the start of its KV head's run, or null when t is not readable.
    auto head_run = [&](int t, const T* cache) -> const T* {
      if (token0 + t >= end_token) { return nullptr; }
      const int id = block_ids[t >> log2_block_size];
      if (id < 0 || id >= p.num_blocks)
      {
        bad = true;
        return nullptr;
      }
      return cache + (static_cast<std::int64_t>(id) * p.num_kv_heads + kv_head) * head_elems;
    };

    // K: token `lane`, element (c, t % block_size, 0) of the block's [key_vectors][block_size][8] run.
    const T* k = head_run(lane, p.key_cache);
    const int k_bytes = k ? 16 : 0; // (a vector past the head: 0, zero-filled, below)
    const T* k_src = k ? k + 8 * (lane & ((1 << log2_block_size) - 1)) + (static_cast<std::int64_t>(8 * warp) << log2_block_size) : p.key_cache;
    const std::int64_t k_step = k ? static_cast<std::int64_t>(8 * warps) << log2_block_size : 0; // warps vectors on
    uint4* k_dst = &slab.k[k_unit(warp, lane)];
#pragma unroll
    for (int i = 0; i < k_copies; ++i, k_src += k_step, k_dst += warps * tile_tokens)
    {
      if (k_copies * warps != key_vectors && warp + i * warps >= key_vectors) { break; } // warp-uniform
      const bool in_head = cache_vectors == key_vectors || warp + i * warps < cache_vectors; // warp-uniform
      arch::copy_async_16(k_dst, in_head ? k_src : p.key_cache, in_head ? k_bytes : 0);
    }

    // V: unit u = lane % 4 (tokens 8u .. 8u+7) of dims d0 + v_dims_per_pass * i, from the [HeadDim][block_size] run.
    const int u = lane % v_units_per_dim, d0 = lane / v_units_per_dim + (warp * warp_threads) / v_units_per_dim;
    const T* v = head_run(8 * u, p.value_cache);
    const int v_bytes = v ? 2 * min(end_token - (token0 + 8 * u), 8) : 0;
    const T* v_src = v ? v + ((8 * u) & ((1 << log2_block_size) - 1)) + (static_cast<std::int64_t>(d0) << log2_block_size) : p.value_cache;
    const std::int64_t v_step = v ? static_cast<std::int64_t>(v_dims_per_pass) << log2_block_size : 0;
    uint4* v_dst = &slab.v[v_unit(d0, u)]; // v_swizzle(d0 + 32 i) == v_swizzle(d0)
#pragma unroll
    for (int i = 0; i < v_copies; ++i, v_src += v_step, v_dst += v_dims_per_pass * v_units_per_dim)
    {
      if (v_copies * v_dims_per_pass != HeadDim && d0 + i * v_dims_per_pass >= HeadDim) { break; } // warp-uniform (8-dim groups)
      arch::copy_async_16(v_dst, v_src, v_bytes);
    }
    return bad;
  }
};

} // namespace pagedattn
