#pragma once
// A thread block's fold of one KV partition on tensor cores (fp16/bf16, sm_80+): a multi-stage
// asynchronous-copy pipeline streams the partition's K and V tiles into shared memory while the block
// folds the tile that has landed (BlockTileTensorCore). The cache's layout type (agent/kv_cache_layout.cuh)
// chooses the copies from the policy's (KvLayout::kv_copy) and the slab they fill (KvLayout::Slab), one of:
//   cp_async    (KvSlab, sm_80+): every thread copies 16-byte pieces; a tile is one commit group.
//   bulk        (KvSlabBulk, sm_90): one warp issues a bulk copy per cache block's K and V run; a
//               tile lands on its buffer's mbarrier. Fewer instructions issued beside the fold's
//               (the probe bench_paged_read measured it with the fold's work in:
//               bench/NOTES.md, "Tensor copies on sm_90").
//   bulk_tensor (KvSlabBulk with tensor copies, sm_90): the same runs through the tensor maps of
//               PagedAttentionParams, V swizzled.
//
// Pipeline (Policy::stages buffers, each of `slabs` 32-token slabs; S = stages):
//   prologue: issue tiles 0 .. S-2 (cp.async: one commit group each, empty groups keep the count uniform)
//   tile i, cp.async: wait until at most S-2 younger groups are pending (tile i landed for this thread),
//             barrier (tile i visible to all; every warp done with tile i-1, whose buffer is refilled
//             next), issue tile i+S-1 into buffer (i-1) mod S, fold tile i;
//   tile i, bulk: barrier (every warp done with tile i-1), issue tile i+S-1 into buffer (i-1) mod S, wait
//             for phase i / S of buffer i mod S's mbarrier (tile i landed and visible to this thread),
//             fold tile i.
// So S-1 tiles are in flight while one is folded (bulk: all S while the block waits), and no register
// holds data in flight: the bytes in flight per SM are what the SMEM budget allows, not the register file.
//
// Caches in token rows (TokenRowsKvLayout: CacheLayout hnd, nhd) are staged by KvSlabRows (the tile reads V
// transposed): by tensor copies on sm_90 at heads 64, 128, 192 and 256 (5-D maps of the strided cache), by
// cp.async otherwise.
//
// An fp8 cache (KvT, sm_90 copies only): the tiles land as they lie in the cache, in 2 S buffers (the
// bytes in flight of S 16-bit ones), and the tile converts each element into its mma operand as it reads
// it (BlockTileTensorCore). The pipeline is the bulk one.
#include <pagedattn/agent/agent_paged_attention_params.cuh>
#include <pagedattn/agent/agent_paged_attention_policy.cuh>
#include <pagedattn/agent/decode_variant.cuh>
#include <pagedattn/agent/kv_cache_layout.cuh>
#include <pagedattn/block/block_tile_tensor_core.cuh>

#include <cstdint>
#include <type_traits>

namespace pagedattn {

template <class T, int HeadDim, int MaxRows, class Policy, class KvT = T, class KvLayout = VllmKvLayout,
          class ScoreVariant = DefaultScoreVariant>
class PartitionFoldTensorCore {
public:
  static constexpr int block_threads = Policy::block_threads;
  static constexpr int warps = block_threads / warp_threads;
  static constexpr bool fp8_cache = is_fp8<KvT>;
#if defined(PAGEDATTN_HAS_BULK_COPY)
  static constexpr bool bulk_copies_compiled = true;
#else
  static constexpr bool bulk_copies_compiled = false;
#endif
  /// The copies (the layout's choice, which the host's tensor maps follow) and the slab they fill (fp8: the
  /// cache's bytes as they lie).
  static constexpr KvCopy kv_copy = KvLayout::kv_copy(Policy::kv_copy, bulk_copies_compiled, HeadDim, sizeof(KvT));
  static constexpr bool bulk_copies = kv_copy != KvCopy::cp_async;
  using Slab = typename KvLayout::template Slab<KvT, HeadDim, block_threads, kv_copy>;
  static_assert(sizeof(typename KvLayout::template Slab<KvT, HeadDim, block_threads, KvCopy::cp_async>::Storage) ==
                    sizeof(typename KvLayout::template Slab<KvT, HeadDim, block_threads, KvLayout::kv_copy(Policy::kv_copy, true, HeadDim, sizeof(KvT))>::Storage),
                "the host sizes the block's storage with the slab of either pass");
  /// Query rows of the tile: one n-tile of 8 (a GQA group of up to 8 heads, one new token), else four.
  static constexpr int tile_rows = MaxRows <= 8 ? 8 : 32;
  /// 32-token slabs folded per step: as many as fit Policy::tile_bytes of K and V, up to 2 of 16-bit elements
  /// and 4 of fp8, so that the per-step softmax and barriers are paid per ~tile_bytes, not per 32 tokens
  /// (16-bit heads <= 128 fold 64 tokens at once; fp8 head 256 64, heads <= 128 128: the fold's fixed cost
  /// per step is the same for half the bytes). One with four n-tiles: their scores take registers per slab
  /// (2 m-tiles x 4 n-tiles x 4 floats).
  static constexpr int slab_bytes = static_cast<int>(sizeof(typename Slab::Storage)); ///< K and V of 32 tokens (and any padding)
  static constexpr int slabs_fitting = Policy::tile_bytes / slab_bytes;
  static constexpr int max_slabs = fp8_cache ? 4 : 2;
  static constexpr int slabs = slabs_fitting >= 2 && tile_rows == 8 ? (slabs_fitting < max_slabs ? slabs_fitting : max_slabs) : 1;
  /// Buffers of tiles: the policy's; an fp8 cache's tiles of fewer than tile_bytes get more of them, so
  /// that stages x tile_bytes are in flight (heads 256 and 128 fold 2 tiles of 32 KB, of 64 and 128 tokens;
  /// head 64 4 of 16 KB), at least the 16-bit pipeline's bytes.
  static constexpr int stages = Policy::stages * (fp8_cache && slabs_fitting > slabs ? slabs_fitting / slabs : 1);
  static_assert(!fp8_cache || Policy::kv_copy != KvCopy::cp_async, "an fp8 cache on tensor cores: sm_90 copies only (uses_tensor_cores)");
  using Scorer = BoundScoreVariant<ScoreVariant, T, KvT>;
  using Tile = BlockTileTensorCore<T, HeadDim, warps, slabs, Slab, KvT, tile_rows, Scorer>;
  static constexpr int tile_tokens = Tile::tile_tokens;
  static_assert(stages >= 2, "the pipeline needs at least two stages");
  static_assert(MaxRows <= Tile::max_rows, "the tensor-core tile holds at most 32 query rows");

  /// Cache blocks of a partition: the dispatch keeps partition_tokens / block_size within this.
  static constexpr int max_partition_blocks = Policy::max_partition_blocks;

  /// Run() is done with TempStorage before it writes the partial (which may therefore live inside it).
  static constexpr bool partial_after_storage = true;

  /// First and 128-byte aligned: the slabs' copies and ldmatrix reads are 128-byte rows. The same layout
  /// 16 bytes off a 128-byte boundary made the decode 40 % slower on H200
  /// (bench/NOTES.md, "The K/V pipeline: stages and alignment").
  struct alignas(128) TempStorage {
    typename Slab::Storage slab[stages][slabs]; ///< the pipeline: stages buffers of slabs slabs
    typename Tile::TempStorage tile;
    int block_ids[max_partition_blocks]; ///< the partition's block table entries
    std::uint64_t landed[stages];         ///< bulk copies: each buffer's mbarrier (one phase per tile)
  };

  /// Block-wide, before the sequence's length is known (so that the two loads overlap): stage the block
  /// table entries of the partition starting at first_token, as far as the table row goes. Run() reads
  /// only those of live tokens.
  static PAGEDATTN_DEVICE void Prefetch(TempStorage& temp, const PagedAttentionParams<T, KvT>& p, int seq, int first_token, int partition_tokens)
  {
    const int log2_block_size = 31 - __clz(p.block_size); // (8, 16 or 32: shifts, not divisions)
    const int first_block = first_token >> log2_block_size;
    const int blocks = min(partition_tokens >> log2_block_size, p.max_blocks_per_seq - first_block);
    const int* table = p.block_tables + static_cast<std::int64_t>(seq) * p.max_blocks_per_seq + first_block;
    for (int b = threadIdx.x; b < blocks; b += block_threads) { temp.block_ids[b] = table[b]; }
  }

  /// Block-wide, after Prefetch; same contract as PartitionFoldCudaCore::Run (a bad block id zero-fills
  /// its tokens, and the caller poisons the partial), except that stats and values may alias `temp`.
  static PAGEDATTN_DEVICE bool Run(TempStorage& temp, const PagedAttentionParams<T, KvT>& p, const ScoreVariant& variant,
                                   const PartitionWork& work, float* stats, float* values)
  {
    const int log2_block_size = 31 - __clz(p.block_size);
    const int tiles = ceil_div(work.end_token - work.first_token, tile_tokens);
#if defined(__CUDA_ARCH__)
    static_assert(!fp8_cache || KvLayout::value_rows || bulk_copies, "an fp8 cache in vLLM's layout on tensor cores needs the sm_90 copies (code compiled for sm_90)");
#endif
    if constexpr (bulk_copies)
    {
#if defined(PAGEDATTN_HAS_BULK_COPY)
      // This thread's earlier plain stores into the storage (a previous item's partial and combine, its
      // cleared values) are ordered before the copies that will overwrite them.
      arch::fence_proxy_async_shared();
      if (threadIdx.x == 0)
      {
        for (int s = 0; s < stages; ++s) { arch::mbarrier_init(&temp.landed[s], 1); }
        arch::fence_mbarrier_init();
      }
#endif
    }
    // A head padded to whole k-steps: K's vectors past it, which whole-run copies never write (cp.async
    // zero-fills them with each tile).
    if constexpr (bulk_copies && Slab::cache_vectors != Slab::key_vectors) { Slab::template ClearKeyPadding<slabs>(&temp.slab[0][0], stages, log2_block_size); }
    Tile::StoreRows(temp.tile, work.rows, [&](int r) { // (read after the tile loop's barriers)
      return variant.MakeRow(p, query_row(p, work.span, work.seq_len, work.kv_head, work.first_row + r));
    });
    __syncthreads(); // the prefetched block ids (and the mbarriers)
    PAGEDATTN_TRACE_POINT(TracePoint::block_ids_staged);

    bool bad = false;
    // Tile i into buffer i mod S (a tile past the partition's: an empty cp.async group).
    auto load = [&](int i) {
      if constexpr (bulk_copies)
      {
        if (i < tiles && arch::warp_id() == 0)
        {
          const int offset = i * tile_tokens; // from the partition's first token
          Slab::template Load<slabs>(temp.slab[i % stages], &temp.landed[i % stages], p, temp.block_ids, work.kv_head, work.first_token, offset,
                                     work.end_token, log2_block_size, bad);
        }
      }
      else if constexpr (Slab::copy == KvCopy::cp_async) // (not an fp8 slab in a host pass: it is never run)
      {
        if (i < tiles)
        {
          const int offset = i * tile_tokens;
          Slab::template Load<slabs>(temp.slab[i % stages], nullptr, p, temp.block_ids, work.kv_head, work.first_token, offset, work.end_token,
                                     log2_block_size, bad);
        }
        arch::copy_async_commit();
      }
    };

    const Scorer scorer{variant, p};
    Tile tile(
        temp.tile, scorer,
        [&](int r) {
          const QueryRow query = query_row(p, work.span, work.seq_len, work.kv_head, work.first_row + r);
          return p.query + query.index * p.query_seq_stride + query.head * p.query_head_stride;
        },
        work.rows, p.scale * cache_key_scale(p, work.kv_head), cache_value_scale(p, work.kv_head), log2_block_size);
#pragma unroll
    for (int i = 0; i < stages - 1; ++i) { load(i); }
    for (int i = 0; i < tiles; ++i)
    {
      const int token0 = work.first_token + i * tile_tokens;
      if constexpr (bulk_copies)
      {
        // Each thread's wait on the mbarrier makes tile i visible to it, so the barrier only frees buffer
        // (i-1) mod S, and tile i+S-1 is issued before tile i lands: up to S tiles in flight, not S-1.
        __syncthreads();
        load(i + stages - 1);
#if defined(PAGEDATTN_HAS_BULK_COPY)
        arch::mbarrier_wait(&temp.landed[i % stages], (i / stages) & 1);
#endif
      }
      else
      {
        arch::copy_async_wait<stages - 2>();
        __syncthreads();
        load(i + stages - 1);
      }
      if (i == 0) { PAGEDATTN_TRACE_POINT(TracePoint::first_tile_landed); }
      typename Slab::Storage* folded = temp.slab[i % stages];
      if (token0 + tile_tokens > work.end_token) // the partition's last tile, partly live (block-uniform)
      {
        // Visible to the tile's PV product after the barriers inside Consume.
        if constexpr (Slab::copies_whole_blocks) { Slab::template ClearDeadValues<slabs>(folded, token0, work.end_token, log2_block_size); }
        tile.template Consume<true>(folded, token0, work.end_token);
      }
      else { tile.template Consume<false>(folded, token0, work.end_token); }
    }
    if constexpr (bulk_copies)
    {
#if defined(PAGEDATTN_HAS_BULK_COPY)
      // Every copy has landed, and every thread is past its last wait: the waits come before the last
      // tile's Consume, whose barriers thread 0 has passed. So the mbarriers may end; their storage is
      // reused with the stages'.
      if (threadIdx.x == 0)
      {
        for (int s = 0; s < stages; ++s) { arch::mbarrier_inval(&temp.landed[s]); }
      }
#endif
    }
    else { arch::copy_async_wait<0>(); } // only empty groups remain; nothing may land after the storage is reused
    __syncthreads();                     // every warp is done with the stages: the partial may overwrite them
    tile.StorePartial(stats, values);
    return __syncthreads_or(bad) != 0;
  }
};

} // namespace pagedattn
