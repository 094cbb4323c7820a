#pragma once
// The CUDA-core warp tile of the paged decode (every type; the only path for fp32 and on BI-V100).
//
// A warp folds warp_threads tokens at a time into one running WarpAttentionPartial per query row (QueryRow:
// a head of the KV head's GQA group and a new token; "head" below):
//   QK: lane t scores token t of the tile against every query of the group: it reads the key's 16-byte
//       slices (vLLM's x-packed layout: for a fixed slice, consecutive lanes read consecutive 16 bytes)
//       and the queries from shared memory (one broadcast address per warp), so no shuffle is needed.
//   softmax: the tile's logits per head (the score variant's mask and Logits: agent/decode_variant.cuh),
//       relative to the tile maximum (WarpReduceShfl max and sum),
//       folded in with begin_tile(); the weights go to per-warp shared memory.
//   PV: lane l owns dimensions l + i * warp_threads and reads their V rows (8 contiguous tokens: 16 bytes
//       for fp16) once for all heads.
// Caches in token rows (TokenRowsKvLayout: CacheLayout hnd and nhd, their strides read at run time) take
// kernels of their own: a lane's key is its token's row (16-byte slices x elements apart), and the PV step
// goes token by token, lane l owning the consecutive dims l * items .. (ConsumeValueRows: one load per
// token where they fill whole 4, 8 or 16 bytes), which ReduceHead hands to the block reduce as such.
// An fp8 cache (KvT fp8_e4m3 or fp8_e5m2) is dequantized as float(fp8) * scale with the scales folded in
// where they cost least: K's into the queries (one multiply per query element per partition), V's into
// the softmax weights the PV products use (one per token and head; the exp sums stay unscaled), so that
// the output is sum(w * v_scale * v) / sum(w). vLLM's fp8 key layout has x = 16 (16 / sizeof(KvT)).
#include <pagedattn/agent/agent_paged_attention_params.cuh>
#include <pagedattn/agent/decode_variant.cuh>
#include <pagedattn/agent/kv_cache_layout.cuh>
#include <pagedattn/agent/warp_tile_context.cuh>
#include <pagedattn/util_type.cuh>
#include <pagedattn/warp/warp_attention_partial.cuh>
#include <pagedattn/warp/warp_reduce_shfl.cuh>

#include <type_traits>

namespace pagedattn {

template <class T, int HeadDim, int MaxRows, int Warps, class Policy, class KvT = T, class KvLayout = VllmKvLayout,
          class ScoreVariant = DefaultScoreVariant>
class WarpTileCudaCore {
public:
  static constexpr int tile_tokens = warp_threads;  ///< one token per lane
  static constexpr int max_rows = MaxRows;
  static constexpr int x = elements_per_vector<KvT>;
  static constexpr int key_vectors = HeadDim / x;   ///< 16-byte vectors of one key
  static constexpr int v_vectors = tile_tokens / 8; ///< 8-token V vectors per tile (8 = smallest block)
  using Partial = WarpAttentionPartial<HeadDim>;
  static_assert(HeadDim % x == 0, "a key is a whole number of 16-byte vectors");

  using Row = typename ScoreVariant::Row;

  /// Block-wide: the rows' queries, pre-scaled, fp32, and what the variant keeps of each row.
  struct SharedStorage {
    alignas(16) float query[MaxRows][HeadDim];
    Row row[MaxRows]; ///< rows past the work's: Row{}, which sees nothing
  };
  /// Per-warp scratch of the main loop (may alias other storage after the loop).
  struct LoopStorage {
    alignas(16) float weights[Warps][MaxRows][tile_tokens];
  };

  /// Block-wide: the rows' queries and variant rows to shared memory. The caller syncs before the first Consume().
  static PAGEDATTN_DEVICE void LoadQueries(SharedStorage& shared, const PagedAttentionParams<T, KvT>& p, const ScoreVariant& variant,
                                           const PartitionWork& work, int block_threads)
  {
    const float scale = p.scale * cache_key_scale(p, work.kv_head);
    for (int i = threadIdx.x; i < MaxRows * HeadDim; i += block_threads)
    {
      const int g = i / HeadDim, d = i % HeadDim;
      float q = 0.f;
      if (g < work.rows)
      {
        const QueryRow row = query_row(p, work.seq, work.seq_len, work.kv_head, work.first_row + g);
        q = ElementTraits<T>::to_float(p.query[row.index * p.query_seq_stride + row.head * p.query_head_stride + d]) * scale;
      }
      shared.query[g][d] = q;
    }
    for (int g = threadIdx.x; g < MaxRows; g += block_threads)
    {
      shared.row[g] = g < work.rows ? variant.MakeRow(p, query_row(p, work.seq, work.seq_len, work.kv_head, work.first_row + g)) : Row{};
    }
  }

  PAGEDATTN_DEVICE WarpTileCudaCore(const SharedStorage& shared, LoopStorage& loop, const PagedAttentionParams<T, KvT>& p,
                                   const ScoreVariant& variant, int kv_head, int rows)
      : shared_(shared), loop_(loop), p_(p), variant_(variant), value_scale_(cache_value_scale(p, kv_head)), rows_(rows)
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
    const std::int64_t head_offset = c.lane_block_id * p_.cache_block_stride + c.kv_head * p_.cache_head_stride;
    // K's vector ch of the lane's token: vLLM's [head / x][block_size][x] run, or a token row.
    const std::int64_t key_token_stride = KvLayout::template key_token_stride<x>(p_);
    const std::int64_t key_vector_stride = KvLayout::template key_vector_stride<x>(p_);

    // QK: the lane's whole key against every query of the group.
    float score[MaxRows];
#pragma unroll
    for (int g = 0; g < MaxRows; ++g) { score[g] = 0.f; }
    if (live)
    {
      const KvT* k = p_.key_cache + head_offset + (pos % p_.block_size) * key_token_stride;
#pragma unroll(Policy::key_vectors_in_flight)
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
        const bool visible = live && variant_.Visible(row, pos);
        float logit[1] = {score[g]};
        if (visible) { variant_.Logits(p_, logit, row, pos); }
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
        const KvT* v = p_.value_cache + vblock * p_.cache_block_stride + c.kv_head * p_.cache_head_stride + vpos % p_.block_size;
#pragma unroll
        for (int i = 0; i < Partial::items_per_lane; ++i)
        {
          const int d = Partial::dim(lane, i);
          if (d < HeadDim)
          {
            float vf[8];
            load_eight_as_float(v + static_cast<std::int64_t>(d) * p_.block_size, vf);
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
      const KvT* v = p_.value_cache + vblock * p_.cache_block_stride + c.kv_head * p_.cache_head_stride +
                     (vpos % p_.block_size) * p_.cache_token_stride + first;
#pragma unroll
      for (int t = 0; t < 8; ++t)
      {
        if (vpos + t >= c.end_token) { break; } // uniform: dead tokens are never read
        const KvT* row = v + t * p_.cache_token_stride;
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
  const PagedAttentionParams<T, KvT>& p_;
  const ScoreVariant& variant_;
  const float value_scale_; ///< V's dequantization scale (1 unless the cache is fp8)
  const int rows_;          ///< the block's query rows (<= MaxRows)
  Partial partial_[MaxRows];
};

} // namespace pagedattn
