#pragma once
// Level 3: one thread block's part in merging the KV partitions of a segment inside one launch: CUB's
// single-pass pattern (arrival counters, group status words, decoupled look-back) arranged as a fixed
// two-level combine tree, so that the result is bitwise reproducible and the tail stays short.
//
// Protocol, for the block that owns partition p of a segment with P > 1 partitions, in group
// g = p / partition_group_size of G = ceil(P / partition_group_size) groups:
//   1. Store the block's aggregate (cache-global stores), __syncthreads; one thread increments the
//      group's arrival counter with an acquire-release atomic (the barrier puts the whole block's stores
//      before it). Every block but the group's last arrival is done.
//   2. The last arrival (a barrier after the atomic) folds the group's aggregates in partition order:
//      A_g = a_first ⊕ ... ⊕ a_last. With G == 1 it writes the normalised output and stops.
//   3. Group 0 publishes A_0 as its INCLUSIVE value. A later group publishes A_g as AGGREGATE, then
//      looks back: warp 0 polls the statuses of up to warp_threads preceding groups (acquire loads) and
//      stops at the nearest INCLUSIVE group k once every group between k and g is at least AGGREGATE.
//      It folds forward: I_g = I_k ⊕ A_{k+1} ⊕ ... ⊕ A_g, in increasing group order.
//   4. g < G-1: publish I_g as INCLUSIVE (values, barrier, then the status with a release store).
//      g == G-1: write the normalised output instead.
//
// Bitwise reproducibility: every A_g is a fixed left fold, and every I_g is the left fold A_0 ⊕ ... ⊕ A_g
// however far back the look-back went (by induction on g). The output is therefore the same bits
// whatever the timing, and equals the two-kernel combine (FoldSegment), which folds in the same order.
// Short tail: after the last partition finishes, one group fold and one look-back fold remain, and a
// fold of up to fold_batch (= partition_group_size + 1 = 9) partials costs one L2 round trip: their
// statistics and values are all loaded at once, and the rescale factors of the fold's steps are
// computed in parallel (FoldBatch), not one after the other.
//
// Forward progress: work items come from an atomic ticket taken when a block starts, numbered so that the
// partitions of a segment are consecutive and increasing. A group's folder only waits on earlier groups,
// all of whose blocks drew smaller tickets and have therefore started; group 0 never waits. Blocks that
// have started run to completion unless they wait, so by induction every wait ends: no deadlock,
// whatever order the hardware starts blocks in. When no segment has more than one group, nobody waits;
// the blocks still take their work items by ticket (the decode's one-wave launch, which combines with
// AgentSliceCombine instead, is the one that gives block b item b).
#include <pagedattn/agent/partition_combine_state.cuh>
#include <pagedattn/thread/thread_online_softmax.cuh>
#include <pagedattn/util_arch.cuh>

namespace pagedattn {

namespace detail {
/// A measurement hook of the look-back combine (bench/bench_combine.cu; production passes none, and the
/// inlined null pointer compiles the hook away): per segment, the latest time any partition's aggregate
/// was stored (atomicMax; the caller zeroes it) and the time the output was written, in ns. Their
/// difference is the combine's tail.
struct CombineTiming {
  unsigned long long aggregate_ready_ns;
  unsigned long long output_written_ns;
};
} // namespace detail

template <int HeadDim, int MaxRows, int BlockThreads>
class AgentPartitionCombine {
  static_assert(HeadDim % 4 == 0, "values move as float4");
  static constexpr int vectors_per_head = HeadDim / 4;
  static constexpr int max_vectors = MaxRows * vectors_per_head;
  static constexpr int vectors_per_thread = ceil_div(max_vectors, BlockThreads);

public:
  /// Partials folded per batch (one L2 round trip, FoldBatch): a whole group, or, in a look-back fold, the
  /// inclusive value found plus up to a group's worth of aggregates (up to 9 groups, 72 partitions, the
  /// whole look-back fold is one round trip). With more than 8 rows (the tensor-core tile's 32: several new
  /// tokens per sequence) one: a thread holds the running value of its columns and a batch's in registers,
  /// (1 + fold_batch) x vectors_per_thread float4, 16 each at 32 rows of head 256 (batches of 2 and 3
  /// spilled and ran slower: bench/NOTES.md, "The combine: fold tree and look-back").
  static constexpr int fold_batch = MaxRows <= 8 ? partition_group_size + 1 : 1;

  struct TempStorage {
    float max_score[MaxRows];
    float exp_sum[MaxRows];
    float2 staged_stats[fold_batch][MaxRows];     ///< (max score, exp sum) of the batch's partials
    SoftmaxRescale rescale[fold_batch][MaxRows];  ///< the factors of each fold step of the batch
    int lookback_start;
    int last_arrival;
  };

  PAGEDATTN_DEVICE AgentPartitionCombine(TempStorage& temp, int heads) : temp_(temp), heads_(heads) {}

  /// Single-pass merge of partition `partition` (of `num_partitions`) of `segment`. own_stats
  /// ([heads][2]: max, sum) and own_values ([heads][HeadDim]) hold the block's aggregate in shared
  /// memory. write(h, vector_index, float4) stores the normalised output. Every thread calls it.
  template <class WriteOutput>
  PAGEDATTN_DEVICE void Run(const PartitionCombineState& state, const SegmentSlots& segment, int partition, int num_partitions,
                            const float* own_stats, const float* own_values, WriteOutput write,
                            detail::CombineTiming* timing = nullptr)
  {
    LoadOwn(own_stats, own_values);
    if (num_partitions == 1)
    {
      WriteOutput_(write);
      return;
    }

    // 1. store the aggregate, arrive at the group
    const int group = partition / partition_group_size;
    const int group_first = group * partition_group_size;
    const int group_size = min(partition_group_size, num_partitions - group_first);
    StoreValue(state.partial(segment, partition));
    __syncthreads(); // every thread's stores, before thread 0 releases them
    if (threadIdx.x == 0)
    {
      if (timing) { arch::atomic_max(&timing->aggregate_ready_ns, arch::global_timer_ns()); }
      arch::wait_for_prior_grids(); // the counters' reset (the init pass of the decode or of the standalone combine) is complete
      // Releases this block's aggregate; the last arrival acquires every other block's (and passes them
      // on to its threads through the barrier below).
      const unsigned arrived = arch::atomic_add_acq_rel(state.arrivals + state.group_index(segment, group), 1u);
      temp_.last_arrival = arrived == static_cast<unsigned>(group_size - 1);
    }
    __syncthreads();
    PAGEDATTN_TRACE_POINT(TracePoint::aggregate_stored);
    if (!temp_.last_arrival) { return; }

    // 2. fold the group (this block's own aggregate is still in registers, which serves while the fold is a
    //    single batch: a later batch would find the running value changed, and reads the stored aggregate)
    const bool group_one_batch = group_size <= fold_batch;
    FoldSequence([&](int q) { return q == partition && group_one_batch ? running_value : state.partial(segment, q); }, group_first, group_size,
                 /*fresh=*/true);
    PAGEDATTN_TRACE_POINT(TracePoint::group_folded);
    const int num_groups = ceil_div(num_partitions, partition_group_size);
    if (num_groups == 1)
    {
      Finish(write, timing);
      return;
    }

    // 3. publish, look back over the groups, fold forward
    if (group == 0)
    {
      Publish(state, segment, 0, group_status_inclusive);
      return;
    }
    Publish(state, segment, group, group_status_aggregate);
    PAGEDATTN_TRACE_POINT(TracePoint::group_published);
    if (arch::warp_id() == 0) { LookBack(state, segment, group); }
    __syncthreads();
    PAGEDATTN_TRACE_POINT(TracePoint::looked_back);
    // I_g = I_k ⊕ A_{k+1} ⊕ ... ⊕ A_g, one left fold whose first operand is group k's inclusive value. A_g
    // (just published) is still in registers, which serves while the fold is a single batch.
    const int k = temp_.lookback_start;
    const bool one_batch = group - k + 1 <= fold_batch;
    FoldSequence([&](int q) { return q == group && one_batch ? running_value : state.group(segment, q, /*inclusive=*/q == k); }, k,
                 group - k + 1, /*fresh=*/true);

    PAGEDATTN_TRACE_POINT(TracePoint::final_fold_done);
    // 4. publish the inclusive value, or finish the segment
    if (group < num_groups - 1) { Publish(state, segment, group, group_status_inclusive); }
    else { Finish(write, timing); }
  }

  /// A fold source that stands for the running value (FoldBatch).
  static constexpr PartialRef running_value{nullptr, nullptr};

  /// Two-kernel combine, second kernel: the same combine tree, folded by one block per segment without
  /// waiting (group aggregates go through global memory exactly as in Run). Same bits as Run().
  template <class WriteOutput>
  PAGEDATTN_DEVICE void FoldSegment(const PartitionCombineState& state, const SegmentSlots& segment, int num_partitions, WriteOutput write)
  {
    const int num_groups = ceil_div(num_partitions, partition_group_size);
    for (int g = 0; g < num_groups; ++g)
    {
      const int first = g * partition_group_size;
      FoldPartials(state, segment, first, min(partition_group_size, num_partitions - first));
      if (num_groups > 1) { StoreValue(state.group(segment, g, false)); }
    }
    if (num_groups > 1)
    {
      arch::fence_device();
      __syncthreads();
      FoldSequence([&](int q) { return state.group(segment, q, false); }, 0, num_groups, /*fresh=*/true);
    }
    WriteOutput_(write);
  }

  /// Two-kernel combine, first kernel: store the aggregate, no counter, no look-back.
  PAGEDATTN_DEVICE void StoreAggregate(const PartitionCombineState& state, const SegmentSlots& segment, int partition, const float* own_stats,
                                       const float* own_values)
  {
    LoadOwn(own_stats, own_values);
    StoreValue(state.partial(segment, partition));
  }

private:
  TempStorage& temp_;
  int heads_;
  float4 acc_[vectors_per_thread]; ///< this thread's share of the running weighted_v

  PAGEDATTN_DEVICE int vectors() const { return heads_ * vectors_per_head; }
  PAGEDATTN_DEVICE static int vector_index(int j) { return static_cast<int>(threadIdx.x) + j * BlockThreads; }

  /// Running value := the block's own partial in shared memory (stats [heads][2], values [heads][HeadDim]).
  /// Ends with a barrier.
  PAGEDATTN_DEVICE void LoadOwn(const float* stats, const float* values)
  {
    for (int h = threadIdx.x; h < heads_; h += BlockThreads)
    {
      temp_.max_score[h] = stats[2 * h];
      temp_.exp_sum[h] = stats[2 * h + 1];
    }
#pragma unroll
    for (int j = 0; j < vectors_per_thread; ++j)
    {
      const int v = vector_index(j);
      if (v < vectors()) { acc_[j] = reinterpret_cast<const float4*>(values)[v]; }
    }
    __syncthreads();
  }

  /// Running value := running ⊕ src(first) ⊕ ... ⊕ src(first + count - 1), a left fold in index order
  /// (fresh: the running value starts as src(first) instead). Partials are read from global memory.
  template <class Src>
  PAGEDATTN_DEVICE void FoldSequence(Src src, int first, int count, bool fresh)
  {
    for (int done = 0; done < count; done += fold_batch) { FoldBatch(src, first + done, min(fold_batch, count - done), fresh && done == 0); }
  }

  /// FoldSequence for count <= fold_batch partials, in one L2 round trip. The arithmetic is that of a
  /// plain left fold (one softmax_rescale and one rescaled_sum per element and step), but its steps'
  /// rescale factors come out in parallel (fold_step_factors: one thread per step and head), so only the
  /// exp sums and the values remain sequential chains of FMAs. A source equal to running_value stands for the running
  /// value itself (only with fresh: it becomes an operand). Ends with a barrier.
  template <class Src>
  PAGEDATTN_DEVICE void FoldBatch(Src src, int first, int count, bool fresh)
  {
    static_assert(fold_batch * MaxRows <= BlockThreads, "one thread per staged statistic");
    // 1. every partial's statistics (one per thread) and this thread's float4 share of every partial's
    //    values: all loads are issued before the first use of any, so the batch costs one round trip
    const int stat_q = static_cast<int>(threadIdx.x) / heads_, stat_h = static_cast<int>(threadIdx.x) % heads_;
    const bool stages_stat = stat_q < count;
    float2 stat = make_float2(0.f, 0.f);
    if (stages_stat)
    {
      const PartialRef ref = src(first + stat_q);
      stat = ref.stats ? make_float2(arch::load_cg(ref.stats + 2 * stat_h), arch::load_cg(ref.stats + 2 * stat_h + 1))
                       : make_float2(temp_.max_score[stat_h], temp_.exp_sum[stat_h]);
    }
    float4 x[fold_batch][vectors_per_thread];
#pragma unroll
    for (int q = 0; q < fold_batch; ++q)
    {
      if (q >= count) { break; }
      const float* values = src(first + q).values;
#pragma unroll
      for (int j = 0; j < vectors_per_thread; ++j)
      {
        const int v = vector_index(j);
        if (v < vectors()) { x[q][j] = values ? arch::load_cg(reinterpret_cast<const float4*>(values) + v) : acc_[j]; }
      }
    }
    if (stages_stat) { temp_.staged_stats[stat_q][stat_h] = stat; }
    __syncthreads();
    PAGEDATTN_TRACE_POINT(TracePoint::fold_loads_landed);
    // 2. the factors of every step, one thread per (step, head)
    for (int i = threadIdx.x; i < count * heads_; i += BlockThreads)
    {
      const int q = i / heads_, h = i % heads_;
      if (fresh && q == 0) { continue; } // the fold starts from partial 0 itself
      // The fold's operands: the staged partials, after the running value unless fresh.
      const auto max_of = [&](int k) { return fresh ? temp_.staged_stats[k][h].x : k == 0 ? temp_.max_score[h] : temp_.staged_stats[k - 1][h].x; };
      temp_.rescale[q][h] = fold_step_factors(max_of, fresh ? q : q + 1);
    }
    __syncthreads();
    PAGEDATTN_TRACE_POINT(TracePoint::fold_factors_done);
    // 3. the exp sums (one thread per head) and the values (every thread its columns), in step order
    for (int h = threadIdx.x; h < heads_; h += BlockThreads)
    {
      float m = fresh ? temp_.staged_stats[0][h].x : temp_.max_score[h];
      float l = fresh ? temp_.staged_stats[0][h].y : temp_.exp_sum[h];
      for (int q = fresh ? 1 : 0; q < count; ++q)
      {
        l = rescaled_sum(temp_.rescale[q][h], l, temp_.staged_stats[q][h].y);
        m = temp_.rescale[q][h].max_score;
      }
      temp_.max_score[h] = m;
      temp_.exp_sum[h] = l;
    }
#pragma unroll
    for (int q = 0; q < fold_batch; ++q)
    {
      if (q >= count) { break; }
#pragma unroll
      for (int j = 0; j < vectors_per_thread; ++j)
      {
        const int v = vector_index(j);
        if (v >= vectors()) { continue; }
        if (fresh && q == 0)
        {
          acc_[j] = x[q][j];
          continue;
        }
        acc_[j] = rescaled_sum(temp_.rescale[q][v / vectors_per_head], acc_[j], x[q][j]);
      }
    }
    __syncthreads(); // the new statistics, before anyone reads them (and before the staging is reused)
    PAGEDATTN_TRACE_POINT(TracePoint::fold_done);
  }

  /// Running value := a_first ⊕ ... ⊕ a_{first+count-1} (stored partials, in partition order).
  PAGEDATTN_DEVICE void FoldPartials(const PartitionCombineState& state, const SegmentSlots& segment, int first, int count)
  {
    FoldSequence([&](int q) { return state.partial(segment, q); }, first, count, /*fresh=*/true);
  }

  /// Store the running value (cache-global stores; the caller orders them).
  PAGEDATTN_DEVICE void StoreValue(PartialRef dst)
  {
    for (int h = threadIdx.x; h < heads_; h += BlockThreads)
    {
      arch::store_cg(dst.stats + 2 * h, temp_.max_score[h]);
      arch::store_cg(dst.stats + 2 * h + 1, temp_.exp_sum[h]);
    }
#pragma unroll
    for (int j = 0; j < vectors_per_thread; ++j)
    {
      const int v = vector_index(j);
      if (v < vectors()) { arch::store_cg(reinterpret_cast<float4*>(dst.values) + v, acc_[j]); }
    }
  }

  /// Store the running value as the group's aggregate or inclusive value, then (after every thread's
  /// stores) flip the group's status with release order.
  PAGEDATTN_DEVICE void Publish(const PartitionCombineState& state, const SegmentSlots& segment, int group, GroupStatus status)
  {
    StoreValue(state.group(segment, group, status == group_status_inclusive));
    __syncthreads(); // every thread's value stores before the status store, which releases them
    if (threadIdx.x == 0) { arch::store_release(state.status + state.group_index(segment, group), status); }
  }

  /// Warp 0: find the nearest group k < group whose status is INCLUSIVE such that every group in
  /// (k, group) is at least AGGREGATE; leave it in temp_.lookback_start.
  PAGEDATTN_DEVICE void LookBack(const PartitionCombineState& state, const SegmentSlots& segment, int group)
  {
    const int lane = arch::lane_id();
    const unsigned* status = state.status + state.group_index(segment, 0);
    int window_end = group; // this window examines groups window_end-1-lane
    arch::PollBackoff backoff;
    while (true)
    {
      const int q = window_end - 1 - lane;
      const unsigned st = q >= 0 ? arch::load_acquire(status + q) : group_status_aggregate;
      const lane_mask_t inclusive = arch::ballot(st == group_status_inclusive);
      const lane_mask_t invalid = arch::ballot(st == group_status_invalid);
      if (inclusive)
      {
        const int nearest = arch::lowest_lane(inclusive);
        if ((invalid & arch::lanes_below(nearest)) == 0)
        {
          if (lane == 0) { temp_.lookback_start = window_end - 1 - nearest; }
          return;
        }
      }
      else if (invalid == 0)
      {
        window_end -= warp_threads; // the whole window is AGGREGATE: keep it, look further back
        continue;
      }
      backoff.wait();
    }
  }

  template <class WriteOutput>
  PAGEDATTN_DEVICE void Finish(WriteOutput& write, detail::CombineTiming* timing)
  {
    WriteOutput_(write);
    if (timing && threadIdx.x == 0)
    {
      arch::fence_device();
      timing->output_written_ns = arch::global_timer_ns();
    }
  }

  template <class WriteOutput>
  PAGEDATTN_DEVICE void WriteOutput_(WriteOutput& write)
  {
#pragma unroll
    for (int j = 0; j < vectors_per_thread; ++j)
    {
      const int v = vector_index(j);
      if (v < vectors())
      {
        const int h = v / vectors_per_head;
        write(h, v % vectors_per_head, normalized_output(acc_[j], temp_.exp_sum[h]));
      }
    }
  }
};

} // namespace pagedattn
