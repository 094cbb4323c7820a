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
#include <pagedattn/agent/partition_combine_state.cuh>
#include <pagedattn/thread/thread_online_softmax.cuh>
#include <pagedattn/util_arch.cuh>

namespace pagedattn {

/// Partitions per segment the one-wave combine takes (its statistics and factors are staged in shared
/// memory); a launch with longer segments combines by look-back.
inline constexpr int one_wave_max_partitions = 128;

template <int HeadDim, int MaxRows, int BlockThreads>
class AgentSliceCombine {
  static_assert(HeadDim % 4 == 0, "values move as float4");
  static constexpr int vectors_per_head = HeadDim / 4;
  static constexpr int max_vectors = MaxRows * vectors_per_head;
  static constexpr int group_size = partition_group_size;

  /// The staging a segment of P partitions needs: the factors of every step (P x MaxRows SoftmaxRescale,
  /// 16-byte aligned), then the slice's group values (ceil(V / P) vectors x ceil(P / group_size) groups of
  /// float4). Laid out per launch, so that the storage is the largest sum over P, not the sum of the
  /// largest (at 32 rows of head 256: 53 KB instead of 65 KB, a block under sm_86's 99 KB).
  PAGEDATTN_HOST_DEVICE static constexpr int step_bytes(int parts) { return ceil_div(parts * MaxRows * static_cast<int>(sizeof(SoftmaxRescale)), 16) * 16; }
  static constexpr int staging_bytes(int parts)
  {
    return step_bytes(parts) + ceil_div(max_vectors, parts) * ceil_div(parts, group_size) * static_cast<int>(sizeof(float4));
  }
  static constexpr int max_staging_bytes()
  {
    int most = 0;
    for (int p = 2; p <= one_wave_max_partitions; ++p) { most = staging_bytes(p) > most ? staging_bytes(p) : most; }
    return most;
  }

public:
  static constexpr int max_partitions = one_wave_max_partitions;
  static constexpr int max_groups = max_partitions / group_size;

  struct TempStorage {
    float2 group_stats[max_groups][MaxRows];          ///< (max score, exp sum) of every group aggregate
    SoftmaxRescale group_step[max_groups][MaxRows];   ///< factors folding group g into the segment (g > 0)
    /// The factors folding partition q into its group (q not first), [q][head], then the slice's vectors of
    /// every group aggregate (staging_bytes; Step and GroupValues).
    alignas(16) unsigned char staging[max_staging_bytes()];
  };

  /// What one thread loads first and which work items it owns, worked out before the grid barrier
  /// completes (GridBarrier::Arrive .. Wait): the integer work (divisions by the partition count, the
  /// heads and the slice width, 64-bit partial offsets) is off the path from the barrier to the first loads.
  struct Plan {
    int parts, groups, group_heads; ///< partitions, groups of them, (group, head) items
    int v0, slice_vectors, pairs;   ///< the slice's first vector, its width, its (vector, group) items
    int pair_count, pair_group, pair_vector; ///< this thread's first pair (count 0: none)
    const float4* pair_values;      ///< its vector in the group's first partial; partial q at + q * value_stride
    int item_count, item_group, item_head; ///< this thread's first (group, head) item (count 0: none)
    const float2* item_stats;       ///< its head's statistics in the group's first partial; q at + q * heads
    int step_group, step_head;      ///< its first (group > 0, head) of the groups' factors (phase 2b)
    int value_stride;               ///< float4s from one stored partial's values to the next
  };

  PAGEDATTN_DEVICE AgentSliceCombine(TempStorage& temp, int heads) : temp_(temp), heads_(heads) {}

  /// Store a partition's aggregate (stats [heads][2], values [heads][HeadDim] in shared memory) where
  /// Run() of the segment's blocks reads it. Every thread calls it.
  PAGEDATTN_DEVICE void StoreAggregate(const PartitionCombineState& state, const SegmentSlots& segment, int partition, const float* own_stats,
                                       const float* own_values) const
  {
    const PartialRef dst = state.partial(segment, partition);
    for (int i = threadIdx.x; i < 2 * heads_; i += BlockThreads) { arch::store_cg(dst.stats + i, own_stats[i]); }
    for (int v = threadIdx.x; v < heads_ * vectors_per_head; v += BlockThreads)
    {
      arch::store_cg(reinterpret_cast<float4*>(dst.values) + v, reinterpret_cast<const float4*>(own_values)[v]);
    }
  }

  /// The plan of slice `slice` of a segment with `num_partitions` (2 .. max_partitions) stored
  /// aggregates, for the calling thread. Reads nothing but the arguments.
  PAGEDATTN_DEVICE Plan MakePlan(const PartitionCombineState& state, const SegmentSlots& segment, int slice, int num_partitions) const
  {
    Plan plan{};
    plan.parts = num_partitions;
    plan.groups = ceil_div(num_partitions, group_size);
    plan.group_heads = plan.groups * heads_;
    const int vectors = heads_ * vectors_per_head, per_slice = ceil_div(vectors, num_partitions);
    plan.v0 = slice * per_slice;
    plan.slice_vectors = max(0, min(vectors, plan.v0 + per_slice) - plan.v0);
    plan.pairs = plan.slice_vectors * plan.groups;
    plan.value_stride = static_cast<int>(state.partial_floats() / 4);
    const PartialRef first = state.partial(segment, 0);
    plan.pair_count = 0;
    if (static_cast<int>(threadIdx.x) < plan.pairs)
    {
      plan.pair_group = threadIdx.x / plan.slice_vectors;
      plan.pair_vector = plan.v0 + threadIdx.x % plan.slice_vectors;
      plan.pair_count = min(group_size, num_partitions - plan.pair_group * group_size);
      plan.pair_values = reinterpret_cast<const float4*>(first.values) +
                         static_cast<std::ptrdiff_t>(plan.pair_group * group_size) * plan.value_stride + plan.pair_vector;
    }
    plan.item_count = 0;
    if (static_cast<int>(threadIdx.x) < plan.group_heads)
    {
      plan.item_group = threadIdx.x / heads_;
      plan.item_head = threadIdx.x % heads_;
      plan.item_count = min(group_size, num_partitions - plan.item_group * group_size);
      plan.item_stats = reinterpret_cast<const float2*>(first.stats) + plan.item_group * group_size * state.heads + plan.item_head;
    }
    const int step_item = BlockThreads - 1 - static_cast<int>(threadIdx.x); // 2b counts from the last thread
    plan.step_group = 1 + step_item / heads_;
    plan.step_head = step_item % heads_;
    return plan;
  }

  /// After the grid barrier: fold the planned slice of the segment's output over its stored aggregates
  /// and write it: write(h, vector_index, float4). Every thread calls it, with its own MakePlan().
  ///
  /// Three phases, each a short chain in registers between two block barriers:
  ///   1. per (group, head): the group's statistics -> the factors of each step inside the group and the
  ///      group aggregate's statistics;
  ///   2. per (vector, group) pair: the group aggregate of one vector of the slice; and, on other threads,
  ///      per (group, head): the factors folding the group into the fold of the groups before it;
  ///   3. per vector of the slice: the fold of its group aggregates and of their exp sums, normalised.
  /// Every load of phases 1 and 2 (statistics and values) is issued before the first is used.
  template <class WriteOutput>
  PAGEDATTN_DEVICE void Run(const PartitionCombineState& state, const SegmentSlots& segment, const Plan& plan, WriteOutput write)
  {
    PAGEDATTN_TRACE_POINT(TracePoint::slice_fold_started);
    float2 s[group_size];
    LoadStats(plan.item_stats, plan.item_count, state.heads, s);
    float4 x[group_size];
    LoadValues(plan.pair_values, plan.pair_count, plan.value_stride, x);
    PAGEDATTN_TRACE_AFTER(TracePoint::slice_stats_landed, s[0].x);
    PAGEDATTN_TRACE_AFTER(TracePoint::slice_values_landed, x[0].x);

    // 1. per (group, head): the same left fold of statistics as AgentPartitionCombine's FoldBatch, its
    //    steps' factors side by side (fold_factors; steps past the group's end fold the padding (-inf, 0)
    //    and are not used).
    for (int item = threadIdx.x; item < plan.group_heads; item += BlockThreads)
    {
      int g = plan.item_group, h = plan.item_head, stat_count = plan.item_count;
      if (item != static_cast<int>(threadIdx.x)) // a later item (more than BlockThreads of them)
      {
        g = item / heads_;
        h = item % heads_;
        stat_count = min(group_size, plan.parts - g * group_size);
        LoadStats(reinterpret_cast<const float2*>(state.partial(segment, g * group_size).stats) + h, stat_count, state.heads, s);
      }
      SoftmaxRescale r[group_size];
      fold_factors(s, r);
      // Branch-free, so that the steps' exponentials overlap: every step's factors are stored (a padding
      // step's slot, past the group's end, is never read), and the exp sum and the maximum take a step only
      // inside the group.
      float group_max = s[0].x, l = s[0].y;
#pragma unroll
      for (int q = 1; q < group_size; ++q)
      {
        Step(g * group_size + q, h) = r[q];
        const bool inside = q < stat_count;
        l = inside ? rescaled_sum(r[q], l, s[q].y) : l;
        group_max = inside ? r[q].max_score : group_max;
      }
      temp_.group_stats[g][h] = make_float2(group_max, l);
      if (item == 0) { PAGEDATTN_TRACE_POINT(TracePoint::slice_first_group_stats); }
    }
    __syncthreads();
    PAGEDATTN_TRACE_POINT(TracePoint::slice_group_stats_done);

    // 2a. per (vector, group) pair: the group aggregate of the vector; later passes load as they go
    for (int pair = threadIdx.x; pair < plan.pairs; pair += BlockThreads)
    {
      int g = plan.pair_group, v = plan.pair_vector, count = plan.pair_count;
      if (pair != static_cast<int>(threadIdx.x)) // a later pair (more than BlockThreads of them)
      {
        g = pair / plan.slice_vectors;
        v = plan.v0 + pair % plan.slice_vectors;
        count = min(group_size, plan.parts - g * group_size);
        LoadValues(reinterpret_cast<const float4*>(state.partial(segment, g * group_size).values) + v, count, plan.value_stride, x);
      }
      const int h = v / vectors_per_head;
      SoftmaxRescale r[group_size]; // every factor read before the chain that uses them
#pragma unroll
      for (int q = 1; q < group_size; ++q)
      {
        if (q < count) { r[q] = Step(g * group_size + q, h); }
      }
      float4 a = x[0];
#pragma unroll
      for (int q = 1; q < group_size; ++q)
      {
        if (q < count) { a = rescaled_sum(r[q], a, x[q]); }
      }
      GroupValues(plan.parts)[pair] = a;
    }
    // 2b. per (group g > 0, head h), counted from the block's last thread (which 2a leaves idle unless
    //     the slice is wide): the factors folding group g into the fold of groups 0..g-1 (the running
    //     maximum recomputed from the group maxima, so that no thread waits on another's chain)
    for (int item = BlockThreads - 1 - threadIdx.x; item < (plan.groups - 1) * heads_; item += BlockThreads)
    {
      int g = plan.step_group, h = plan.step_head;
      if (item != BlockThreads - 1 - static_cast<int>(threadIdx.x)) // a later item (more than BlockThreads of them)
      {
        g = 1 + item / heads_;
        h = item % heads_;
      }
      temp_.group_step[g][h] = fold_step_factors([&](int k) { return temp_.group_stats[k][h].x; }, g);
    }
    __syncthreads();
    PAGEDATTN_TRACE_POINT(TracePoint::slice_group_values_done);

    // 3. each vector of the slice: the fold of its group aggregates and of their exp sums, normalised
    for (int i = threadIdx.x; i < plan.slice_vectors; i += BlockThreads)
    {
      const int v = plan.v0 + i, h = v / vectors_per_head;
      const float4* group_values = GroupValues(plan.parts);
      float4 o = group_values[i];
      float l = temp_.group_stats[0][h].y;
      for (int g = 1; g < plan.groups; ++g)
      {
        const SoftmaxRescale r = temp_.group_step[g][h];
        o = rescaled_sum(r, o, group_values[g * plan.slice_vectors + i]);
        l = rescaled_sum(r, l, temp_.group_stats[g][h].y);
      }
      write(h, v % vectors_per_head, normalized_output(o, l));
    }
  }

private:
  TempStorage& temp_;
  int heads_;

  /// The factors folding partition q into its group, for head h (TempStorage::staging).
  PAGEDATTN_DEVICE SoftmaxRescale& Step(int q, int h) const { return reinterpret_cast<SoftmaxRescale*>(temp_.staging)[q * MaxRows + h]; }
  /// The slice's group values of a segment of `parts` partitions, after its factors.
  PAGEDATTN_DEVICE float4* GroupValues(int parts) const { return reinterpret_cast<float4*>(temp_.staging + step_bytes(parts)); }

  /// The vector at `values` of `count` consecutive partials (`stride` float4s apart) into x (nothing for
  /// count 0).
  PAGEDATTN_DEVICE static void LoadValues(const float4* values, int count, int stride, float4 (&x)[group_size])
  {
#pragma unroll
    for (int q = 0; q < group_size; ++q)
    {
      if (q >= count) { break; }
      x[q] = arch::load_cg(values + q * stride);
    }
  }

  /// The statistics (max score, exp sum) at `stats` of `count` consecutive partials (`heads` float2s
  /// apart) into s, padded with the empty partial's (-inf, 0).
  PAGEDATTN_DEVICE static void LoadStats(const float2* stats, int count, int heads, float2 (&s)[group_size])
  {
#pragma unroll
    for (int q = 0; q < group_size; ++q) { s[q] = q < count ? arch::load_cg(stats + q * heads) : make_float2(-INFINITY, 0.f); }
  }
};

} // namespace pagedattn
