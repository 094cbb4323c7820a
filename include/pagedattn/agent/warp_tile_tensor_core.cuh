#pragma once
// The tensor-core warp tile of the paged decode (fp16 and bf16 on sm_80+): a warp folds 32 tokens at a
// time for up to 8 query heads with mma.sync m16n8k16, reading K and V straight from vLLM's layouts.
//
// The products are computed transposed, so that the 8 heads of a GQA group fill the mma's n = 8:
//   S^T (32 tokens x 8 heads) = K (tokens x dims) · Q^T (dims x heads)      2 m-tiles x HeadDim/16 k-steps
//   O^T (HeadDim x 8 heads)  += V^T (dims x tokens) · P^T (tokens x heads)  HeadDim/16 m-tiles x 2 k-steps
// A reduction dimension may be visited in any order, as long as both operands use the same one, so each
// lane's fragments come from whole 16-byte loads (g = lane / 4, q = lane % 4):
//   QK, k-steps 2i and 2i+1: lane (g, q) loads key chunk 4i + q (8 dims) of tokens g and g+8 and the same
//       8 dims of query head g: halves 0-1 / 2-3 feed k-slots (2q, 2q+1) / (2q+8, 2q+9) of step 2i,
//       halves 4-7 those of step 2i+1. (A head size = 16 mod 32 ends with one step fed by 8-byte loads.)
//   PV, k-steps 0 and 1 over the tile's 32 tokens: lane (g, q) loads V rows g and g+8 of its dims at
//       tokens 8q .. 8q+7 (16 bytes each) and P[head g][8q .. 8q+7] from shared memory; token 8q+4s+2j+e
//       feeds k-slot 2q + 8j + e of step s.
// P goes through 512 bytes of per-warp shared memory (its fragment layout is the transpose of S's).
// Scores and the output accumulate in fp32; P is rounded to the cache's type for the PV product.
#include <pagedattn/agent/agent_paged_attention_params.cuh>
#include <pagedattn/agent/warp_tile_context.cuh>
#include <pagedattn/block/online_softmax_combine.cuh>
#include <pagedattn/util_type.cuh>
#include <pagedattn/warp/warp_mma.cuh>

#include <cstdint>

namespace pagedattn {

template <class T, int HeadDim, int Warps>
class WarpTileTensorCore {
public:
  static constexpr int tile_tokens = 32;
  static constexpr int max_heads = 8; ///< the mma's n
  static constexpr int chunk_quads = HeadDim / 32;        ///< pairs of k-steps fed by 16-byte loads
  static constexpr bool tail_step = HeadDim % 32 == 16;   ///< one more k-step fed by 8-byte loads
  static constexpr int m_tiles = HeadDim / 16;            ///< PV output tiles of 16 dims
  static_assert(warp_threads == 32 && sizeof(T) == 2, "tensor-core tile: 32-lane warps, 16-bit types");
  static_assert(HeadDim % 16 == 0, "head size must be a multiple of 16");

  struct SharedStorage {}; ///< queries stay in registers
  struct LoopStorage {
    alignas(16) T p[Warps][max_heads][tile_tokens]; ///< softmax weights of the warp's tile, per head
  };

  static PAGEDATTN_DEVICE void LoadQueries(SharedStorage&, const PagedAttentionParams<T>&, int, int, int, int) {}

  PAGEDATTN_DEVICE WarpTileTensorCore(const SharedStorage&, LoopStorage& loop, const PagedAttentionParams<T>& p, int seq,
                                      int first_head, int heads)
      : loop_(loop), p_(p)
  {
    const int g = arch::lane_id() / 4, q = arch::lane_id() % 4;
    const T* row = p.query + seq * p.query_seq_stride + (first_head + g) * p.query_head_stride;
    // Element-wise loads: query rows need not be 16-byte aligned. Heads past the group stay zero.
#pragma unroll
    for (int i = 0; i < chunk_quads; ++i) { query_[i] = g < heads ? load_halves<8>(row + 8 * (4 * i + q)) : uint4{0, 0, 0, 0}; }
    if constexpr (tail_step)
    {
      const uint4 t = g < heads ? load_halves<4>(row + tail_dim(q)) : uint4{0, 0, 0, 0};
      query_tail_ = make_uint2(t.x, t.y);
    }
#pragma unroll
    for (int m = 0; m < m_tiles; ++m) { out_[m][0] = out_[m][1] = out_[m][2] = out_[m][3] = 0.f; }
    max_score_[0] = max_score_[1] = -INFINITY;
    exp_sum_[0] = exp_sum_[1] = 0.f;
  }

  PAGEDATTN_DEVICE void Consume(const WarpTileContext& c)
  {
    const int lane = arch::lane_id(), warp = arch::warp_id();
    const int g = lane / 4, q = lane % 4;
    const std::int64_t head_elems = static_cast<std::int64_t>(HeadDim) * p_.block_size;
    auto head_base = [&](int block_id) { return (static_cast<std::int64_t>(block_id) * p_.num_kv_heads + c.kv_head) * head_elems; };

    // ---- QK: S^T for tokens (16r + g, 16r + g + 8), heads (2q, 2q+1) ---------------------------------
    float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int r = 0; r < 2; ++r)
    {
      const int ta = c.token0 + 16 * r + g, tb = ta + 8;
      const int block_a = arch::shfl_idx(c.lane_block_id, 16 * r + g);
      const int block_b = arch::shfl_idx(c.lane_block_id, 16 * r + g + 8);
      const bool live_a = ta < c.end_token, live_b = tb < c.end_token;
      // key element (token, dim) = key_cache[block][kv_head][dim / 8][token % block_size][dim % 8]
      const T* ka = p_.key_cache + head_base(block_a) + (ta % p_.block_size) * 8;
      const T* kb = p_.key_cache + head_base(block_b) + (tb % p_.block_size) * 8;
      const std::int64_t chunk_stride = static_cast<std::int64_t>(p_.block_size) * 8;
#pragma unroll
      for (int i = 0; i < chunk_quads; ++i)
      {
        const uint4 a = live_a ? load16(ka + (4 * i + q) * chunk_stride) : uint4{0, 0, 0, 0};
        const uint4 b = live_b ? load16(kb + (4 * i + q) * chunk_stride) : uint4{0, 0, 0, 0};
        mma_m16n8k16<T>(s[r], a.x, b.x, a.y, b.y, query_[i].x, query_[i].y);
        mma_m16n8k16<T>(s[r], a.z, b.z, a.w, b.w, query_[i].z, query_[i].w);
      }
      if constexpr (tail_step)
      {
        const int d = tail_dim(q);
        const uint2 a = live_a ? load8(ka + (d / 8) * chunk_stride + d % 8) : uint2{0, 0};
        const uint2 b = live_b ? load8(kb + (d / 8) * chunk_stride + d % 8) : uint2{0, 0};
        mma_m16n8k16<T>(s[r], a.x, b.x, a.y, b.y, query_tail_.x, query_tail_.y);
      }
    }

    // ---- online softmax per head column: heads 2q + e; tile max and sum across the 8 lanes of column q ----
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int r = 0; r < 2; ++r)
    {
#pragma unroll
      for (int k = 0; k < 4; ++k)
      {
        const int token = c.token0 + 16 * r + g + 8 * (k / 2), head = 2 * q + k % 2;
        float v = s[r][k] * p_.scale;
        if (p_.alibi_slopes && head < c.heads) { v = fmaf(p_.alibi_slopes[c.first_head + head], static_cast<float>(token - c.seq_len + 1), v); }
        s[r][k] = token < c.end_token ? v : -INFINITY;
        tile_max[k % 2] = fmaxf(tile_max[k % 2], s[r][k]);
      }
    }
    float tile_sum[2] = {0.f, 0.f};
#pragma unroll
    for (int e = 0; e < 2; ++e)
    {
      for (int mask = 4; mask < 32; mask *= 2) { tile_max[e] = fmaxf(tile_max[e], arch::shfl_xor(tile_max[e], mask)); }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r)
    {
#pragma unroll
      for (int k = 0; k < 4; ++k)
      {
        s[r][k] = s[r][k] == -INFINITY ? 0.f : expf(s[r][k] - tile_max[k % 2]); // token 0 is live: max finite
        tile_sum[k % 2] += s[r][k];
      }
    }
    float beta[2];
#pragma unroll
    for (int e = 0; e < 2; ++e)
    {
      for (int mask = 4; mask < 32; mask *= 2) { tile_sum[e] += arch::shfl_xor(tile_sum[e], mask); }
      const SoftmaxRescale rs = softmax_rescale(max_score_[e], tile_max[e]);
      max_score_[e] = rs.max_score;
      exp_sum_[e] = rescaled_sum(rs, exp_sum_[e], tile_sum[e]);
      beta[e] = rs.beta;
#pragma unroll
      for (int m = 0; m < m_tiles; ++m)
      {
        out_[m][e] = detail::mul_rn(rs.alpha, out_[m][e]);
        out_[m][e + 2] = detail::mul_rn(rs.alpha, out_[m][e + 2]);
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r)
    {
#pragma unroll
      for (int k = 0; k < 4; ++k)
      {
        loop_.p[warp][2 * q + k % 2][16 * r + g + 8 * (k / 2)] = ElementTraits<T>::from_float(beta[k % 2] * s[r][k]);
      }
    }
    arch::sync_warp();

    // ---- PV: O^T rows (16m + g, 16m + g + 8), heads (2q, 2q+1) -----------------------------------------
    const uint4 pw = *reinterpret_cast<const uint4*>(&loop_.p[warp][g][8 * q]);
    const int vtoken = c.token0 + 8 * q;
    const int vblock = arch::shfl_idx(c.lane_block_id, 8 * q);
    const int valid = c.end_token - vtoken; // tokens of this lane's 8 past the end are zeroed (cache may hold NaN)
    // value element (dim, token) = value_cache[block][kv_head][dim][token % block_size]
    const T* v = p_.value_cache + head_base(vblock) + vtoken % p_.block_size;
#pragma unroll
    for (int m = 0; m < m_tiles; ++m)
    {
      // Only the loads depend on the lane: every lane must reach the warp-wide mma.sync (no divergence).
      uint4 a{0, 0, 0, 0}, b{0, 0, 0, 0};
      if (valid > 0)
      {
        a = load16(v + static_cast<std::int64_t>(16 * m + g) * p_.block_size);
        b = load16(v + static_cast<std::int64_t>(16 * m + g + 8) * p_.block_size);
        if (valid < 8)
        {
          a = zero_tail(a, valid);
          b = zero_tail(b, valid);
        }
      }
      mma_m16n8k16<T>(out_[m], a.x, b.x, a.y, b.y, pw.x, pw.y);
      mma_m16n8k16<T>(out_[m], a.z, b.z, a.w, b.w, pw.z, pw.w);
    }
    arch::sync_warp(); // P is rewritten by the warp's next tile
  }

  /// Block-wide: merge every warp's partial of head h (h a compile-time-unrolled index) with `reduce`.
  template <class Reduce>
  PAGEDATTN_DEVICE typename Reduce::Stats ReduceHead(Reduce& reduce, int h) const
  {
    const int lane = arch::lane_id(), warp = arch::warp_id();
    const int g = lane / 4, q = lane % 4, e = h % 2;
    if (q == h / 2)
    {
#pragma unroll
      for (int m = 0; m < m_tiles; ++m)
      {
        reduce.StoreWarpValue(warp, 16 * m + g, out_[m][e]);
        reduce.StoreWarpValue(warp, 16 * m + g + 8, out_[m][e + 2]);
      }
      if (g == 0) { reduce.StoreWarpStats(warp, max_score_[e], exp_sum_[e]); }
    }
    return reduce.ReduceStored();
  }

private:
  LoopStorage& loop_;
  const PagedAttentionParams<T>& p_;
  uint4 query_[chunk_quads > 0 ? chunk_quads : 1];
  uint2 query_tail_;
  float out_[m_tiles][4];
  float max_score_[2], exp_sum_[2]; ///< heads 2q and 2q+1

  /// First of the 4 dims a lane feeds into the tail k-step (head size = 16 mod 32).
  static PAGEDATTN_DEVICE int tail_dim(int q) { return 8 * (4 * chunk_quads + q / 2) + 4 * (q % 2); }

  static PAGEDATTN_DEVICE uint4 load16(const T* ptr) { return *reinterpret_cast<const uint4*>(ptr); }
  static PAGEDATTN_DEVICE uint2 load8(const T* ptr) { return *reinterpret_cast<const uint2*>(ptr); }

  template <int N>
  static PAGEDATTN_DEVICE uint4 load_halves(const T* ptr)
  {
    uint4 r{0, 0, 0, 0};
    T* h = reinterpret_cast<T*>(&r);
#pragma unroll
    for (int i = 0; i < N; ++i) { h[i] = ptr[i]; }
    return r;
  }

  /// Zero the 16-bit elements valid .. 7 of an 8-element vector.
  static PAGEDATTN_DEVICE uint4 zero_tail(uint4 v, int valid)
  {
    unsigned* w = reinterpret_cast<unsigned*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i)
    {
      const int t = 2 * i;
      w[i] &= (t < valid ? 0x0000ffffu : 0u) | (t + 1 < valid ? 0xffff0000u : 0u);
    }
    return v;
  }
};

} // namespace pagedattn
