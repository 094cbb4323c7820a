#pragma once
// The thread block's share of the paged decode: one (sequence, KV head, group of query heads, KV
// partition) tile. Each K/V vector is loaded once and used for every query head of the group (GQA).
//
// Inside the block, warp w takes the 8-token groups w, w + warps, ... of the partition (8 = the smallest
// cache block size, so a group never straddles two cache blocks) and keeps one running
// WarpAttentionPartial per query head:
//   QK: a logical warp of qk_width lanes per token, each lane holding chunks_per_lane 16-byte slices of
//       the key (vLLM's x-packed layout) and of every query of the group; WarpReduceShfl sums the slices.
//   softmax: the group's 8 scores per head, relative to the group maximum, folded in with begin_chunk().
//   PV: lane l owns dimensions l + i * warp_threads and reads their V rows (8 contiguous tokens, 16 or
//       32 bytes) once for all heads.
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
__host__ __device__ constexpr int next_power_of_two(int n) { return n <= 1 ? 1 : 2 * next_power_of_two((n + 1) / 2); }
__host__ __device__ constexpr int min_int(int a, int b) { return a < b ? a : b; }
} // namespace detail

template <class T, int HeadDim, int MaxHeads, class Policy>
class AgentPagedAttention {
public:
  static constexpr int block_threads = Policy::block_threads;
  static constexpr int warps = block_threads / warp_threads;
  static constexpr int x = elements_per_vector<T>;
  static constexpr int group_tokens = 8;
  static constexpr int chunks = HeadDim / x; ///< 16-byte slices of one key
  static constexpr int qk_width = detail::min_int(warp_threads, detail::next_power_of_two(chunks));
  static constexpr int chunks_per_lane = ceil_div(chunks, qk_width);
  static constexpr int tokens_per_pass = warp_threads / qk_width;
  static constexpr int passes = group_tokens / tokens_per_pass;
  static constexpr int v_vectors = group_tokens / x; ///< 16-byte vectors per V row of a group
  using Partial = WarpAttentionPartial<HeadDim>;
  using Reduce = BlockReducePartials<HeadDim, block_threads>;
  using Combine = AgentPartitionCombine<HeadDim, MaxHeads, block_threads>;

  static_assert(HeadDim % x == 0 && HeadDim % 16 == 0, "head size must be a multiple of 16");
  static_assert(block_threads % warp_threads == 0, "block_threads must be a multiple of the warp width");
  static_assert(group_tokens % tokens_per_pass == 0, "a pass must not straddle token groups");
  static_assert(group_tokens % x == 0, "V rows of a group must be whole 16-byte vectors");

  struct TempStorage {
    union alignas(16) {
      struct alignas(16) {
        float scores[warps][MaxHeads][group_tokens];
        float weights[warps][MaxHeads][group_tokens];
      } loop;                           ///< per-warp scratch of the main loop
      typename Reduce::TempStorage reduce; ///< after the loop
    } phase;
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

    // ---- this partition's tokens, 8 at a time -----------------------------------------------------------
    float q[MaxHeads][chunks_per_lane][x];
    load_queries(seq, first_head, heads, q);
    Partial partial[MaxHeads];
#pragma unroll
    for (int g = 0; g < MaxHeads; ++g) { partial[g].reset(); }

    const int first_token = tile.partition * p_.partition_tokens;
    const int end_token = detail::min_int(first_token + p_.partition_tokens, seq_len);
    const int end_group = ceil_div(end_token, group_tokens);
    for (int group = first_token / group_tokens + arch::warp_id(); group < end_group; group += warps)
    {
      ConsumeGroup(seq, kv_head, first_head, heads, seq_len, group * group_tokens, q, partial);
    }
    __syncthreads(); // every warp is done with phase.loop before phase.reduce reuses it

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
    combine.Run(p_.state, tile.first_tile(p_.max_partitions), tile.partition, num_partitions, temp_.own_stats,
                temp_.own_values, OutputWriter{this, seq, first_head});
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

  /// Lane (token slot s, sub-lane c) holds query dims [(c + k*qk_width) * x, +x) of every head, pre-scaled.
  PAGEDATTN_DEVICE void load_queries(int seq, int first_head, int heads, float (&q)[MaxHeads][chunks_per_lane][x]) const
  {
    const int sub_lane = arch::lane_id() % qk_width;
#pragma unroll
    for (int g = 0; g < MaxHeads; ++g)
    {
#pragma unroll
      for (int k = 0; k < chunks_per_lane; ++k)
      {
        const int c = sub_lane + k * qk_width;
        const T* src = p_.query + seq * p_.query_seq_stride + (first_head + g) * p_.query_head_stride + c * x;
#pragma unroll
        for (int e = 0; e < x; ++e) { q[g][k][e] = (g < heads && c < chunks) ? ElementTraits<T>::to_float(src[e]) * p_.scale : 0.f; }
      }
    }
  }

  /// Fold the 8 tokens starting at `token0` into the warp's partials.
  PAGEDATTN_DEVICE void ConsumeGroup(int seq, int kv_head, int first_head, int heads, int seq_len, int token0,
                                     const float (&q)[MaxHeads][chunks_per_lane][x], Partial (&partial)[MaxHeads])
  {
    const int lane = arch::lane_id(), warp = arch::warp_id();
    const int page = token0 / p_.block_size, in_page = token0 % p_.block_size;
    const int block_id = p_.block_tables[static_cast<std::int64_t>(seq) * p_.max_blocks_per_seq + page];
    if (block_id < 0 || block_id >= p_.num_blocks)
    {
      if (lane == 0) { temp_.invalid = 1; }
      return; // never dereference it
    }
    const std::int64_t head_elems = static_cast<std::int64_t>(HeadDim) * p_.block_size;
    const std::int64_t block_offset = (static_cast<std::int64_t>(block_id) * p_.num_kv_heads + kv_head) * head_elems;

    // QK: each pass scores tokens_per_pass tokens, one logical warp each.
    const int sub_lane = lane % qk_width, slot = lane / qk_width;
    const T* k_base = p_.key_cache + block_offset;
#pragma unroll
    for (int pass = 0; pass < passes; ++pass)
    {
      const int t = pass * tokens_per_pass + slot;
      float k[chunks_per_lane][x];
#pragma unroll
      for (int c = 0; c < chunks_per_lane; ++c)
      {
        const int chunk = sub_lane + c * qk_width;
        if (chunk < chunks) { load_vector_as_float(k_base + (static_cast<std::int64_t>(chunk) * p_.block_size + in_page + t) * x, k[c]); }
        else
        {
#pragma unroll
          for (int e = 0; e < x; ++e) { k[c][e] = 0.f; }
        }
      }
      const int pos = token0 + t;
#pragma unroll
      for (int g = 0; g < MaxHeads; ++g)
      {
        if (g < heads)
        {
          float s = 0.f;
#pragma unroll
          for (int c = 0; c < chunks_per_lane; ++c)
          {
#pragma unroll
            for (int e = 0; e < x; ++e) { s = fmaf(q[g][c][e], k[c][e], s); }
          }
          s = WarpReduceShfl<float, qk_width>::Sum(s);
          if (sub_lane == 0)
          {
            if (p_.alibi_slopes) { s += p_.alibi_slopes[first_head + g] * static_cast<float>(pos - seq_len + 1); }
            temp_.phase.loop.scores[warp][g][t] = pos < seq_len ? s : -INFINITY;
          }
        }
      }
    }
    arch::sync_warp();

    // softmax of the group, per head: lanes 0..7 hold one token each (the group has >= 1 valid token).
#pragma unroll
    for (int g = 0; g < MaxHeads; ++g)
    {
      if (g < heads)
      {
        const float s = lane < group_tokens ? temp_.phase.loop.scores[warp][g][lane] : -INFINITY;
        const float group_max = WarpReduceShfl<float>::AllMax(s);
        const float e = s == -INFINITY ? 0.f : expf(s - group_max);
        const float beta = partial[g].begin_chunk(group_max, WarpReduceShfl<float>::AllSum(e));
        if (lane < group_tokens) { temp_.phase.loop.weights[warp][g][lane] = beta * e; }
      }
    }
    arch::sync_warp();

    // PV: lane owns dims lane + i * warp_threads; V row of d holds the group's tokens contiguously.
    const T* v_base = p_.value_cache + block_offset + in_page;
    const int valid = seq_len - token0; // tokens past the end are zeroed: the cache there may hold NaN
#pragma unroll
    for (int i = 0; i < Partial::items_per_lane; ++i)
    {
      const int d = Partial::dim(lane, i);
      if (d < HeadDim)
      {
        float v[group_tokens];
#pragma unroll
        for (int vv = 0; vv < v_vectors; ++vv)
        {
          float part[x];
          load_vector_as_float(v_base + static_cast<std::int64_t>(d) * p_.block_size + vv * x, part);
#pragma unroll
          for (int e = 0; e < x; ++e) { v[vv * x + e] = part[e]; }
        }
        if (valid < group_tokens)
        {
#pragma unroll
          for (int t = 0; t < group_tokens; ++t) { v[t] = t < valid ? v[t] : 0.f; }
        }
#pragma unroll
        for (int g = 0; g < MaxHeads; ++g)
        {
          if (g < heads)
          {
            const float4 w0 = *reinterpret_cast<const float4*>(&temp_.phase.loop.weights[warp][g][0]);
            const float4 w1 = *reinterpret_cast<const float4*>(&temp_.phase.loop.weights[warp][g][4]);
            float acc = partial[g].weighted_v[i];
            acc = fmaf(w0.x, v[0], acc);
            acc = fmaf(w0.y, v[1], acc);
            acc = fmaf(w0.z, v[2], acc);
            acc = fmaf(w0.w, v[3], acc);
            acc = fmaf(w1.x, v[4], acc);
            acc = fmaf(w1.y, v[5], acc);
            acc = fmaf(w1.z, v[6], acc);
            acc = fmaf(w1.w, v[7], acc);
            partial[g].weighted_v[i] = acc;
          }
        }
      }
    }
    arch::sync_warp(); // scores/weights are rewritten by the next group
  }
};

} // namespace pagedattn
