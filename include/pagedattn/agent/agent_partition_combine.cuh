#pragma once
// Level 3: one thread block's part in merging the KV partitions of a segment inside one launch, with
// CUB's single-pass pattern (decoupled look-back over tile status words).
//
// Protocol, for the block that owns partition p of a segment with P > 1 partitions (tile = first + p):
//   1. p == 0: publish its aggregate as the INCLUSIVE value (it is the prefix of length 1).
//      p  > 0: publish the AGGREGATE: values with cache-global stores, __syncthreads, then one thread
//              stores status = AGGREGATE with release ordering (fence, then the store).
//   2. p  > 0: look back. Warp 0 polls the statuses of the warp_threads preceding tiles at once
//      (acquire loads). It stops at the nearest INCLUSIVE predecessor k once every tile between k and p
//      is at least AGGREGATE; a window with no INCLUSIVE tile moves one window further back. Partition
//      0 always ends INCLUSIVE, so the look-back ends.
//   3. Fold forward: start from inclusive[k], then fold aggregate[k+1], ..., aggregate[p-1] and the
//      block's own aggregate, in increasing partition order, with OnlineSoftmaxCombine's arithmetic.
//   4. p < P-1: publish the result as INCLUSIVE. p == P-1: write the normalised output instead.
//
// Bitwise reproducibility: every inclusive value is the left fold a_0 ⊕ a_1 ⊕ ... ⊕ a_p, however far back
// the look-back went (by induction on p: inclusive[k] is the left fold up to k, and step 3 extends it one
// partition at a time). The output therefore has the same bits whatever the timing, and equals the
// two-kernel combine (FoldSegment), which folds a_0 ... a_{P-1} in the same order.
//
// Forward progress: tiles come from an atomic ticket taken when a block starts, numbered so that the
// partitions of a segment are consecutive and increasing. A block only waits on tiles with smaller
// tickets, i.e. on blocks that have already started and are resident; partition 0 never waits. So some
// waited-on block can always run to completion: no deadlock, whatever order the hardware starts blocks in.
#include <pagedattn/agent/partition_tile_state.cuh>
#include <pagedattn/block/online_softmax_combine.cuh>
#include <pagedattn/util_arch.cuh>

namespace pagedattn {

/// Back-off of the look-back poll: the first polls spin, later ones sleep, doubling up to a cap. The cap
/// stays short (the tail after the last partition's publish is what the caller waits for).
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

/// Optional per-segment timestamps (ns) written by the last partition: when its aggregate was ready and
/// when the output was written. Their difference is the combine's tail.
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
  struct TempStorage {
    float max_score[MaxHeads];
    float exp_sum[MaxHeads];
    SoftmaxRescale rescale[2][MaxHeads]; ///< double-buffered: one __syncthreads per fold step
    int lookback_start;
  };

  PAGEDATTN_DEVICE AgentPartitionCombine(TempStorage& temp, int heads) : temp_(temp), heads_(heads) {}

  /// Single-pass merge of partition `partition` (of `num_partitions`) of the segment whose tiles start at
  /// `first_tile`. own_stats ([heads][2]: max, sum) and own_values ([heads][HeadDim]) hold the block's
  /// aggregate in shared memory. write(h, vector_index, float4) stores the normalised output of the
  /// last partition. Every thread of the block calls it.
  template <class WriteOutput>
  PAGEDATTN_DEVICE void Run(const PartitionTileState& state, std::size_t first_tile, int partition, int num_partitions,
                            const float* own_stats, const float* own_values, WriteOutput write,
                            CombineTiming* timing = nullptr)
  {
    const std::size_t tile = first_tile + static_cast<std::size_t>(partition);
    if (num_partitions == 1)
    {
      LoadFrom<false>(own_stats, own_values);
      WriteOutput_(write);
      return;
    }
    if (partition == 0)
    {
      LoadFrom<false>(own_stats, own_values);
      Publish(state, tile, tile_status_inclusive);
      return;
    }
    const bool is_last = partition == num_partitions - 1;
    unsigned long long t_ready = 0;
    if (is_last && timing && threadIdx.x == 0) { t_ready = arch::global_timer_ns(); }

    // 1. publish the aggregate (read back from shared memory; the fold below starts elsewhere)
    LoadFrom<false>(own_stats, own_values);
    Publish(state, tile, tile_status_aggregate);

    // 2. look back
    if (arch::warp_id() == 0) { LookBack(state, first_tile, partition); }
    __syncthreads();
    const int k = temp_.lookback_start;

    // 3. fold forward from inclusive[k]
    LoadFrom<true>(state.stats(true, first_tile + k), state.values(true, first_tile + k));
    int parity = 0;
    for (int q = k + 1; q < partition; ++q, parity ^= 1)
    {
      FoldStep<true>(state.stats(false, first_tile + q), state.values(false, first_tile + q), parity);
    }
    FoldStep<false>(own_stats, own_values, parity);

    // 4. publish the inclusive value, or finish the segment
    if (!is_last) { Publish(state, tile, tile_status_inclusive); return; }
    WriteOutput_(write);
    if (timing && threadIdx.x == 0)
    {
      __threadfence();
      timing->aggregate_ready_ns = t_ready;
      timing->output_written_ns = arch::global_timer_ns();
    }
  }

  /// Two-kernel combine, second kernel: fold the aggregates of partitions 0..num_partitions-1 of one
  /// segment in order and write the normalised output. Same arithmetic, same order: same bits as Run().
  template <class WriteOutput>
  PAGEDATTN_DEVICE void FoldSegment(const PartitionTileState& state, std::size_t first_tile, int num_partitions, WriteOutput write)
  {
    LoadFrom<true>(state.stats(false, first_tile), state.values(false, first_tile));
    int parity = 0;
    for (int q = 1; q < num_partitions; ++q, parity ^= 1)
    {
      FoldStep<true>(state.stats(false, first_tile + q), state.values(false, first_tile + q), parity);
    }
    WriteOutput_(write);
  }

  /// Two-kernel combine, first kernel: store the aggregate, no status, no look-back.
  PAGEDATTN_DEVICE void StoreAggregate(const PartitionTileState& state, std::size_t tile, const float* own_stats, const float* own_values)
  {
    LoadFrom<false>(own_stats, own_values);
    StoreValue(state, tile, false);
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

  /// Running value := running ⊕ (stats, values). One barrier; rescale factors are double-buffered so
  /// that the next step's factors never overwrite ones a slower thread still reads.
  template <bool Global>
  PAGEDATTN_DEVICE void FoldStep(const float* stats, const float* values, int parity)
  {
    for (int h = threadIdx.x; h < heads_; h += BlockThreads)
    {
      const float m = load_value<Global>(stats + 2 * h), l = load_value<Global>(stats + 2 * h + 1);
      const SoftmaxRescale r = softmax_rescale(temp_.max_score[h], m);
      temp_.exp_sum[h] = rescaled_sum(r, temp_.exp_sum[h], l);
      temp_.max_score[h] = r.max_score;
      temp_.rescale[parity][h] = r;
    }
    float4 x[vectors_per_thread];
#pragma unroll
    for (int j = 0; j < vectors_per_thread; ++j) // issue the loads before the barrier: they overlap it
    {
      const int v = vector_index(j);
      if (v < vectors()) { x[j] = load_vector<Global>(values + 4 * v); }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < vectors_per_thread; ++j)
    {
      const int v = vector_index(j);
      if (v < vectors())
      {
        const SoftmaxRescale r = temp_.rescale[parity][v / vectors_per_head];
        acc_[j] = make_float4(rescaled_sum(r, acc_[j].x, x[j].x), rescaled_sum(r, acc_[j].y, x[j].y),
                              rescaled_sum(r, acc_[j].z, x[j].z), rescaled_sum(r, acc_[j].w, x[j].w));
      }
    }
  }

  PAGEDATTN_DEVICE void StoreValue(const PartitionTileState& state, std::size_t tile, bool inclusive)
  {
    float* stats = state.stats(inclusive, tile);
    float* values = state.values(inclusive, tile);
    for (int h = threadIdx.x; h < heads_; h += BlockThreads)
    {
      arch::store_cg(stats + 2 * h, temp_.max_score[h]);
      arch::store_cg(stats + 2 * h + 1, temp_.exp_sum[h]);
    }
#pragma unroll
    for (int j = 0; j < vectors_per_thread; ++j)
    {
      const int v = vector_index(j);
      if (v < vectors()) { arch::store_cg(reinterpret_cast<float4*>(values) + v, acc_[j]); }
    }
  }

  /// Store the running value, then (after every thread's stores) flip the status with release order.
  PAGEDATTN_DEVICE void Publish(const PartitionTileState& state, std::size_t tile, TileStatus status)
  {
    StoreValue(state, tile, status == tile_status_inclusive);
    arch::fence_device(); // each thread's value stores before the barrier ...
    __syncthreads();      // ... and all of them before the status store
    if (threadIdx.x == 0) { arch::store_release(state.status + tile, status); }
  }

  /// Warp 0: find the nearest predecessor k < partition whose status is INCLUSIVE such that every tile
  /// in (k, partition) is at least AGGREGATE; leave it in temp_.lookback_start.
  PAGEDATTN_DEVICE void LookBack(const PartitionTileState& state, std::size_t first_tile, int partition)
  {
    const int lane = arch::lane_id();
    int window_end = partition; // this window examines partitions window_end-1-lane
    LookbackBackoff backoff;
    while (true)
    {
      const int q = window_end - 1 - lane;
      const unsigned status = q >= 0 ? arch::load_acquire(state.status + first_tile + q) : tile_status_aggregate;
      const lane_mask_t inclusive = arch::ballot(status == tile_status_inclusive);
      const lane_mask_t invalid = arch::ballot(status == tile_status_invalid);
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
