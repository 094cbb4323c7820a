#pragma once
// Level 2: block-wide reduction of attention partials, in the manner of CUB's
// block_reduce_warp_reductions: each warp contributes its WarpAttentionPartial, the partials go through
// shared memory, and every thread folds the warps' partials in warp order (a fixed left fold, so the
// result is bitwise reproducible) for the dimensions it owns.
//
//   __shared__ typename BlockReducePartials<256, 128>::TempStorage temp;
//   auto agg = BlockReducePartials<256, 128>(temp).Reduce(my_warp_partial);
//   // agg.max_score / agg.exp_sum in every thread; weighted_v(d) readable until temp is reused.
#include <pagedattn/thread/thread_online_softmax.cuh>
#include <pagedattn/warp/warp_attention_partial.cuh>

namespace pagedattn {

template <int HeadDim, int BlockThreads>
class BlockReducePartials {
  static_assert(BlockThreads % warp_threads == 0, "BlockThreads must be a multiple of the warp width");
  static constexpr int warps = BlockThreads / warp_threads;

  struct Storage {
    float max_score[warps];
    float exp_sum[warps];
    float weighted_v[warps][HeadDim]; ///< after Reduce(), row 0 holds the block aggregate
  };

public:
  /// Shared memory the caller places (CUB's TempStorage idiom).
  struct TempStorage : Storage {};

  struct Stats {
    float max_score;
    float exp_sum;
  };

  PAGEDATTN_DEVICE explicit BlockReducePartials(TempStorage& temp) : temp_(temp) {}

  /// Every thread of the block calls it with its warp's partial. Returns the aggregate statistics in
  /// every thread; the aggregate weighted_v stays readable through weighted_v(d) until temp is reused.
  /// Contains two __syncthreads(); the caller must sync before reusing temp for something else.
  PAGEDATTN_DEVICE Stats Reduce(const WarpAttentionPartial<HeadDim>& partial)
  {
    const int warp = arch::warp_id();
    const int lane = arch::lane_id();
    if (lane == 0) { StoreWarpStats(warp, partial.max_score, partial.exp_sum); }
#pragma unroll
    for (int i = 0; i < WarpAttentionPartial<HeadDim>::items_per_lane; ++i)
    {
      const int d = WarpAttentionPartial<HeadDim>::dim(lane, i);
      if (d < HeadDim) { StoreWarpValue(warp, d, partial.weighted_v[i]); }
    }
    return ReduceStored();
  }

  /// For warps whose partial is spread over the lanes differently (e.g. in tensor-core fragments): each
  /// warp stores its statistics once and every weighted_v[d] once, then every thread calls ReduceStored().
  PAGEDATTN_DEVICE void StoreWarpStats(int warp, float max_score, float exp_sum)
  {
    temp_.max_score[warp] = max_score;
    temp_.exp_sum[warp] = exp_sum;
  }
  PAGEDATTN_DEVICE void StoreWarpValue(int warp, int d, float value) { temp_.weighted_v[warp][d] = value; }

  /// Fold the stored warp partials in warp order (a fixed left fold). Two __syncthreads().
  PAGEDATTN_DEVICE Stats ReduceStored()
  {
    __syncthreads();
    Stats stats{temp_.max_score[0], temp_.exp_sum[0]};
    for (int w = 1; w < warps; ++w)
    {
      const SoftmaxRescale r = softmax_rescale(stats.max_score, temp_.max_score[w]);
      stats = {r.max_score, rescaled_sum(r, stats.exp_sum, temp_.exp_sum[w])};
    }
    for (int d = static_cast<int>(threadIdx.x); d < HeadDim; d += BlockThreads)
    {
      float m = temp_.max_score[0];
      float v = temp_.weighted_v[0][d];
      for (int w = 1; w < warps; ++w)
      {
        const SoftmaxRescale r = softmax_rescale(m, temp_.max_score[w]);
        m = r.max_score;
        v = rescaled_sum(r, v, temp_.weighted_v[w][d]);
      }
      temp_.weighted_v[0][d] = v; // only this thread touches column d
    }
    __syncthreads();
    return stats;
  }

  /// Aggregate weighted_v[d] (valid after Reduce()).
  PAGEDATTN_DEVICE float weighted_v(int d) const { return temp_.weighted_v[0][d]; }

private:
  TempStorage& temp_;
};

} // namespace pagedattn
