#pragma once
// The thread block's share of the paged decode: one (sequence, KV head, group of query heads, KV
// partition) tile. Each K/V vector is loaded once and used for every query head of the group (GQA).
//
// Inside the block, warp w takes the tiles of warp_threads tokens w, w + warps, ... of the partition and
// keeps one running WarpAttentionPartial per query head:
//   QK: lane t scores token t of the tile against every query of the group: it reads the key's 16-byte
//       slices (vLLM's x-packed layout: for a fixed slice, consecutive lanes read consecutive 16 bytes)
//       and the queries from shared memory (one broadcast address per warp), so no shuffle is needed.
//   softmax: the tile's scores per head, relative to the tile maximum (WarpReduceShfl max and sum),
//       folded in with begin_chunk(); the weights go to per-warp shared memory.
//   PV: lane l owns dimensions l + i * warp_threads and reads their V rows (8 contiguous tokens per
//       16 bytes for fp16) once for all heads.
// At the end BlockReducePartials merges the warps' partials per head, and AgentPartitionCombine merges
// the partitions of the segment (or writes the output directly when there is only one).
//
// Invalid input never causes an out-of-range read: a block id outside [0, num_blocks) is not
// dereferenced; the partition's partial becomes NaN (so the sequence's output is NaN) and the error
// counter is incremented. A sequence whose seq_len is negative, exceeds max_seq_len or exceeds its block
// table gets a NaN output without any cache access.
#include <pagedattn/agent/agent_partition_combine.cuh>
#include <pagedattn/block/block_reduce_partials.cuh>
#include <pagedattn/util_type.cuh>
#include <pagedattn/warp/warp_attention_partial.cuh>
#include <pagedattn/warp/warp_reduce_shfl.cuh>

#include <cstdint>

namespace pagedattn {

/// Everything a decode launch needs, resolved by the dispatch (device pointers, strides in elements).
template <class T>
struct PagedAttentionParams {
  const T* query;
  std::int64_t query_seq_stride, query_head_stride;
  const T* key_cache;   ///< [num_blocks][num_kv_heads][head_size / x][block_size][x]
  const T* value_cache; ///< [num_blocks][num_kv_heads][head_size][block_size]
  std::int64_t num_blocks;
  const int* block_tables; ///< [num_seqs][max_blocks_per_seq]
  int max_blocks_per_seq;
  const int* seq_lens;
  int max_seq_len;
  int num_kv_heads, block_size;
  float scale;
  const float* alibi_slopes; ///< [num_heads] or null
  T* output;
  std::int64_t output_seq_stride, output_head_stride;
  unsigned* error_count; ///< optional

  // Derived by the dispatch.
  int heads_per_tile, head_tiles; ///< the GQA group of a KV head, split into tiles of <= MaxHeads heads
  int gqa_ratio;
  int partition_tokens, max_partitions;
  bool use_tickets; ///< partitioned path: tickets + look-back; single-partition path: blockIdx
  PartitionTileState state;
};

namespace detail {
__host__ __device__ constexpr int min_int(int a, int b) { return a < b ? a : b; }
} // namespace detail

template <class T, int HeadDim, int MaxHeads, class Policy>
class AgentPagedAttention {
public:
  static constexpr int block_threads = Policy::block_threads;
  static constexpr int warps = block_threads / warp_threads;
  static constexpr int x = elements_per_vector<T>;
  static constexpr int tile_tokens = warp_threads;       ///< tokens a warp takes at a time: one per lane
  static constexpr int chunks = HeadDim / x;             ///< 16-byte slices of one key
  static constexpr int v_vectors = tile_tokens / 8;      ///< 8-token V vectors per tile (8 = smallest block)
  static constexpr int v_loads = 8 / x;                  ///< 16-byte loads per 8-token V vector (1 or 2)
  using Partial = WarpAttentionPartial<HeadDim>;
  using Reduce = BlockReducePartials<HeadDim, block_threads>;
  using Combine = AgentPartitionCombine<HeadDim, MaxHeads, block_threads>;

  static_assert(HeadDim % 16 == 0, "head size must be a multiple of 16");
  static_assert(block_threads % warp_threads == 0, "block_threads must be a multiple of the warp width");
  static_assert(8 % x == 0, "an 8-token V vector is a whole number of 16-byte loads");

  struct TempStorage {
    union alignas(16) {
      float weights[warps][MaxHeads][tile_tokens]; ///< main loop: per-warp softmax weights of its tile
      typename Reduce::TempStorage reduce;          ///< after the loop
    } phase;
    alignas(16) float query[MaxHeads][HeadDim];     ///< the group's queries, pre-scaled, fp32
    float own_stats[MaxHeads * 2];
    alignas(16) float own_values[MaxHeads * HeadDim];
    typename Combine::TempStorage combine;
    unsigned ticket;
    int invalid;
  };

  PAGEDATTN_DEVICE AgentPagedAttention(TempStorage& temp, const PagedAttentionParams<T>& p) : temp_(temp), p_(p) {}

  PAGEDATTN_DEVICE void Run()
  {
    // ---- which tile ---------------------------------------------------------------------------------
    if (threadIdx.x == 0)
    {
      temp_.ticket = p_.use_tickets ? arch::atomic_fetch_add(p_.state.ticket, 1u) : blockIdx.x;
      temp_.invalid = 0;
    }
    __syncthreads();
    const TileCoordinates tile = tile_of_ticket(temp_.ticket, p_.max_partitions);
    const int head_tile = tile.segment % p_.head_tiles;
    const int kv_head = (tile.segment / p_.head_tiles) % p_.num_kv_heads;
    const int seq = tile.segment / (p_.head_tiles * p_.num_kv_heads);
    const int first_head = kv_head * p_.gqa_ratio + head_tile * p_.heads_per_tile;
    const int heads = detail::min_int(p_.heads_per_tile, p_.gqa_ratio - head_tile * p_.heads_per_tile);
    const int seq_len = p_.seq_lens[seq];

    const bool bad_length = seq_len < 0 || seq_len > p_.max_seq_len ||
                            static_cast<std::int64_t>(seq_len) > static_cast<std::int64_t>(p_.max_blocks_per_seq) * p_.block_size;
    const int num_partitions = bad_length ? 0 : ceil_div(seq_len, p_.partition_tokens);
    if (tile.partition >= num_partitions)
    {
      if (tile.partition == 0) // zero-length (or invalid) sequence: the first block writes the output
      {
        const float fill = bad_length ? __int_as_float(0x7fc00000) : 0.f;
        for (int i = threadIdx.x; i < heads * HeadDim; i += block_threads) { store_output(seq, first_head + i / HeadDim, i % HeadDim, fill); }
        if (bad_length && threadIdx.x == 0 && p_.error_count) { atomicAdd(p_.error_count, 1u); }
      }
      return;
    }

    // ---- queries to shared memory (pre-scaled), partials reset ------------------------------------------
    for (int i = threadIdx.x; i < MaxHeads * HeadDim; i += block_threads)
    {
      const int g = i / HeadDim, d = i % HeadDim;
      temp_.query[g][d] = g < heads ? ElementTraits<T>::to_float(p_.query[seq * p_.query_seq_stride + (first_head + g) * p_.query_head_stride + d]) * p_.scale
                                    : 0.f;
    }
    __syncthreads();
    Partial partial[MaxHeads];
#pragma unroll
    for (int g = 0; g < MaxHeads; ++g) { partial[g].reset(); }

    // ---- this partition's tokens, one warp-tile of warp_threads tokens at a time -------------------------
    const int first_token = tile.partition * p_.partition_tokens;
    const int end_token = detail::min_int(first_token + p_.partition_tokens, seq_len);
    for (int token0 = first_token + arch::warp_id() * tile_tokens; token0 < end_token; token0 += warps * tile_tokens)
    {
      ConsumeTile(seq, kv_head, first_head, heads, seq_len, token0, end_token, partial);
    }
    __syncthreads(); // every warp is done with phase.weights before phase.reduce reuses it

    // ---- block reduce of the warps' partials, one head at a time, into own_stats / own_values -------------
    Reduce reduce(temp_.phase.reduce);
#pragma unroll
    for (int g = 0; g < MaxHeads; ++g)
    {
      if (g >= heads) { continue; } // uniform across the block
      const typename Reduce::Stats stats = reduce.Reduce(partial[g]);
      for (int d = threadIdx.x; d < HeadDim; d += block_threads) { temp_.own_values[g * HeadDim + d] = reduce.weighted_v(d); }
      if (threadIdx.x == 0)
      {
        temp_.own_stats[2 * g] = stats.max_score;
        temp_.own_stats[2 * g + 1] = stats.exp_sum;
      }
      __syncthreads(); // row 0 of the reduce storage is read before the next head overwrites it
    }
    if (temp_.invalid) // a block id outside the cache: this partition's partial (and the output) is NaN
    {
      const float nan = __int_as_float(0x7fc00000);
      for (int i = threadIdx.x; i < heads * HeadDim; i += block_threads) { temp_.own_values[i] = nan; }
      if (threadIdx.x < heads) { temp_.own_stats[2 * threadIdx.x + 1] = nan; }
      if (threadIdx.x == 0 && p_.error_count) { atomicAdd(p_.error_count, 1u); }
      __syncthreads();
    }

    // ---- merge the partitions of the segment (or write the single partition) -------------------------
    Combine combine(temp_.combine, heads);
    combine.Run(p_.state, tile.segment, tile.partition, num_partitions, temp_.own_stats, temp_.own_values,
                OutputWriter{this, seq, first_head});
  }

private:
  TempStorage& temp_;
  const PagedAttentionParams<T>& p_;

  struct OutputWriter {
    const AgentPagedAttention* agent;
    int seq, first_head;
    PAGEDATTN_DEVICE void operator()(int h, int vector, float4 v) const
    {
      agent->store_output(seq, first_head + h, 4 * vector + 0, v.x);
      agent->store_output(seq, first_head + h, 4 * vector + 1, v.y);
      agent->store_output(seq, first_head + h, 4 * vector + 2, v.z);
      agent->store_output(seq, first_head + h, 4 * vector + 3, v.w);
    }
  };

  PAGEDATTN_DEVICE void store_output(int seq, int head, int d, float value) const
  {
    p_.output[seq * p_.output_seq_stride + head * p_.output_head_stride + d] = ElementTraits<T>::from_float(value);
  }

  /// Fold tokens [token0, min(token0 + tile_tokens, end_token)) into the warp's partials.
  PAGEDATTN_DEVICE void ConsumeTile(int seq, int kv_head, int first_head, int heads, int seq_len, int token0, int end_token,
                                    Partial (&partial)[MaxHeads])
  {
    const int lane = arch::lane_id(), warp = arch::warp_id();
    const std::int64_t head_elems = static_cast<std::int64_t>(HeadDim) * p_.block_size;

    // Lane t owns token token0 + t: its cache block, checked before anything is read from it.
    const int pos = token0 + lane;
    const bool live = pos < end_token;
    const int block_id = live ? p_.block_tables[static_cast<std::int64_t>(seq) * p_.max_blocks_per_seq + pos / p_.block_size] : 0;
    if (arch::any_lane(live && (block_id < 0 || block_id >= p_.num_blocks)))
    {
      if (lane == 0) { temp_.invalid = 1; }
      return; // never dereference it
    }
    const std::int64_t head_offset = (static_cast<std::int64_t>(block_id) * p_.num_kv_heads + kv_head) * head_elems;

    // QK: the lane's whole key against every query of the group (queries broadcast from shared memory).
    float score[MaxHeads];
#pragma unroll
    for (int g = 0; g < MaxHeads; ++g) { score[g] = 0.f; }
    if (live)
    {
      const T* k = p_.key_cache + head_offset + (pos % p_.block_size) * x;
#pragma unroll(Policy::key_chunks_in_flight)
      for (int c = 0; c < chunks; ++c)
      {
        float kf[x];
        load_vector_as_float(k + static_cast<std::int64_t>(c) * p_.block_size * x, kf);
#pragma unroll
        for (int g = 0; g < MaxHeads; ++g)
        {
          if (g < heads)
          {
#pragma unroll
            for (int e = 0; e < x; e += 4)
            {
              const float4 q = *reinterpret_cast<const float4*>(&temp_.query[g][c * x + e]);
              score[g] = fmaf(q.x, kf[e], score[g]);
              score[g] = fmaf(q.y, kf[e + 1], score[g]);
              score[g] = fmaf(q.z, kf[e + 2], score[g]);
              score[g] = fmaf(q.w, kf[e + 3], score[g]);
            }
          }
        }
      }
    }

    // softmax of the tile per head, relative to the tile maximum, folded in with begin_chunk().
#pragma unroll
    for (int g = 0; g < MaxHeads; ++g)
    {
      if (g < heads)
      {
        float s = -INFINITY;
        if (live) { s = p_.alibi_slopes ? fmaf(p_.alibi_slopes[first_head + g], static_cast<float>(pos - seq_len + 1), score[g]) : score[g]; }
        const float tile_max = WarpReduceShfl<float>::AllMax(s); // finite: lane 0's token is live
        const float e = live ? expf(s - tile_max) : 0.f;
        const float beta = partial[g].begin_chunk(tile_max, WarpReduceShfl<float>::AllSum(e));
        temp_.phase.weights[warp][g][lane] = beta * e;
      }
    }
    arch::sync_warp();

    // PV: lane owns dims lane + i * warp_threads; the V row of a dim holds 8 tokens per 16 bytes (fp16).
#pragma unroll
    for (int j = 0; j < v_vectors; ++j)
    {
      const int vpos = token0 + 8 * j;
      const int vblock = arch::shfl_idx(block_id, 8 * j); // lane 8j owns token vpos
      if (vpos >= end_token) { break; } // uniform
      const int valid = end_token - vpos; // tokens past the end are zeroed: the cache there may hold NaN
      const T* v = p_.value_cache + (static_cast<std::int64_t>(vblock) * p_.num_kv_heads + kv_head) * head_elems + vpos % p_.block_size;
#pragma unroll
      for (int i = 0; i < Partial::items_per_lane; ++i)
      {
        const int d = Partial::dim(lane, i);
        if (d < HeadDim)
        {
          float vf[8];
#pragma unroll
          for (int l = 0; l < v_loads; ++l)
          {
            float part[x];
            load_vector_as_float(v + static_cast<std::int64_t>(d) * p_.block_size + l * x, part);
#pragma unroll
            for (int e = 0; e < x; ++e) { vf[l * x + e] = part[e]; }
          }
          if (valid < 8)
          {
#pragma unroll
            for (int t = 0; t < 8; ++t) { vf[t] = t < valid ? vf[t] : 0.f; }
          }
#pragma unroll
          for (int g = 0; g < MaxHeads; ++g)
          {
            if (g < heads)
            {
              const float4 w0 = *reinterpret_cast<const float4*>(&temp_.phase.weights[warp][g][8 * j]);
              const float4 w1 = *reinterpret_cast<const float4*>(&temp_.phase.weights[warp][g][8 * j + 4]);
              float acc = partial[g].weighted_v[i];
              acc = fmaf(w0.x, vf[0], acc);
              acc = fmaf(w0.y, vf[1], acc);
              acc = fmaf(w0.z, vf[2], acc);
              acc = fmaf(w0.w, vf[3], acc);
              acc = fmaf(w1.x, vf[4], acc);
              acc = fmaf(w1.y, vf[5], acc);
              acc = fmaf(w1.z, vf[6], acc);
              acc = fmaf(w1.w, vf[7], acc);
              partial[g].weighted_v[i] = acc;
            }
          }
        }
      }
    }
    arch::sync_warp(); // the weights are rewritten by the warp's next tile
  }
};

} // namespace pagedattn
