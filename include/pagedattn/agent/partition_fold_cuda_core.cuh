#pragma once
// A thread block's fold of one KV partition on CUDA cores (every type; the only path for fp32 and on
// BI-V100): warp w folds the 32-token (64 on BI-V100) tiles w, w + warps, ... of the partition into its
// own partials with WarpTileCudaCore, loading K and V straight from the cache into registers, then
// BlockReducePartials merges the warps' partials head by head.
#include <pagedattn/agent/agent_paged_attention_params.cuh>
#include <pagedattn/agent/decode_variant.cuh>
#include <pagedattn/agent/kv_cache_layout.cuh>
#include <pagedattn/block/block_reduce_partials.cuh>
#include <pagedattn/warp/warp_tile_cuda_core.cuh>

#include <cstdint>

namespace pagedattn {

template <class T, int HeadDim, int MaxRows, class Policy, class KvT = T, class KvLayout = VllmKvLayout,
          class ScoreVariant = DefaultScoreVariant>
class PartitionFoldCudaCore {
public:
  static constexpr int block_threads = Policy::block_threads;
  static constexpr int warps = block_threads / warp_threads;
  using Scorer = BoundScoreVariant<ScoreVariant, T, KvT>;
  using WarpTile = WarpTileCudaCore<T, HeadDim, MaxRows, warps, Policy::key_vectors_in_flight, KvT, KvLayout, Scorer>;
  using Reduce = BlockReducePartials<HeadDim, block_threads>;
  static constexpr int tile_tokens = WarpTile::tile_tokens;

  /// Run() writes the partial while it still reads TempStorage: the partial must live elsewhere.
  static constexpr bool partial_after_storage = false;

  struct TempStorage {
    union alignas(16) {
      typename WarpTile::LoopStorage loop; ///< main loop: per-warp scratch
      typename Reduce::TempStorage reduce; ///< after the loop
    } phase;
    typename WarpTile::SharedStorage tile; ///< the group's queries, for the whole loop
    int invalid;
  };

  /// Nothing to stage: the warp tiles read the block table as they go.
  static PAGEDATTN_DEVICE void Prefetch(TempStorage&, const PagedAttentionParams<T, KvT>&, int, int, int) {}

  /// Block-wide. Writes the block's partial of each query row h < work.rows to stats[2h], stats[2h + 1]
  /// (max score, exp sum) and values[h * HeadDim + d]; returns true (in every thread) if a live token's
  /// block id lay outside the cache (that tile was skipped, never read).
  static PAGEDATTN_DEVICE bool Run(TempStorage& temp, const PagedAttentionParams<T, KvT>& p, const ScoreVariant& variant,
                                   const PartitionWork& work, float* stats, float* values)
  {
    if (threadIdx.x == 0) { temp.invalid = 0; }
    WarpTile::LoadQueries(
        temp.tile, work.rows,
        [&](int g) {
          const QueryRow row = query_row(p, work.span, work.seq_len, work.kv_head, work.first_row + g);
          return p.query + row.index * p.query_seq_stride + row.head * p.query_head_stride;
        },
        p.scale * cache_key_scale(p, work.kv_head),
        [&](int g) { return variant.MakeRow(p, query_row(p, work.span, work.seq_len, work.kv_head, work.first_row + g)); }, block_threads);
    __syncthreads();
    const PagedCacheView<KvT>& cache = p; // (the parameters' own: bench/NOTES.md, "Code structure")
    const Scorer scorer{variant, p};
    WarpTile warp_tile(temp.tile, temp.phase.loop, cache, scorer, cache_value_scale(p, work.kv_head), work.rows);
    for (int token0 = work.first_token + arch::warp_id() * tile_tokens; token0 < work.end_token; token0 += warps * tile_tokens)
    {
      // Lane t's token: its cache block, checked before anything is read from it.
      const int pos = token0 + arch::lane_id();
      const bool live = pos < work.end_token;
      const int block_id = live ? p.block_tables[static_cast<std::int64_t>(work.seq) * p.max_blocks_per_seq + pos / p.block_size] : 0;
      if (arch::any_lane(live && (block_id < 0 || block_id >= p.num_blocks)))
      {
        if (arch::lane_id() == 0) { temp.invalid = 1; }
        continue; // never dereference it
      }
      warp_tile.Consume(WarpTileContext{work.kv_head, token0, work.end_token, block_id});
    }
    __syncthreads(); // every warp is done with phase.loop before phase.reduce reuses it

    Reduce reduce(temp.phase.reduce);
#pragma unroll
    for (int g = 0; g < MaxRows; ++g)
    {
      if (g >= work.rows) { continue; } // uniform across the block
      const typename Reduce::Stats s = warp_tile.ReduceHead(reduce, g);
      for (int d = threadIdx.x; d < HeadDim; d += block_threads) { values[g * HeadDim + d] = reduce.weighted_v(d); }
      if (threadIdx.x == 0)
      {
        stats[2 * g] = s.max_score;
        stats[2 * g + 1] = s.exp_sum;
      }
      __syncthreads(); // row 0 of the reduce storage is read before the next head overwrites it
    }
    return temp.invalid != 0; // written before the loop's final barrier
  }
};

} // namespace pagedattn
