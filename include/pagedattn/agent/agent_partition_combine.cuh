#pragma once
// Level 3: one thread block's part in merging the KV partitions of a segment inside one launch: CUB's
// single-pass pattern (arrival counters, group status words, decoupled look-back) arranged as a fixed
// two-level combine tree, so that the result is bitwise reproducible and the tail stays short.
//
// Protocol, for the block that owns partition p of a segment with P > 1 partitions, in group
// g = p / partition_group_size of G = ceil(P / partition_group_size) groups:
//   1. Store the block's aggregate (cache-global stores), __threadfence, __syncthreads; one thread
//      increments the group's arrival counter. Every block but the group's last arrival is done.
//   2. The last arrival (after a __threadfence) folds the group's aggregates in partition order:
//      A_g = a_first ⊕ ... ⊕ a_last. With G == 1 it writes the normalised output and stops.
//   3. Group 0 publishes A_0 as its INCLUSIVE value. A later group publishes A_g as AGGREGATE, then
//      looks back: warp 0 polls the statuses of up to warp_threads preceding groups (acquire loads) and
//      stops at the nearest INCLUSIVE group k once every group between k and g is at least AGGREGATE.
//      It folds forward: I_g = I_k ⊕ A_{k+1} ⊕ ... ⊕ A_g, in increasing group order.
//   4. g < G-1: publish I_g as INCLUSIVE (values, fence, barrier, then the status with a release store).
//      g == G-1: write the normalised output instead.
//
// Bitwise reproducibility: every A_g is a fixed left fold, and every I_g is the left fold A_0 ⊕ ... ⊕ A_g
// however far back the look-back went (by induction on g). The output is therefore the same bits
// whatever the timing, and equals the two-kernel combine (FoldSegment), which folds in the same order.
// Short tail: after the last partition finishes, at most partition_group_size tile folds plus a few
// group folds remain (the look-back rarely finds its nearest INCLUSIVE group more than one back), and a
// fold of up to 16 partials costs a handful of L2 round trips: the statistics of all of them are loaded
// at once, the values fold_batch partials at a time (FoldChunk).
//
// Forward progress: tiles come from an atomic ticket taken when a block starts, numbered so that the
// partitions of a segment are consecutive and increasing. A group's folder only waits on earlier groups,
// all of whose blocks drew smaller tickets and have therefore started; group 0 never waits. Blocks that
// have started run to completion unless they wait, so by induction every wait ends: no deadlock,
// whatever order the hardware starts blocks in.
#include <pagedattn/agent/partition_tile_state.cuh>
#include <pagedattn/block/online_softmax_combine.cuh>
#include <pagedattn/util_arch.cuh>

namespace pagedattn {

/// Back-off of the look-back poll: the first retry is immediate, later ones sleep, doubling from 32 ns up
/// to a 512 ns cap. The cap stays short: the tail after the last partition is what the caller waits for.
struct LookbackBackoff {
  static constexpr unsigned first_sleep_ns = 32;
  static constexpr unsigned max_sleep_ns = 512;
  unsigned sleep_ns = 0;
  PAGEDATTN_DEVICE void wait()
  {
    if (sleep_ns) { arch::sleep_ns(sleep_ns); }
    sleep_ns = sleep_ns ? (sleep_ns * 2 > max_sleep_ns ? max_sleep_ns : sleep_ns * 2) : first_sleep_ns;
  }
};

/// Optional per-segment timestamps (ns): the latest time any partition's aggregate was stored (atomicMax;
/// the caller zeroes it) and the time the output was written. Their difference is the combine's tail.
struct CombineTiming {
  unsigned long long aggregate_ready_ns;
  unsigned long long output_written_ns;
};

template <int HeadDim, int MaxHeads, int BlockThreads>
class AgentPartitionCombine {
  static_assert(HeadDim % 4 == 0, "values move as float4");
  static constexpr int vectors_per_head = HeadDim / 4;
  static constexpr int max_vectors = MaxHeads * vectors_per_head;
  static constexpr int vectors_per_thread = ceil_div(max_vectors, BlockThreads);

public:
  /// Partials folded per chunk: their statistics are staged at once and their values loaded
  /// fold_batch at a time (the first batch with the statistics), so a chunk of 16 costs 2 L2 round
  /// trips, not 16.
  static constexpr int fold_chunk = partition_group_size;
  static constexpr int fold_batch = 8;

  struct TempStorage {
    float max_score[MaxHeads];
    float exp_sum[MaxHeads];
    float2 staged_stats[fold_chunk][MaxHeads];     ///< (max score, exp sum) of the chunk's partials
    SoftmaxRescale rescale[fold_chunk][MaxHeads];  ///< the factors of each fold step of the chunk
    int lookback_start;
    int last_arrival;
  };

  PAGEDATTN_DEVICE AgentPartitionCombine(TempStorage& temp, int heads) : temp_(temp), heads_(heads) {}

  /// Single-pass merge of partition `partition` (of `num_partitions`) of `segment`. own_stats
  /// ([heads][2]: max, sum) and own_values ([heads][HeadDim]) hold the block's aggregate in shared
  /// memory. write(h, vector_index, float4) stores the normalised output. Every thread calls it.
  template <class WriteOutput>
  PAGEDATTN_DEVICE void Run(const PartitionTileState& state, int segment, int partition, int num_partitions,
                            const float* own_stats, const float* own_values, WriteOutput write,
                            CombineTiming* timing = nullptr)
  {
    LoadFrom<false>(own_stats, own_values);
    if (num_partitions == 1)
    {
      WriteOutput_(write);
      return;
    }

    // 1. store the aggregate, arrive at the group
    const int group = partition / partition_group_size;
    const int group_first = group * partition_group_size;
    const int group_size = min(partition_group_size, num_partitions - group_first);
    StoreValue(state.tile(segment, partition));
    arch::fence_device(); // every thread's stores, before the arrival is counted
    __syncthreads();
    if (threadIdx.x == 0)
    {
      if (timing) { arch::atomic_max(&timing->aggregate_ready_ns, arch::global_timer_ns()); }
      const unsigned arrived = arch::atomic_fetch_add(state.arrivals + state.group_index(segment, group), 1u);
      temp_.last_arrival = arrived == static_cast<unsigned>(group_size - 1);
      arch::fence_device(); // the last arrival sees every other block's stores
    }
    __syncthreads();
    if (!temp_.last_arrival) { return; }

    // 2. fold the group
    FoldTiles(state, segment, group_first, group_size);
    const int num_groups = ceil_div(num_partitions, partition_group_size);
    if (num_groups == 1)
    {
      Finish(write, timing);
      return;
    }

    // 3. publish, look back over the groups, fold forward
    if (group == 0)
    {
      Publish(state, segment, 0, tile_status_inclusive);
      return;
    }
    Publish(state, segment, group, tile_status_aggregate);
    if (arch::warp_id() == 0) { LookBack(state, segment, group); }
    __syncthreads();
    const int k = temp_.lookback_start;
    LoadFrom<true>(state.group(segment, k, true));
    FoldSequence([&](int q) { return state.group(segment, q, false); }, k + 1, group - k, /*fresh=*/false);

    // 4. publish the inclusive value, or finish the segment
    if (group < num_groups - 1) { Publish(state, segment, group, tile_status_inclusive); }
    else { Finish(write, timing); }
  }

  /// Two-kernel combine, second kernel: the same combine tree, folded by one block per segment without
  /// waiting (group aggregates go through global memory exactly as in Run). Same bits as Run().
  template <class WriteOutput>
  PAGEDATTN_DEVICE void FoldSegment(const PartitionTileState& state, int segment, int num_partitions, WriteOutput write)
  {
    const int num_groups = ceil_div(num_partitions, partition_group_size);
    for (int g = 0; g < num_groups; ++g)
    {
      const int first = g * partition_group_size;
      FoldTiles(state, segment, first, min(partition_group_size, num_partitions - first));
      if (num_groups > 1) { StoreValue(state.group(segment, g, false)); }
    }
    if (num_groups > 1)
    {
      arch::fence_device();
      __syncthreads();
      LoadFrom<true>(state.group(segment, 0, false));
      FoldSequence([&](int q) { return state.group(segment, q, false); }, 1, num_groups - 1, /*fresh=*/false);
    }
    WriteOutput_(write);
  }

  /// Two-kernel combine, first kernel: store the aggregate, no counter, no look-back.
  PAGEDATTN_DEVICE void StoreAggregate(const PartitionTileState& state, int segment, int partition, const float* own_stats,
                                       const float* own_values)
  {
    LoadFrom<false>(own_stats, own_values);
    StoreValue(state.tile(segment, partition));
  }

private:
  TempStorage& temp_;
  int heads_;
  float4 acc_[vectors_per_thread]; ///< this thread's share of the running weighted_v

  PAGEDATTN_DEVICE int vectors() const { return heads_ * vectors_per_head; }
  PAGEDATTN_DEVICE static int vector_index(int j) { return static_cast<int>(threadIdx.x) + j * BlockThreads; }

  template <bool Global>
  PAGEDATTN_DEVICE static float load_value(const float* p) { if constexpr (Global) { return arch::load_cg(p); } else { return *p; } }
  template <bool Global>
  PAGEDATTN_DEVICE static float4 load_vector(const float* p)
  {
    if constexpr (Global) { return arch::load_cg(reinterpret_cast<const float4*>(p)); }
    else { return *reinterpret_cast<const float4*>(p); }
  }

  template <bool Global>
  PAGEDATTN_DEVICE void LoadFrom(PartialRef src) { LoadFrom<Global>(src.stats, src.values); }

  /// Running value := the partial at (stats, values). Ends with a barrier.
  template <bool Global>
  PAGEDATTN_DEVICE void LoadFrom(const float* stats, const float* values)
  {
    for (int h = threadIdx.x; h < heads_; h += BlockThreads)
    {
      temp_.max_score[h] = load_value<Global>(stats + 2 * h);
      temp_.exp_sum[h] = load_value<Global>(stats + 2 * h + 1);
    }
#pragma unroll
    for (int j = 0; j < vectors_per_thread; ++j)
    {
      const int v = vector_index(j);
      if (v < vectors()) { acc_[j] = load_vector<Global>(values + 4 * v); }
    }
    __syncthreads();
  }

  /// Running value := running ⊕ src(first) ⊕ ... ⊕ src(first + count - 1), a left fold in index order
  /// (fresh: the running value starts as src(first) instead). Partials are read from global memory.
  template <class Src>
  PAGEDATTN_DEVICE void FoldSequence(Src src, int first, int count, bool fresh)
  {
    for (int done = 0; done < count; done += fold_chunk) { FoldChunk(src, first + done, min(fold_chunk, count - done), fresh && done == 0); }
  }

  /// FoldSequence for count <= fold_chunk partials. The order of the arithmetic is that of a plain left
  /// fold, one rescaled_sum per element and step; only the loads are batched: the statistics of every
  /// partial and the values of the first fold_batch go out together, then one batch of values at a time.
  template <class Src>
  PAGEDATTN_DEVICE void FoldChunk(Src src, int first, int count, bool fresh)
  {
    float4 x[fold_batch][vectors_per_thread];
    auto load_batch = [&](int q0) {
#pragma unroll
      for (int b = 0; b < fold_batch; ++b)
      {
        if (q0 + b >= count) { break; }
        const float* values = src(first + q0 + b).values;
#pragma unroll
        for (int j = 0; j < vectors_per_thread; ++j)
        {
          const int v = vector_index(j);
          if (v < vectors()) { x[b][j] = arch::load_cg(reinterpret_cast<const float4*>(values) + v); }
        }
      }
    };
    // 1. every partial's statistics, and the first batch of values
    for (int i = threadIdx.x; i < count * heads_; i += BlockThreads)
    {
      const int q = i / heads_, h = i % heads_;
      const float* stats = src(first + q).stats;
      temp_.staged_stats[q][h] = make_float2(arch::load_cg(stats + 2 * h), arch::load_cg(stats + 2 * h + 1));
    }
    load_batch(0);
    __syncthreads();
    // 2. per head, the chain of rescale factors (step q folds partial q into the running value)
    for (int h = threadIdx.x; h < heads_; h += BlockThreads)
    {
      float m = fresh ? temp_.staged_stats[0][h].x : temp_.max_score[h];
      float l = fresh ? temp_.staged_stats[0][h].y : temp_.exp_sum[h];
      for (int q = fresh ? 1 : 0; q < count; ++q)
      {
        const SoftmaxRescale r = softmax_rescale(m, temp_.staged_stats[q][h].x);
        l = rescaled_sum(r, l, temp_.staged_stats[q][h].y);
        m = r.max_score;
        temp_.rescale[q][h] = r;
      }
      temp_.max_score[h] = m;
      temp_.exp_sum[h] = l;
    }
    __syncthreads();
    // 3. fold the values in order, one batch in registers at a time
    for (int q0 = 0; q0 < count; q0 += fold_batch)
    {
      if (q0 > 0) { load_batch(q0); }
#pragma unroll
      for (int b = 0; b < fold_batch; ++b)
      {
        const int q = q0 + b;
        if (q >= count) { break; }
#pragma unroll
        for (int j = 0; j < vectors_per_thread; ++j)
        {
          const int v = vector_index(j);
          if (v >= vectors()) { continue; }
          if (fresh && q == 0)
          {
            acc_[j] = x[b][j];
            continue;
          }
          const SoftmaxRescale r = temp_.rescale[q][v / vectors_per_head];
          acc_[j] = make_float4(rescaled_sum(r, acc_[j].x, x[b][j].x), rescaled_sum(r, acc_[j].y, x[b][j].y),
                                rescaled_sum(r, acc_[j].z, x[b][j].z), rescaled_sum(r, acc_[j].w, x[b][j].w));
        }
      }
    }
  }

  /// Running value := a_first ⊕ ... ⊕ a_{first+count-1} (tile aggregates, in partition order).
  PAGEDATTN_DEVICE void FoldTiles(const PartitionTileState& state, int segment, int first, int count)
  {
    FoldSequence([&](int q) { return state.tile(segment, q); }, first, count, /*fresh=*/true);
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
  PAGEDATTN_DEVICE void Publish(const PartitionTileState& state, int segment, int group, TileStatus status)
  {
    StoreValue(state.group(segment, group, status == tile_status_inclusive));
    arch::fence_device(); // each thread's value stores before the barrier ...
    __syncthreads();      // ... and all of them before the status store
    if (threadIdx.x == 0) { arch::store_release(state.status + state.group_index(segment, group), status); }
  }

  /// Warp 0: find the nearest group k < group whose status is INCLUSIVE such that every group in
  /// (k, group) is at least AGGREGATE; leave it in temp_.lookback_start.
  PAGEDATTN_DEVICE void LookBack(const PartitionTileState& state, int segment, int group)
  {
    const int lane = arch::lane_id();
    const unsigned* status = state.status + state.group_index(segment, 0);
    int window_end = group; // this window examines groups window_end-1-lane
    LookbackBackoff backoff;
    while (true)
    {
      const int q = window_end - 1 - lane;
      const unsigned st = q >= 0 ? arch::load_acquire(status + q) : tile_status_aggregate;
      const lane_mask_t inclusive = arch::ballot(st == tile_status_inclusive);
      const lane_mask_t invalid = arch::ballot(st == tile_status_invalid);
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
  PAGEDATTN_DEVICE void Finish(WriteOutput& write, CombineTiming* timing)
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
        const float l = temp_.exp_sum[h];
        const float4 a = acc_[j];
        // The empty softmax (no valid token) is defined as a zero output; a NaN exp_sum (a partition that
        // found invalid input) stays NaN.
        const float4 o = l == 0.f ? make_float4(0.f, 0.f, 0.f, 0.f)
                                  : make_float4(__fdiv_rn(a.x, l), __fdiv_rn(a.y, l), __fdiv_rn(a.z, l), __fdiv_rn(a.w, l));
        write(h, v % vectors_per_head, o);
      }
    }
  }
};

} // namespace pagedattn
