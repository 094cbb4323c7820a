#pragma once
// Level 3: the combine of a launch that runs in one wave (a cooperative launch: every block resident).
// Each block stores its partition's aggregate, the grid meets at a GridBarrier, and then block p of a
// segment with P partitions folds slice p of the segment's output (1/P of its heads x head_dim values)
// over all P partials. So the fold after the last partition is spread over all P blocks of the segment
// (about heads * head_dim * 4 bytes per block) instead of being two folds of up to 9 whole partials on
// one block each (AgentPartitionCombine), and no block waits on a group or looks back.
//
// Same bits as AgentPartitionCombine: it computes the same fixed tree, a left fold within each group of
// partition_group_size partitions, then a left fold of the group aggregates, with the same
// softmax_rescale and rescaled_sum calls in the same order per element, and the same normalisation.
// So the output does not depend on which of the two combines a launch used.
#include <pagedattn/agent/partition_tile_state.cuh>
#include <pagedattn/block/online_softmax_combine.cuh>
#include <pagedattn/util_arch.cuh>

namespace pagedattn {

/// Partitions per segment the one-wave combine takes (its statistics and factors are staged in shared
/// memory); a launch with longer segments combines by look-back.
inline constexpr int one_wave_max_partitions = 128;

template <int HeadDim, int MaxHeads, int BlockThreads>
class AgentSliceCombine {
  static_assert(HeadDim % 4 == 0, "values move as float4");
  static constexpr int vectors_per_head = HeadDim / 4;
  static constexpr int max_vectors = MaxHeads * vectors_per_head;
  static constexpr int group_size = partition_group_size;

  /// The most group values a slice needs: ceil(V / P) vectors x ceil(P / group_size) groups, over P >= 2.
  static constexpr int max_slice_group_values()
  {
    int most = 0;
    for (int p = 2; p <= one_wave_max_partitions; ++p)
    {
      const int n = ceil_div(max_vectors, p) * ceil_div(p, group_size);
      most = n > most ? n : most;
    }
    return most;
  }

public:
  static constexpr int max_partitions = one_wave_max_partitions;
  static constexpr int max_groups = max_partitions / group_size;

  struct TempStorage {
    SoftmaxRescale step[max_partitions][MaxHeads];     ///< factors folding partition q into its group (q not first)
    float2 group_stats[max_groups][MaxHeads];          ///< (max score, exp sum) of every group aggregate
    SoftmaxRescale group_step[max_groups][MaxHeads];   ///< factors folding group g into the segment (g > 0)
    float exp_sum[MaxHeads];                           ///< the segment's
    float4 group_values[max_slice_group_values()];     ///< the slice's vectors of every group aggregate
  };

  PAGEDATTN_DEVICE AgentSliceCombine(TempStorage& temp, int heads) : temp_(temp), heads_(heads) {}

  /// Store a partition's aggregate (stats [heads][2], values [heads][HeadDim] in shared memory) where
  /// Run() of the segment's blocks reads it. Every thread calls it.
  PAGEDATTN_DEVICE void StoreAggregate(const PartitionTileState& state, int segment, int partition, const float* own_stats,
                                       const float* own_values) const
  {
    const PartialRef dst = state.tile(segment, partition);
    for (int i = threadIdx.x; i < 2 * heads_; i += BlockThreads) { arch::store_cg(dst.stats + i, own_stats[i]); }
    for (int v = threadIdx.x; v < heads_ * vectors_per_head; v += BlockThreads)
    {
      arch::store_cg(reinterpret_cast<float4*>(dst.values) + v, reinterpret_cast<const float4*>(own_values)[v]);
    }
  }

  /// After the grid barrier: fold slice `slice` of the segment's output over its `num_partitions` (2 ..
  /// max_partitions) stored aggregates and write it: write(h, vector_index, float4). Every thread calls it.
  ///
  /// Three phases, each a short chain in registers between two block barriers:
  ///   1. per (group, head): the group's statistics -> the factors of each step inside the group and the
  ///      group aggregate's statistics;
  ///   2. per (vector, group) pair: the group aggregate of one vector of the slice; and, on other threads,
  ///      per head: the factors folding each group into the segment and the segment's exp sum;
  ///   3. per vector of the slice: the fold of its group aggregates, normalised.
  /// Every load of phases 1 and 2 (statistics and values) is issued before the first is used.
  template <class WriteOutput>
  PAGEDATTN_DEVICE void Run(const PartitionTileState& state, int segment, int slice, int num_partitions, WriteOutput write)
  {
    const int parts = num_partitions, groups = ceil_div(parts, group_size), group_heads = groups * heads_;
    const int vectors = heads_ * vectors_per_head, per_slice = ceil_div(vectors, parts);
    const int v0 = slice * per_slice, slice_vectors = min(vectors, v0 + per_slice) - v0;
    const int pairs = slice_vectors > 0 ? slice_vectors * groups : 0; // (vector, group) work items, vector-minor

    PAGEDATTN_TRACE_POINT(14);
    float4 x[group_size];
    int count = LoadPair(state, segment, v0, slice_vectors, parts, threadIdx.x, pairs, x);
    float2 s[group_size];
    int stat_count = LoadGroupStats(state, segment, parts, threadIdx.x, group_heads, s);
    PAGEDATTN_TRACE_AFTER(16, s[0].x);
    PAGEDATTN_TRACE_AFTER(17, x[0].x);

    // 1. per (group, head): the same left fold of statistics as AgentPartitionCombine's FoldChunk. The
    //    running maxima are a chain of selects; the factors' exponentials do not depend on each other
    //    (steps past the group's end fold the padding (-inf, 0) and are not used).
    for (int item = threadIdx.x; item < group_heads; item += BlockThreads)
    {
      if (item != threadIdx.x) { stat_count = LoadGroupStats(state, segment, parts, item, group_heads, s); }
      const int g = item / heads_, h = item % heads_;
      SoftmaxRescale r[group_size];
      float m = s[0].x;
#pragma unroll
      for (int q = 1; q < group_size; ++q)
      {
        r[q] = softmax_rescale(m, s[q].x);
        m = r[q].max_score;
      }
      float group_max = s[0].x, l = s[0].y;
#pragma unroll
      for (int q = 1; q < group_size; ++q)
      {
        if (q < stat_count)
        {
          temp_.step[g * group_size + q][h] = r[q];
          l = rescaled_sum(r[q], l, s[q].y);
          group_max = r[q].max_score;
        }
      }
      temp_.group_stats[g][h] = make_float2(group_max, l);
      if (item == 0) { PAGEDATTN_TRACE_POINT(15); }
    }
    __syncthreads();
    PAGEDATTN_TRACE_POINT(8);

    // 2a. per (vector, group) pair: the group aggregate of the vector; later passes load as they go
    for (int pair = threadIdx.x; pair < pairs; pair += BlockThreads)
    {
      if (pair != threadIdx.x) { count = LoadPair(state, segment, v0, slice_vectors, parts, pair, pairs, x); }
      const int g = pair / slice_vectors, v = v0 + pair % slice_vectors, h = v / vectors_per_head;
      float4 a = x[0];
#pragma unroll
      for (int q = 1; q < group_size; ++q)
      {
        if (q >= count) { break; }
        const SoftmaxRescale r = temp_.step[g * group_size + q][h];
        a = make_float4(rescaled_sum(r, a.x, x[q].x), rescaled_sum(r, a.y, x[q].y), rescaled_sum(r, a.z, x[q].z), rescaled_sum(r, a.w, x[q].w));
      }
      temp_.group_values[pair] = a;
    }
    // 2b. per head (counted from the block's last thread, which 2a leaves idle unless the slice is
    //     wide): the fold of the group statistics (factors first, then the exp sum's chain)
    for (int h = BlockThreads - 1 - threadIdx.x; h < heads_; h += BlockThreads)
    {
      float m = temp_.group_stats[0][h].x;
      for (int g = 1; g < groups; ++g)
      {
        const SoftmaxRescale r = softmax_rescale(m, temp_.group_stats[g][h].x);
        temp_.group_step[g][h] = r;
        m = r.max_score;
      }
      float l = temp_.group_stats[0][h].y;
      for (int g = 1; g < groups; ++g) { l = rescaled_sum(temp_.group_step[g][h], l, temp_.group_stats[g][h].y); }
      temp_.exp_sum[h] = l;
    }
    __syncthreads();
    PAGEDATTN_TRACE_POINT(9);

    // 3. each vector of the slice: the fold of its group aggregates, normalised
    for (int i = threadIdx.x; i < slice_vectors; i += BlockThreads)
    {
      const int v = v0 + i, h = v / vectors_per_head;
      float4 o = temp_.group_values[i];
      for (int g = 1; g < groups; ++g)
      {
        const SoftmaxRescale r = temp_.group_step[g][h];
        const float4 a = temp_.group_values[g * slice_vectors + i];
        o = make_float4(rescaled_sum(r, o.x, a.x), rescaled_sum(r, o.y, a.y), rescaled_sum(r, o.z, a.z), rescaled_sum(r, o.w, a.w));
      }
      const float l = temp_.exp_sum[h];
      // as AgentPartitionCombine: the empty softmax is a zero output; a NaN exp sum stays NaN
      write(h, v % vectors_per_head,
            l == 0.f ? make_float4(0.f, 0.f, 0.f, 0.f) : make_float4(__fdiv_rn(o.x, l), __fdiv_rn(o.y, l), __fdiv_rn(o.z, l), __fdiv_rn(o.w, l)));
    }
  }

private:
  TempStorage& temp_;
  int heads_;

  /// Load the vector of `pair` (vector v0 + pair % slice_vectors, group pair / slice_vectors: neighbouring
  /// threads read neighbouring vectors of one partial) of every partition of its group into x; returns
  /// how many (0 for no pair).
  PAGEDATTN_DEVICE static int LoadPair(const PartitionTileState& state, int segment, int v0, int slice_vectors, int parts, int pair, int pairs,
                                       float4 (&x)[group_size])
  {
    if (pair >= pairs) { return 0; }
    const int g = pair / slice_vectors, v = v0 + pair % slice_vectors, first = g * group_size, count = min(group_size, parts - first);
#pragma unroll
    for (int q = 0; q < group_size; ++q)
    {
      if (q >= count) { break; }
      x[q] = arch::load_cg(reinterpret_cast<const float4*>(state.tile(segment, first + q).values) + v);
    }
    return count;
  }

  /// Load the statistics (max score, exp sum) of head item % heads_ of every partition of group
  /// item / heads_ into s (the segment's statistics are [partition][state.heads] float2), padded with the
  /// empty partial's (-inf, 0); returns how many were loaded (0 for no item).
  PAGEDATTN_DEVICE int LoadGroupStats(const PartitionTileState& state, int segment, int parts, int item, int group_heads,
                                      float2 (&s)[group_size]) const
  {
    const int g = item / heads_, h = item % heads_, first = g * group_size;
    const int count = item < group_heads ? min(group_size, parts - first) : 0;
    const float2* stats = reinterpret_cast<const float2*>(state.tile(segment, 0).stats) + h;
#pragma unroll
    for (int q = 0; q < group_size; ++q) { s[q] = q < count ? arch::load_cg(stats + (first + q) * state.heads) : make_float2(-INFINITY, 0.f); }
    return count;
  }
};

} // namespace pagedattn
