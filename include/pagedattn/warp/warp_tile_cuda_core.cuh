#pragma once
// The CUDA-core warp tile of the paged decode (every type; the only path for fp32 and on BI-V100).
//
// A warp folds warp_threads tokens at a time into one running WarpAttentionPartial per query row (the decode's QueryRow:
// a head of the KV head's GQA group and a new token; "head" below):
//   QK: lane t scores token t of the tile against every query of the group: it reads the key's 16-byte
//       slices (vLLM's x-packed layout: for a fixed slice, consecutive lanes read consecutive 16 bytes)
//       and the queries from shared memory (one broadcast address per warp), so no shuffle is needed.
//   softmax: the tile's logits per head (the Scorer's mask and Logits, as BlockTileTensorCore's:
//       block/block_tile_tensor_core.cuh), relative to the tile maximum (WarpReduceShfl max and sum),
//       folded in with begin_tile(); the weights go to per-warp shared memory.
//   PV: lane l owns dimensions l + i * warp_threads and reads their V rows (8 contiguous tokens: 16 bytes
//       for fp16) once for all heads.
// The cache is read through a PagedCacheView (its pointers and strides, no other launch parameter) and a
// KvLayout type (VllmKvLayout or TokenRowsKvLayout: agent/kv_cache_layout.cuh), whose key_token_stride and
// key_vector_stride place a key's vectors and whose value_rows says where V lies. Caches in token rows
// (CacheLayout hnd and nhd, their strides read at run time) take kernels of their own: a lane's key is its token's row (16-byte slices x elements apart), and the PV step
// goes token by token, lane l owning the consecutive dims l * items .. (ConsumeValueRows: one load per
// token where they fill whole 4, 8 or 16 bytes), which ReduceHead hands to the block reduce as such.
// An fp8 cache (KvT fp8_e4m3 or fp8_e5m2) is dequantized as float(fp8) * scale with the scales folded in
// where they cost least: K's into the queries (one multiply per query element per partition), V's into
// the softmax weights the PV products use (one per token and head; the exp sums stay unscaled), so that
// the output is sum(w * v_scale * v) / sum(w). vLLM's fp8 key layout has x = 16 (16 / sizeof(KvT)).
#include <pagedattn/util_arch.cuh>
#include <pagedattn/util_type.cuh>
#include <pagedattn/warp/warp_attention_partial.cuh>
#include <pagedattn/warp/warp_reduce_shfl.cuh>

#include <cstdint>
#include <type_traits>

namespace pagedattn {

/// The paged cache as the warp tile reads it (strides in elements): cache block b's run of KV head h starts
/// at b * cache_block_stride + h * cache_head_stride of either cache; in token rows, a token's row is
/// cache_token_stride further than the previous one's (vLLM's layout: 0, its runs are KvLayout's).
template <class KvT>
struct PagedCacheView {
  const KvT* key_cache;
  const KvT* value_cache;
  std::int64_t cache_block_stride, cache_head_stride, cache_token_stride;
  int block_size;
};

/// What a warp needs to know about the tile of tokens it folds.
struct WarpTileContext {
  int kv_head;
  int token0;        ///< first token of the tile (live: token0 < end_token)
  int end_token;     ///< end of the partition's valid tokens
  int lane_block_id; ///< cache block of token token0 + lane, checked to lie in [0, num_blocks) when live
};

/// KeyVectorsInFlight: how far a lane's key loads are unrolled (the policy's key_vectors_in_flight). Scorer: as
/// BlockTileTensorCore's (Row, Visible, Logits).
template <class T, int HeadDim, int MaxRows, int Warps, int KeyVectorsInFlight, class KvT, class KvLayout, class Scorer>
class WarpTileCudaCore {
public:
  static constexpr int tile_tokens = warp_threads;  ///< one token per lane
  static constexpr int max_rows = MaxRows;
  static constexpr int x = elements_per_vector<KvT>;
  static constexpr int key_vectors = HeadDim / x;   ///< 16-byte vectors of one key
  static constexpr int v_vectors = tile_tokens / 8; ///< 8-token V vectors per tile (8 = smallest block)
  using Partial = WarpAttentionPartial<HeadDim>;
  static_assert(HeadDim % x == 0, "a key is a whole number of 16-byte vectors");

  using Row = typename Scorer::Row;

  /// Block-wide: the rows' queries, pre-scaled, fp32, and what the variant keeps of each row.
  struct SharedStorage {
    alignas(16) float query[MaxRows][HeadDim];
    Row row[MaxRows]; ///< rows past the tile's: Row{}, which sees nothing
  };
  /// Per-warp scratch of the main loop (may alias other storage after the loop).
  struct LoopStorage {
    alignas(16) float weights[Warps][MaxRows][tile_tokens];
  };

  /// Block-wide: the rows' queries (query_of(g): row g's HeadDim elements, for g < rows), times `scale` (the
  /// softmax scale, times K's dequantization scale for an fp8 cache), and the scorer's rows (make_row(g)) to
  /// shared memory. The caller syncs before the first Consume().
  template <class QueryOf, class MakeRow>
  static PAGEDATTN_DEVICE void LoadQueries(SharedStorage& shared, int rows, QueryOf&& query_of, float scale, MakeRow&& make_row, int block_threads)
  {
    for (int i = threadIdx.x; i < MaxRows * HeadDim; i += block_threads)
    {
      const int g = i / HeadDim, d = i % HeadDim;
      float q = 0.f;
      if (g < rows) { q = ElementTraits<T>::to_float(query_of(g)[d]) * scale; }
      shared.query[g][d] = q;
    }
    for (int g = threadIdx.x; g < MaxRows; g += block_threads) { shared.row[g] = g < rows ? make_row(g) : Row{}; }
  }

  /// value_scale: an fp8 cache's V scale (else unused). The tile keeps a reference to the cache view: pass
  /// one that lies in the kernel's parameters (PagedAttentionParams is one), whose fields the loop reads
  /// where they lie; a copy in registers cost the fp32 kernels spills.
  PAGEDATTN_DEVICE WarpTileCudaCore(const SharedStorage& shared, LoopStorage& loop, const PagedCacheView<KvT>& cache, const Scorer& scorer,
                                   float value_scale, int rows)
      : shared_(shared), loop_(loop), cache_(cache), scorer_(scorer), value_scale_(value_scale), rows_(rows)
  {
#pragma unroll
    for (int g = 0; g < MaxRows; ++g) { partial_[g].reset(); }
  }

  /// Fold tokens [token0, min(token0 + tile_tokens, end_token)) into the warp's partials.
  PAGEDATTN_DEVICE void Consume(const WarpTileContext& c)
  {
    const int lane = arch::lane_id(), warp = arch::warp_id();
    const int pos = c.token0 + lane;
    const bool live = pos < c.end_token;
    const std::int64_t head_offset = c.lane_block_id * cache_.cache_block_stride + c.kv_head * cache_.cache_head_stride;
    // K's vector ch of the lane's token: vLLM's [head / x][block_size][x] run, or a token row.
    const std::int64_t key_token_stride = KvLayout::template key_token_stride<x>(cache_);
    const std::int64_t key_vector_stride = KvLayout::template key_vector_stride<x>(cache_);

    // QK: the lane's whole key against every query of the group.
    float score[MaxRows];
#pragma unroll
    for (int g = 0; g < MaxRows; ++g) { score[g] = 0.f; }
    if (live)
    {
      const KvT* k = cache_.key_cache + head_offset + (pos % cache_.block_size) * key_token_stride;
#pragma unroll(KeyVectorsInFlight)
      for (int ch = 0; ch < key_vectors; ++ch)
      {
        float kf[x];
        load_vector_as_float(k + ch * key_vector_stride, kf);
#pragma unroll
        for (int g = 0; g < MaxRows; ++g)
        {
          if (g < rows_)
          {
#pragma unroll
            for (int e = 0; e < x; e += 4)
            {
              const float4 q = *reinterpret_cast<const float4*>(&shared_.query[g][ch * x + e]);
              score[g] = fmaf(q.x, kf[e], score[g]);
              score[g] = fmaf(q.y, kf[e + 1], score[g]);
              score[g] = fmaf(q.z, kf[e + 2], score[g]);
              score[g] = fmaf(q.w, kf[e + 3], score[g]);
            }
          }
        }
      }
    }

    // softmax of the tile per head, relative to the tile maximum, folded in with begin_tile().
#pragma unroll
    for (int g = 0; g < MaxRows; ++g)
    {
      if (g < rows_)
      {
        const Row& row = shared_.row[g];
        const bool visible = live && scorer_.Visible(row, pos);
        float logit[1] = {score[g]};
        if (visible) { scorer_.Logits(logit, row, pos); }
        const float s = visible ? logit[0] : -INFINITY;
        const float tile_max = WarpReduceShfl<float>::AllMax(s); // -inf when no token of the tile is visible (then e = 0)
        const float e = visible ? expf(s - tile_max) : 0.f;
        const float beta = partial_[g].begin_tile(tile_max, WarpReduceShfl<float>::AllSum(e));
        if constexpr (is_fp8<KvT>) { loop_.weights[warp][g][lane] = beta * e * value_scale_; } // (the exp sum stays unscaled)
        else { loop_.weights[warp][g][lane] = beta * e; }
      }
    }
    arch::sync_warp();

    if constexpr (KvLayout::value_rows) { ConsumeValueRows(c); }
    else
    {
      // PV: lane owns dims lane + i * warp_threads; the V row of a dim holds 8 tokens per load.
#pragma unroll
      for (int j = 0; j < v_vectors; ++j)
      {
        const int vpos = c.token0 + 8 * j;
        const int vblock = arch::shfl_idx(c.lane_block_id, 8 * j); // lane 8j owns token vpos
        if (vpos >= c.end_token) { break; }                        // uniform
        const int valid = c.end_token - vpos; // tokens past the end are zeroed: the cache there may hold NaN
        const KvT* v = cache_.value_cache + vblock * cache_.cache_block_stride + c.kv_head * cache_.cache_head_stride + vpos % cache_.block_size;
#pragma unroll
        for (int i = 0; i < Partial::items_per_lane; ++i)
        {
          const int d = Partial::dim(lane, i);
          if (d < HeadDim)
          {
            float vf[8];
            load_eight_as_float(v + static_cast<std::int64_t>(d) * cache_.block_size, vf);
            if (valid < 8)
            {
#pragma unroll
              for (int t = 0; t < 8; ++t) { vf[t] = t < valid ? vf[t] : 0.f; }
            }
#pragma unroll
            for (int g = 0; g < MaxRows; ++g)
            {
              if (g < rows_)
              {
                const float4 w0 = *reinterpret_cast<const float4*>(&loop_.weights[warp][g][8 * j]);
                const float4 w1 = *reinterpret_cast<const float4*>(&loop_.weights[warp][g][8 * j + 4]);
                float acc = partial_[g].weighted_v[i];
                acc = fmaf(w0.x, vf[0], acc);
                acc = fmaf(w0.y, vf[1], acc);
                acc = fmaf(w0.z, vf[2], acc);
                acc = fmaf(w0.w, vf[3], acc);
                acc = fmaf(w1.x, vf[4], acc);
                acc = fmaf(w1.y, vf[5], acc);
                acc = fmaf(w1.z, vf[6], acc);
                acc = fmaf(w1.w, vf[7], acc);
                partial_[g].weighted_v[i] = acc;
              }
            }
          }
        }
      }
    }
    arch::sync_warp(); // the weights are rewritten by the warp's next tile
  }

  /// Block-wide: merge every warp's partial of head g (g a compile-time-unrolled index) with `reduce`.
  template <class Reduce>
  PAGEDATTN_DEVICE typename Reduce::Stats ReduceHead(Reduce& reduce, int g) const
  {
    if constexpr (!KvLayout::value_rows) { return reduce.Reduce(partial_[g]); }
    else
    {
      const int lane = arch::lane_id(), warp = arch::warp_id(); // token rows: the lanes' slots hold row_dim's dims
      if (lane == 0) { reduce.StoreWarpStats(warp, partial_[g].max_score, partial_[g].exp_sum); }
#pragma unroll
      for (int i = 0; i < Partial::items_per_lane; ++i)
      {
        if (row_dim(lane, i) < HeadDim) { reduce.StoreWarpValue(warp, row_dim(lane, i), partial_[g].weighted_v[i]); }
      }
      return reduce.ReduceStored();
    }
  }

private:
  static constexpr int items = Partial::items_per_lane;

  /// Caches in token rows: slot i of lane `lane` holds dim lane * items + i (a lane's dims consecutive, so
  /// that it reads them from a token row in one load where they fill whole 4, 8 or 16 bytes).
  static PAGEDATTN_DEVICE int row_dim(int lane, int i) { return lane * items + i; }

  /// PV over caches in token rows: token by token, each lane reads its `items` consecutive dims of the row
  /// (the widest aligned loads; a lane whose dims end past the head reads element by element).
  PAGEDATTN_DEVICE void ConsumeValueRows(const WarpTileContext& c)
  {
    const int lane = arch::lane_id(), warp = arch::warp_id();
    const int first = row_dim(lane, 0);
    // Lanes past the head's last dim (heads that leave lanes over, e.g. 80 and 120) read nothing but still
    // take part in the block-id shuffle, which every lane of the warp must reach.
    const bool has_dims = first < HeadDim;
    constexpr int slice_bytes = items * static_cast<int>(sizeof(KvT));
    constexpr int word = slice_bytes % 16 == 0 ? 16 : slice_bytes % 8 == 0 ? 8 : slice_bytes % 4 == 0 ? 4 : 0; // bytes per load
    const bool whole = first + items <= HeadDim;
#pragma unroll
    for (int j = 0; j < v_vectors; ++j)
    {
      const int vpos = c.token0 + 8 * j;
      const int vblock = arch::shfl_idx(c.lane_block_id, 8 * j); // lane 8j owns token vpos
      if (vpos >= c.end_token) { break; }                        // uniform
      if (!has_dims) { continue; }
      const KvT* v = cache_.value_cache + vblock * cache_.cache_block_stride + c.kv_head * cache_.cache_head_stride +
                     (vpos % cache_.block_size) * cache_.cache_token_stride + first;
#pragma unroll
      for (int t = 0; t < 8; ++t)
      {
        if (vpos + t >= c.end_token) { break; } // uniform: dead tokens are never read
        const KvT* row = v + t * cache_.cache_token_stride;
        float vf[items];
        if (word != 0 && whole)
        {
          if constexpr (word != 0)
          {
            using Word = std::conditional_t<word == 16, uint4, std::conditional_t<word == 8, uint2, unsigned>>;
#pragma unroll
            for (int k = 0; k < slice_bytes / word; ++k)
            {
              const Word raw = reinterpret_cast<const Word*>(row)[k];
              const KvT* e = reinterpret_cast<const KvT*>(&raw);
#pragma unroll
              for (int x = 0; x < word / static_cast<int>(sizeof(KvT)); ++x) { vf[k * (word / sizeof(KvT)) + x] = ElementTraits<KvT>::to_float(e[x]); }
            }
          }
        }
        else
        {
#pragma unroll
          for (int i = 0; i < items; ++i) { vf[i] = first + i < HeadDim ? ElementTraits<KvT>::to_float(row[i]) : 0.f; }
        }
#pragma unroll
        for (int g = 0; g < MaxRows; ++g)
        {
          if (g < rows_)
          {
            const float w = loop_.weights[warp][g][8 * j + t];
#pragma unroll
            for (int i = 0; i < items; ++i) { partial_[g].weighted_v[i] = fmaf(w, vf[i], partial_[g].weighted_v[i]); }
          }
        }
      }
    }
  }

  const SharedStorage& shared_;
  LoopStorage& loop_;
  const PagedCacheView<KvT>& cache_;
  const Scorer scorer_; ///< a copy (as BlockTileTensorCore's)
  const float value_scale_; ///< V's dequantization scale (fp8 caches only)
  const int rows_;          ///< the block's query rows (<= MaxRows)
  Partial partial_[MaxRows];
};

} // namespace pagedattn
