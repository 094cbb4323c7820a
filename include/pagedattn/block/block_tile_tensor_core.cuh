#pragma once
// The tensor-core fold of one KV tile (a KvSlab or KvSlabBulk in shared memory: Slab) into a thread block's running
// partials, for up to Rows query rows of a KV head (the decode gives a KV head's GQA group's heads x the new tokens), with mma.sync m16n8k16
// (fp16/bf16, sm_80+). Below, "heads" are those rows; each row masks the positions it does not see.
//
// The products are computed transposed, so that the heads fill the mma's n = 8, in n-tiles of 8 heads (Rows / 8
// of them: one with a GQA group of up to 8 and one new token, up to 4 with several new tokens):
//   S^T (tile tokens x 8 heads) = K (tokens x dims) · Q^T (dims x heads)
//   O^T (W x 8 heads)         += V^T (dims x tokens) · P^T (tokens x heads)
// over W = tensor_core_head_dim(HeadDim) dims: a head that is not whole 16-dim k-steps (120) is padded, its
// queries and the slab's K zero past the head (0 * 0 in the last k-step), and the output rows past the head
// (from the slab's V there, which may be stale) are never stored.
// Each K or V fragment a warp loads serves every n-tile, so the cache is read once for all the rows, and
// the block's warps split the head dimension, never the tokens:
//   QK: warp w takes the 16-dim k-steps w, w + Warps, ... of every token and writes its partial S^T to
//       shared memory.
//   softmax: after a barrier, warp w owns heads w * Rows/Warps .. (w+1) * Rows/Warps - 1: it sums the Warps
//       partials of its heads (in warp order), takes their logits (the Scorer's mask and Logits, below),
//       runs their online softmax (it alone keeps their running max and sum), and writes P and each head's
//       rescale factor to shared memory.
//   PV: after a second barrier, warp w owns the 16-dim output tiles w, w + Warps, ... for all heads.
// So each K and V byte is read from shared memory once, no work is repeated across warps, no warp keeps
// more than its slice of Q and O in registers, and the block's partial needs no block-wide reduce.
// An n-tile past the tile's rows (24 rows in the 32-row tile) still takes its mma, on zero queries and
// zero weights: an mma.sync under a condition costs a warp-convergence instruction each and is issued
// predicated anyway, and the skip made 64x4096q4 15 % slower (bench/NOTES.md,
// "Several query rows: the 32-row tile"). Its scores are
// not stored, and a warp whose softmax rows all lie there skips the softmax (their P stays zero).
//
// Fragments (g = lane / 4, q = lane % 4; the mma's standard layouts, warp/warp_mma.cuh; head g of n-tile n is
// row 8n + g):
//   QK step s, m-tile r: A = K rows (tokens 16r ..) x dims 16s .. 16s+15, one ldmatrix_x4 from the slab;
//       B = Q^T: lane (g, q) holds dims 16s + 2q, +1 and 16s + 2q + 8, +9 of query head g.
//   softmax: lane l of warp w owns head w * Rows/Warps + l / lanes_per_head and tokens_per_lane consecutive
//       tokens; a head's max and sum reduce over its lanes_per_head lanes.
//   PV step s (tokens 16s ..), m-tile m: A = V^T rows (dims 16m ..) x tokens, one ldmatrix_x4 (V in token
//       rows, KvSlabRows: one ldmatrix_x4_trans of the rows of tokens 16s ..); B = P^T:
//       lane (g, q) reads P[head g][16s + 2q, +1] and [16s + 2q + 8, +9] (4 bytes each).
// Scores and the output accumulate in fp32; P is rounded to T for the PV product.
//
// An fp8 cache (KvT; Slab holds its bytes as they lie): ldmatrix reads rows of 16 fp8 bytes, so lane (g, q)
// gets four consecutive elements 4q .. 4q + 3 of its row in one register, which become the pairs (4q,
// 4q + 1) and (4q + 2, 4q + 3) of T (fp8x4_to_pairs). The mma's k-slots 2q, 2q + 1 and 2q + 8, 2q + 9 then
// hold elements 4q, 4q + 1 and 4q + 2, 4q + 3 of the 16: a permutation of k, applied to the B operand too
// (the sum over k is the same products; their fp32 accumulation order inside the mma is the hardware's):
//   QK step s, slab j: one ldmatrix_x4 of tokens 0 .. 31 (a matrix per 8 tokens) x dims 16s .. 16s + 15
//       gives A of both m-tiles; B = Q^T: lane (g, q) holds dims 16s + 4q .. 16s + 4q + 3 of head g.
//   PV m-tile m, slab j: one ldmatrix_x4 of dims 16m .. 16m + 15 x tokens 0 .. 31 (a matrix per 8 dims and
//       16 tokens; at bs 8, four 4-byte loads) gives A of both k-steps; B = P^T: lane (g, q) reads
//       P[head g][16 step + 4q .. + 3] (8 bytes).
//   PV with V in token rows (KvSlabRows): ldmatrix_x4_trans of 16-bit pairs reads the slab's 32 token
//       rows of dims 16m .. 16m + 15: lane (g, q) gets tokens 8e + 2q, + 1 of the dims 16m + 2g, + 1 in
//       register e; a byte permutation makes the pairs (dim 16m + 2g; tokens 2q, 2q + 1) and (dim 16m +
//       2g + 1; the same tokens). So k (tokens) stays in order, B is P^T as for 16-bit V, and the m-rows
//       g and g + 8 are the dims 16m + 2g and 16m + 2g + 1: the output's rows, permuted (StorePartial).
// K's scale multiplies the scores with the softmax scale, V's the partial's values.
//
// The tile sees no launch parameters: the caller hands it each row's query (a pointer), the scales, and a
// Scorer, a copyable type with
//   using Row = ...;  // what the tile keeps of one query row, in shared memory (StoreRows); Row{} sees nothing
//   __device__ bool Visible(const Row&, int pos) const;
//   template <int N> __device__ void Logits(float (&score)[N], const Row&, int pos) const; // N scaled scores, in place
// (the decode's is its score variant bound to the launch: BoundScoreVariant, agent/decode_variant.cuh).
#include <pagedattn/thread/thread_fp8.cuh>
#include <pagedattn/thread/thread_online_softmax.cuh>
#include <pagedattn/util_type.cuh>
#include <pagedattn/warp/warp_mma.cuh>

#include <cstdint>
#include <type_traits>

namespace pagedattn {

template <class T, int HeadDim, int Warps, int Slabs, class Slab, class KvT, int Rows, class Scorer>
class BlockTileTensorCore {
public:
  static constexpr int max_rows = Rows;      ///< query rows (a multiple of the mma's n = 8)
  static constexpr int n_tiles = Rows / 8;
  static constexpr int block_threads = Warps * warp_threads;
  static constexpr int slabs = Slabs;                               ///< 32-token slabs folded per Consume
  static constexpr int tile_tokens = Slab::tile_tokens * Slabs;    ///< 2 QK m-tiles and 2 PV k-steps per slab
  static constexpr int k_steps = tensor_core_head_dim(HeadDim) / 16; ///< QK k-steps = PV m-tiles
  static constexpr int steps_per_warp = (k_steps + Warps - 1) / Warps;
  /// Floats per head row of the partial scores. One n-tile: + 8, conflict-free float2 reads (+ 4 would also
  /// make the QK stores conflict-free and fit three blocks to an SM at head 128, but the schedule model's
  /// waves count two: 64x4096 at 32/8 heads ran 16 % slower: bench/NOTES.md,
  /// "Partition size: the wave model"). Several: + 4, the
  /// QK stores (rows 2q apart) and the softmax's 16-byte reads (8 tokens per lane) conflict-free, where + 8
  /// made both two-way (Nsight Compute, 64x4096q4); the block's size is the combine's there.
  static constexpr int score_stride = tile_tokens + (n_tiles > 1 ? 4 : 8);
  static constexpr bool fp8_cache = is_fp8<KvT>;
  /// An fp8 V in token rows: the PV product's m-rows permuted within each 16 dims (Consume, StorePartial).
  static constexpr bool fp8_value_rows = fp8_cache && Slab::Layout::value_rows;
  /// Elements per P row: conflict-free B reads (4 bytes per lane: + 8; fp8's 8 bytes per lane: + 16).
  static constexpr int p_stride = tile_tokens + (fp8_cache ? 16 : 8);
  /// An fp8 tile of four slabs folds a partial tile whose live tokens fit its first half as that half
  /// (Consume): a short partition's one tile then costs the 64-token tile's softmax and stores.
  static constexpr bool narrow_partial = fp8_cache && Slabs == 4;
  static constexpr int rows_per_warp = max_rows / Warps;          ///< softmax rows of a warp
  static constexpr int lanes_per_head = warp_threads / rows_per_warp;
  static constexpr int tokens_per_lane = tile_tokens / lanes_per_head;
  using Row = typename Scorer::Row;
  static_assert(warp_threads == 32 && sizeof(T) == 2, "tensor-core tile: 32-lane warps, 16-bit types");
  static_assert(Rows % 8 == 0 && Rows <= 32, "rows: n-tiles of 8, up to 4");
  static_assert(HeadDim % 8 == 0 && (!is_fp8<KvT> || HeadDim % 16 == 0), "a head of whole 16-byte vectors of the cache");
  static_assert(Warps >= 1 && Warps <= 4 && max_rows % Warps == 0 && warp_threads % rows_per_warp == 0 && tokens_per_lane >= 2,
                "the warps split the heads evenly, a power of two per warp, >= 2 tokens per lane");

  struct TempStorage {
    alignas(16) float scores[Warps][max_rows][score_stride]; ///< each warp's partial S (head-major)
    alignas(16) T p[max_rows][p_stride];                     ///< the tile's softmax weights, rescaled, rounded
    float alpha[max_rows];                                   ///< each head's rescale factor of the running output
    /// What the scorer keeps of each row (rows past the tile's: Row{}, which sees nothing), set by StoreRows
    /// before the first tile: read where the softmax needs it, it holds no register through the tile loop
    /// (the persistent kernel at head 256 spilled 80 bytes more with a window's first position in a register).
    Row row[max_rows];
  };

  /// Threads 0 .. max_rows - 1: the scorer's rows, make_row(r) for r < rows (StoreRows' callers sync before Consume).
  template <class MakeRow>
  static PAGEDATTN_DEVICE void StoreRows(TempStorage& temp, int rows, MakeRow&& make_row)
  {
    const int r = threadIdx.x;
    if (r < max_rows)
    {
      temp.row[r] = r < rows ? make_row(r) : Row{};
      if (r >= rows) // a row past the tile's: its softmax may be skipped (Consume), so its P and factor are 0
      {
        temp.alpha[r] = 0.f;
#pragma unroll
        for (int t = 0; t < p_stride; t += 2) { *reinterpret_cast<std::uint32_t*>(&temp.p[r][t]) = 0u; }
      }
    }
  }

  /// Loads the warp's slice of the rows' queries, query_of(r) row r's head_dim elements for r < rows (rows
  /// past them stay zero), and resets the state. score_scale multiplies the scores before Logits (the
  /// softmax scale, times K's dequantization scale for an fp8 cache); value_scale (an fp8 cache's V scale,
  /// else unused) the partial's values.
  template <class QueryOf>
  PAGEDATTN_DEVICE BlockTileTensorCore(TempStorage& temp, const Scorer& scorer, QueryOf&& query_of, int rows, float score_scale, float value_scale,
                                       int log2_block_size)
      : temp_(temp), scorer_(scorer), scales_{score_scale, value_scale}, layout_(log2_block_size), heads_(rows)
  {
    const int heads = rows;
    const int lane = arch::lane_id(), warp = arch::warp_id();
    const int g = lane / 4, q = lane % 4;
#pragma unroll
    for (int n = 0; n < n_tiles; ++n)
    {
      const int r = 8 * n + g; // this lane's B row
      const T* row = query_of(r < heads ? r : 0);
#pragma unroll
      for (int i = 0; i < steps_per_warp; ++i)
      {
        const int s = warp + i * Warps;
        uint2 fragment{0, 0};
        if (s < k_steps && r < heads)
        {
          // Element-wise: query rows need not be 4-byte aligned. (fp8: k-slots 2q.. hold dims 4q.., above.)
          // A padded head's last k-step: its upper 8 dims lie past the head and stay zero.
          const T* d = row + 16 * s + (fp8_cache ? 4 * q : 2 * q);
          fragment = fp8_cache ? uint2{pack(d[0], d[1]), pack(d[2], d[3])} : uint2{pack(d[0], d[1]), 16 * s + 8 < HeadDim ? pack(d[8], d[9]) : 0u};
        }
        query_[i][n] = fragment;
#pragma unroll
        for (int k = 0; k < 4; ++k) { out_[i][n][k] = 0.f; }
      }
    }
    max_score_ = -INFINITY;
    exp_sum_ = 0.f;
  }

  /// Fold the tile of tokens token0 .. token0 + tile_tokens - 1 (those >= end_token, or not visible to a row, masked) held in
  /// slab[0 .. Slabs-1] (32 tokens each). Block-wide (contains two __syncthreads); the caller guarantees that every warp finished
  /// the previous Consume before this one starts (its own barrier at the top of the loop).
  /// A PartialTile (one that holds end_token) skips its 16-token steps wholly at or past end_token (their
  /// scores are masked and their weights 0, so the result is the same bits) and never reads their K and
  /// V; the V of the dead tokens of the step holding end_token must be finite (zero: KvSlab's zero
  /// fill, KvSlabBulk::ClearDeadValues). Whole tiles run without those checks (the loops' breaks
  /// cost the fold's instruction-level parallelism: 2-4 % on 256x1024: bench/NOTES.md,
  /// "The tensor-core fold").
  /// (A PartialTile of an fp8 tile is folded as its first half where that holds every live token: narrow_partial.)
  template <bool PartialTile>
  PAGEDATTN_DEVICE void Consume(const typename Slab::Storage* slab, int token0, int end_token)
  {
    if constexpr (PartialTile && narrow_partial)
    {
      if (end_token - token0 <= tile_tokens / 2) // block-uniform
      {
        FoldSlabs<true, Slabs / 2>(slab, token0, end_token);
        return;
      }
    }
    FoldSlabs<PartialTile, Slabs>(slab, token0, end_token);
  }

  /// Block-wide: the block's partial of every head of the group (heads < `heads`): stats[2h] = max score,
  /// stats[2h + 1] = exp sum, values[h * HeadDim + d] = weighted V. Unnormalised, as AttentionPartial.
  PAGEDATTN_DEVICE void StorePartial(float* stats, float* values) const
  {
    const int lane = arch::lane_id(), warp = arch::warp_id();
    const int g = lane / 4, q = lane % 4;
#pragma unroll
    for (int i = 0; i < steps_per_warp; ++i)
    {
      const int m = warp + i * Warps;
      if (m >= k_steps) { break; }
#pragma unroll
      for (int n = 0; n < n_tiles; ++n)
      {
#pragma unroll
        for (int k = 0; k < 4; ++k)
        {
          // (fp8 V in token rows: the m-rows g and g + 8 are dims 16m + 2g and 16m + 2g + 1, see Consume)
          const int head = 8 * n + 2 * q + k % 2, dim = fp8_value_rows ? 16 * m + 2 * g + k / 2 : 16 * m + g + 8 * (k / 2);
          if (head < heads_ && dim < HeadDim) { values[head * HeadDim + dim] = is_fp8<KvT> ? out_[i][n][k] * value_scale() : out_[i][n][k]; }
        }
      }
    }
    const int sh = warp * rows_per_warp + lane / lanes_per_head;
    if (lane % lanes_per_head == 0 && sh < heads_)
    {
      stats[2 * sh] = max_score_;
      stats[2 * sh + 1] = exp_sum_;
    }
  }

private:
  /// Consume's work over the tile's first Width slabs (Width < Slabs: a PartialTile whose live tokens lie there).
  template <bool PartialTile, int Width>
  PAGEDATTN_DEVICE void FoldSlabs(const typename Slab::Storage* slab, int token0, int end_token)
  {
    const int lane = arch::lane_id(), warp = arch::warp_id();
    const int live_steps = PartialTile ? min(2 * Width, ceil_div(end_token - token0, 16)) : 2 * Width; // QK m-tiles = PV k-steps
    const LaneUnits u = lane_units(lane, warp);
    Scores<PartialTile, Width>(slab, live_steps, u);
    __syncthreads();

    // ---- softmax of this warp's heads: lane's head sh, tokens t0 .. t0 + lane_tokens - 1 ----------------
    // (A warp whose heads are a whole n-tile past the tile's rows skips it: their P stays the zero
    // StoreRows wrote, which that n-tile's PV mma reads.)
    if (rows_per_warp < 8 || live_n_tile(warp * rows_per_warp / 8)) { Softmax<PartialTile, Width>(token0, end_token, warp, lane); }
    __syncthreads();

    RescaleOutput();
    // ---- PV: this warp's m-tiles, O^T rows (16m + g, 16m + g + 8), heads (2q, 2q + 1) -------------------
    if constexpr (fp8_cache && Slab::Layout::value_rows) { ValuesFp8Rows<PartialTile, Width>(slab, live_steps); }
    else if constexpr (fp8_cache) { ValuesFp8<PartialTile, Width>(slab, live_steps); }
    else { Values<PartialTile, Width>(slab, live_steps, u); }
  }

  /// 16-bit slabs: this lane's ldmatrix units at the warp's k-step i are those of its first k-step plus i
  /// advances (linear_units), computed once per tile: an add per ldmatrix, not the layout's arithmetic.
  /// [h]: the slab's 16-token half h (QK's m-tile r % 2; PV's k-step st % 2). Zero where unused.
  struct LaneUnits {
    int k_first[2], v_first[2], k_advance, v_advance;
  };
  PAGEDATTN_DEVICE LaneUnits lane_units(int lane, int warp) const
  {
    const int row8 = lane & 7, half = (lane >> 3) & 1, upper = lane >> 4; // this lane's ldmatrix row
    LaneUnits u{};
    if constexpr (!fp8_cache && linear_units)
    {
#pragma unroll
      for (int h = 0; h < 2; ++h)
      {
        u.k_first[h] = layout_.k_unit(2 * warp + upper, 16 * h + 8 * half + row8);
        u.v_first[h] = value_unit(h, warp, upper, half, row8);
      }
      u.k_advance = layout_.k_unit(2 * (warp + Warps) + upper, 8 * half + row8) - u.k_first[0];
      u.v_advance = value_unit(0, warp + Warps, upper, half, row8) - u.v_first[0];
    }
    else { (void)row8, (void)half, (void)upper; }
    return u;
  }

  /// Consume's QK product: this warp's k-steps of the tile's live 16-token steps, its partial S^T to temp_.scores.
  template <bool PartialTile, int Width>
  PAGEDATTN_DEVICE void Scores(const typename Slab::Storage* slab, int live_steps, const LaneUnits& u)
  {
    const int lane = arch::lane_id(), warp = arch::warp_id();
    const int g = lane / 4, q = lane % 4;
    const int row8 = lane & 7, half = (lane >> 3) & 1, upper = lane >> 4; // this lane's ldmatrix row
    // ---- QK: this warp's k-steps, partial S^T for tokens (16r + g, 16r + g + 8), heads (2q, 2q + 1) ----
    float s[2 * Width][n_tiles][4];
#pragma unroll
    for (int r = 0; r < 2 * Width; ++r)
    {
#pragma unroll
      for (int n = 0; n < n_tiles; ++n) { s[r][n][0] = s[r][n][1] = s[r][n][2] = s[r][n][3] = 0.f; }
    }
#pragma unroll
    for (int i = 0; i < steps_per_warp; ++i)
    {
      const int step = warp + i * Warps;
      if (steps_per_warp * Warps != k_steps && step >= k_steps) { break; } // warp-uniform
      if constexpr (fp8_cache)
      {
#pragma unroll
        for (int j = 0; j < Width; ++j)
        {
          if (PartialTile && 2 * j >= live_steps) { break; } // block-uniform
          std::uint32_t k[4]; // tokens 8i + g, dims 16 step + 4q .. + 3
          ldmatrix_x4(&slab[j].k[layout_.k_unit(step, lane)], k[0], k[1], k[2], k[3]);
          std::uint32_t a[4][2];
#pragma unroll
          for (int e = 0; e < 4; ++e) { fp8x4_to_pairs<KvT::format, T>(k[e], a[e][0], a[e][1]); }
#pragma unroll
          for (int n = 0; n < n_tiles; ++n)
          {
            mma_m16n8k16<T>(s[2 * j][n], a[0][0], a[1][0], a[0][1], a[1][1], query_[i][n].x, query_[i][n].y);
          }
          if (PartialTile && 2 * j + 1 >= live_steps) { break; }
#pragma unroll
          for (int n = 0; n < n_tiles; ++n)
          {
            mma_m16n8k16<T>(s[2 * j + 1][n], a[2][0], a[3][0], a[2][1], a[3][1], query_[i][n].x, query_[i][n].y);
          }
        }
      }
      else
      {
#pragma unroll
        for (int r = 0; r < 2 * Width; ++r)
        {
          if (PartialTile && r >= live_steps) { break; } // block-uniform
          std::uint32_t a0, a1, a2, a3; // tokens 16r + row8 (+ 8), dims 16 step (+ 8)
          const int unit = linear_units ? u.k_first[r % 2] + i * u.k_advance : layout_.k_unit(2 * step + upper, 16 * (r % 2) + 8 * half + row8);
          ldmatrix_x4(&slab[r / 2].k[unit], a0, a1, a2, a3);
#pragma unroll
          for (int n = 0; n < n_tiles; ++n)
          {
            mma_m16n8k16<T>(s[r][n], a0, a1, a2, a3, query_[i][n].x, query_[i][n].y);
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < 2 * Width; ++r)
    {
#pragma unroll
      for (int n = 0; n < n_tiles; ++n)
      {
        if (!live_n_tile(n)) { continue; } // uniform: its rows' softmax is skipped too
#pragma unroll
        for (int k = 0; k < 4; ++k) { temp_.scores[warp][8 * n + 2 * q + k % 2][16 * r + g + 8 * (k / 2)] = s[r][n][k]; }
      }
    }
  }

  /// Consume's rescale of the running output by each head's factor of the tile (after the softmax).
  PAGEDATTN_DEVICE void RescaleOutput()
  {
    const int q = arch::lane_id() % 4;
    // The output columns of this lane are heads 2q and 2q + 1 of each n-tile.
#pragma unroll
    for (int n = 0; n < n_tiles; ++n)
    {
      const float alpha0 = temp_.alpha[8 * n + 2 * q], alpha1 = temp_.alpha[8 * n + 2 * q + 1];
#pragma unroll
      for (int i = 0; i < steps_per_warp; ++i)
      {
        out_[i][n][0] = detail::mul_rn(alpha0, out_[i][n][0]);
        out_[i][n][1] = detail::mul_rn(alpha1, out_[i][n][1]);
        out_[i][n][2] = detail::mul_rn(alpha0, out_[i][n][2]);
        out_[i][n][3] = detail::mul_rn(alpha1, out_[i][n][3]);
      }
    }

  }

  /// Consume's PV product, 16-bit V (dim-major, or token rows read transposed).
  template <bool PartialTile, int Width>
  PAGEDATTN_DEVICE void Values(const typename Slab::Storage* slab, int live_steps, const LaneUnits& u)
  {
    const int lane = arch::lane_id(), warp = arch::warp_id();
    const int g = lane / 4, q = lane % 4;
    const int row8 = lane & 7, half = (lane >> 3) & 1, upper = lane >> 4; // this lane's ldmatrix row
#pragma unroll
    for (int st = 0; st < 2 * Width; ++st)
    {
      if (PartialTile && st >= live_steps) { break; } // block-uniform
      std::uint32_t b0[n_tiles], b1[n_tiles];
#pragma unroll
      for (int n = 0; n < n_tiles; ++n)
      {
        b0[n] = *reinterpret_cast<const std::uint32_t*>(&temp_.p[8 * n + g][16 * st + 2 * q]);
        b1[n] = *reinterpret_cast<const std::uint32_t*>(&temp_.p[8 * n + g][16 * st + 8 + 2 * q]);
      }
#pragma unroll
      for (int i = 0; i < steps_per_warp; ++i)
      {
        const int m = warp + i * Warps;
        if (steps_per_warp * Warps != k_steps && m >= k_steps) { break; } // warp-uniform
        std::uint32_t a0, a1, a2, a3; // dims 16m + row8 (+ 8), tokens 16st (+ 8)
        const int unit = linear_units ? u.v_first[st % 2] + i * u.v_advance : value_unit(st % 2, m, upper, half, row8);
        if constexpr (Slab::Layout::value_rows) { ldmatrix_x4_trans(&slab[st / 2].v[unit], a0, a1, a2, a3); }
        else { ldmatrix_x4(&slab[st / 2].v[unit], a0, a1, a2, a3); }
#pragma unroll
        for (int n = 0; n < n_tiles; ++n)
        {
          mma_m16n8k16<T>(out_[i][n], a0, a1, a2, a3, b0[n], b1[n]);
        }
      }
    }
  }

  /// Consume's PV product, fp8 V in vLLM's layout (dim-major).
  template <bool PartialTile, int Width>
  PAGEDATTN_DEVICE void ValuesFp8(const typename Slab::Storage* slab, int live_steps)
  {
    const int lane = arch::lane_id(), warp = arch::warp_id();
    const int g = lane / 4, q = lane % 4;
    const int row8 = lane & 7, half = (lane >> 3) & 1, upper = lane >> 4; // this lane's ldmatrix row
#pragma unroll
    for (int j = 0; j < Width; ++j)
    {
      if (PartialTile && 2 * j >= live_steps) { break; } // block-uniform
      uint2 b0[n_tiles], b1[n_tiles];
#pragma unroll
      for (int n = 0; n < n_tiles; ++n)
      {
        b0[n] = *reinterpret_cast<const uint2*>(&temp_.p[8 * n + g][32 * j + 4 * q]);      // tokens 4q .. 4q + 3
        b1[n] = *reinterpret_cast<const uint2*>(&temp_.p[8 * n + g][32 * j + 16 + 4 * q]); // tokens 16 + 4q ..
      }
      const unsigned char* v_bytes = reinterpret_cast<const unsigned char*>(slab[j].v);
#pragma unroll
      for (int i = 0; i < steps_per_warp; ++i)
      {
        const int m = warp + i * Warps;
        if (steps_per_warp * Warps != k_steps && m >= k_steps) { break; } // warp-uniform
        std::uint32_t v[4]; // dims 16m + g (+ 8), tokens 4q .. 4q + 3 (+ 16)
        if (layout_.log2_block_size() >= 4) // block-uniform: rows of 16 tokens of one dim
        {
          ldmatrix_x4(&slab[j].v[layout_.v_fp8_unit(16 * m + 8 * half + row8, upper)], v[0], v[1], v[2], v[3]);
        }
        else // bs 8: a dim's 8 tokens per block, read as words
        {
#pragma unroll
          for (int e = 0; e < 4; ++e)
          {
            v[e] = *reinterpret_cast<const std::uint32_t*>(v_bytes + layout_.v_fp8_byte(16 * m + g + 8 * (e & 1), 16 * (e >> 1) + 4 * q));
          }
        }
        std::uint32_t a[4][2];
#pragma unroll
        for (int e = 0; e < 4; ++e) { fp8x4_to_pairs<KvT::format, T>(v[e], a[e][0], a[e][1]); }
#pragma unroll
        for (int n = 0; n < n_tiles; ++n)
        {
          mma_m16n8k16<T>(out_[i][n], a[0][0], a[1][0], a[0][1], a[1][1], b0[n].x, b0[n].y);
        }
        if (PartialTile && 2 * j + 1 >= live_steps) { continue; }
#pragma unroll
        for (int n = 0; n < n_tiles; ++n)
        {
          mma_m16n8k16<T>(out_[i][n], a[2][0], a[3][0], a[2][1], a[3][1], b1[n].x, b1[n].y);
        }
      }
    }
  }

  /// Consume's PV product, fp8 V in token rows (read transposed; the m-rows permuted: StorePartial).
  template <bool PartialTile, int Width>
  PAGEDATTN_DEVICE void ValuesFp8Rows(const typename Slab::Storage* slab, int live_steps)
  {
    const int lane = arch::lane_id(), warp = arch::warp_id();
    const int g = lane / 4, q = lane % 4;
#pragma unroll
    for (int j = 0; j < Width; ++j)
    {
      if (PartialTile && 2 * j >= live_steps) { break; } // block-uniform
      std::uint32_t b[n_tiles][2][2]; // P^T of the slab's two k-steps, tokens in order (as 16-bit V)
#pragma unroll
      for (int n = 0; n < n_tiles; ++n)
      {
#pragma unroll
        for (int h = 0; h < 2; ++h)
        {
          b[n][h][0] = *reinterpret_cast<const std::uint32_t*>(&temp_.p[8 * n + g][32 * j + 16 * h + 2 * q]);
          b[n][h][1] = *reinterpret_cast<const std::uint32_t*>(&temp_.p[8 * n + g][32 * j + 16 * h + 8 + 2 * q]);
        }
      }
#pragma unroll
      for (int i = 0; i < steps_per_warp; ++i)
      {
        const int m = warp + i * Warps;
        if (steps_per_warp * Warps != k_steps && m >= k_steps) { break; } // warp-uniform
        // Matrix e: token rows 8e .. 8e + 7 of the slab, 16 bytes = dims 16m .. 16m + 15; lane (g, q) gets
        // tokens 8e + 2q, +1 of dims 16m + 2g, +1 (4 bytes), which become its A registers for the
        // m-rows g (dim 16m + 2g) and g + 8 (dim 16m + 2g + 1): see StorePartial.
        std::uint32_t v[4];
        ldmatrix_x4_trans(&slab[j].v[layout_.value_row_unit(lane, m)], v[0], v[1], v[2], v[3]);
        std::uint32_t a[4][2]; // [e][dim 2g, 2g + 1]: tokens 8e + 2q, 8e + 2q + 1 of T
#pragma unroll
        for (int e = 0; e < 4; ++e) { fp8x4_to_pairs<KvT::format, T>(swap_middle_bytes(v[e]), a[e][0], a[e][1]); }
#pragma unroll
        for (int n = 0; n < n_tiles; ++n)
        {
          mma_m16n8k16<T>(out_[i][n], a[0][0], a[0][1], a[1][0], a[1][1], b[n][0][0], b[n][0][1]);
        }
        if (PartialTile && 2 * j + 1 >= live_steps) { continue; }
#pragma unroll
        for (int n = 0; n < n_tiles; ++n)
        {
          mma_m16n8k16<T>(out_[i][n], a[2][0], a[2][1], a[3][0], a[3][1], b[n][1][0], b[n][1][1]);
        }
      }
    }
  }

  /// Whether every slab layout is linear in K's vector and V's dim over a warp's k-steps (Consume): they
  /// lie Warps apart, 2 Warps vectors of K and 16 Warps dims of V, multiples of the swizzles' periods (8
  /// vectors of token rows; V's 64 dims in KvSlabBulk's tensor copies) when Warps is a multiple of 4.
  static constexpr bool linear_units = Warps % 4 == 0;

  /// The 16-bit V unit of PV k-step half h (tokens 16h ..) and m-tile m this lane's ldmatrix reads: dims
  /// 16m + row8 (+ 8 for the upper half), or, V in token rows (transposed), tokens 16h + row8 (+ 8).
  PAGEDATTN_DEVICE int value_unit(int h, int m, int upper, int half, int row8) const
  {
    if constexpr (Slab::Layout::value_rows) { return layout_.value_row_unit(16 * h + 8 * upper + row8, 2 * m + half); }
    else { return layout_.v_unit(16 * m + 8 * half + row8, 2 * h + upper); }
  }

  /// The online softmax of this warp's heads over the tile's partial scores (Consume, between its barriers):
  /// lane's head sh, tokens t0 .. t0 + tokens_per_lane - 1; writes P and the heads' rescale factors. Only a
  /// PartialTile has tokens at or past end_token.
  template <bool PartialTile, int Width>
  PAGEDATTN_DEVICE void Softmax(int token0, int end_token, int warp, int lane)
  {
    constexpr int lane_tokens = Slab::tile_tokens * Width / lanes_per_head; // (tokens_per_lane at the whole tile)
    static_assert(lane_tokens >= 2 && lane_tokens % 2 == 0, "pairs of tokens per lane");
    const int sh = warp * rows_per_warp + lane / lanes_per_head, t0 = (lane % lanes_per_head) * lane_tokens;
    float score[lane_tokens];
#pragma unroll
    for (int e = 0; e < lane_tokens; ++e) { score[e] = 0.f; }
#pragma unroll
    for (int w = 0; w < Warps; ++w) // fixed order
    {
#pragma unroll
      for (int e = 0; e < lane_tokens; e += 2)
      {
        const float2 part = *reinterpret_cast<const float2*>(&temp_.scores[w][sh][t0 + e]);
        score[e] += part.x;
        score[e + 1] += part.y;
      }
    }
    float tile_max = -INFINITY;
    // The row in registers for the tile: read from shared memory per token, it cost the fp8 tile 7 % more
    // instructions (bench/NOTES.md, "Decode variants: soft-cap, sinks, windows, output epilogue").
    const Row row = temp_.row[sh];
#pragma unroll
    for (int e = 0; e < lane_tokens; ++e) { score[e] *= score_scale(); }
    scorer_.Logits(score, row, token0 + t0);
#pragma unroll
    for (int e = 0; e < lane_tokens; ++e)
    {
      const int token = token0 + t0 + e;
      score[e] = (!PartialTile || token < end_token) && scorer_.Visible(row, token) ? score[e] : -INFINITY;
      tile_max = fmaxf(tile_max, score[e]);
    }
#pragma unroll
    for (int mask = 1; mask < lanes_per_head; mask *= 2) { tile_max = fmaxf(tile_max, arch::shfl_xor(tile_max, mask)); }
    // -inf where the row sees none of the tile's tokens (a new token before the tile's end, a padding row).
    const float shift = tile_max == -INFINITY ? 0.f : tile_max;
    float tile_sum = 0.f;
#pragma unroll
    for (int e = 0; e < lane_tokens; ++e)
    {
      score[e] = __expf(score[e] - shift); // masked tokens: exp(-inf) = 0
      tile_sum += score[e];
    }
#pragma unroll
    for (int mask = 1; mask < lanes_per_head; mask *= 2) { tile_sum += arch::shfl_xor(tile_sum, mask); }
    const SoftmaxRescale rs = softmax_rescale(max_score_, tile_max);
    max_score_ = rs.max_score;
    exp_sum_ = rescaled_sum(rs, exp_sum_, tile_sum);
#pragma unroll
    for (int e = 0; e < lane_tokens; e += 2)
    {
      *reinterpret_cast<std::uint32_t*>(&temp_.p[sh][t0 + e]) = pack_weights(rs.beta * score[e], rs.beta * score[e + 1]);
    }
    if (lane % lanes_per_head == 0) { temp_.alpha[sh] = rs.alpha; }
  }

  /// Whether n-tile n holds one of the rows (n-tile 0 always; uniform across the block).
  PAGEDATTN_DEVICE bool live_n_tile(int n) const { return n == 0 || 8 * n < heads_; }

  struct Scales {
    float score, value; ///< the scores' factor (softmax scale x K's scale); V's scale (fp8 only)
  };
  PAGEDATTN_DEVICE float score_scale() const { return scales_.score; }
  PAGEDATTN_DEVICE float value_scale() const
  {
    if constexpr (is_fp8<KvT>) { return scales_.value; }
    else { return 1.f; }
  }

  TempStorage& temp_;
  const Scorer scorer_; ///< a copy: held by reference, it cost the 32-row tile 120 bytes of spill loads
  Scales scales_;
  typename Slab::Layout layout_;
  int heads_;
  uint2 query_[steps_per_warp][n_tiles]; ///< head g of each n-tile, dims 16s + 2q, +1 and 16s + 2q + 8, +9 of this warp's k-steps
  float out_[steps_per_warp][n_tiles][4]; ///< O^T fragments of this warp's m-tiles, per n-tile
  float max_score_, exp_sum_;        ///< this lane's softmax head (the same in all lanes_per_head lanes)

  static PAGEDATTN_DEVICE std::uint32_t pack(T lo, T hi)
  {
    return static_cast<std::uint32_t>(bit_cast_u16(lo)) | (static_cast<std::uint32_t>(bit_cast_u16(hi)) << 16);
  }
  static PAGEDATTN_DEVICE std::uint32_t pack_weights(float lo, float hi)
  {
    return pack(ElementTraits<T>::from_float(lo), ElementTraits<T>::from_float(hi));
  }
  static PAGEDATTN_DEVICE std::uint16_t bit_cast_u16(T v)
  {
    std::uint16_t u;
    static_assert(sizeof(u) == sizeof(v));
    __builtin_memcpy(&u, &v, sizeof(u));
    return u;
  }
};

} // namespace pagedattn
