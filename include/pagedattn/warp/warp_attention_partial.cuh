#pragma once
// Level 1½: one warp's running attention partial, with weighted_v spread over the warp's lanes.
//
// Lane l holds dimensions d = l + i * warp_threads for i < items_per_lane (d < HeadDim); max_score and
// exp_sum are the same in every lane. A warp that owns a stream of tokens keeps one of these per query
// head and folds in tiles of tokens with begin_tile() + accumulate(); BlockReducePartials merges the
// warps' partials at the end.
#include <pagedattn/thread/thread_online_softmax.cuh>
#include <pagedattn/util_arch.cuh>

namespace pagedattn {

template <int HeadDim>
struct WarpAttentionPartial {
  static constexpr int head_dim = HeadDim;
  static constexpr int items_per_lane = ceil_div(HeadDim, warp_threads);

  float max_score;
  float exp_sum;
  float weighted_v[items_per_lane];

  /// Dimension held in slot i by lane `lane` (may be >= HeadDim for the last slot: then unused).
  static PAGEDATTN_HOST_DEVICE int dim(int lane, int i) { return lane + i * warp_threads; }

  PAGEDATTN_DEVICE void reset()
  {
    max_score = -INFINITY;
    exp_sum = 0.f;
#pragma unroll
    for (int i = 0; i < items_per_lane; ++i) { weighted_v[i] = 0.f; }
  }

  /// Start folding in a tile whose scores have maximum tile_max and sum of exp(s - tile_max) equal
  /// to tile_exp_sum. Rescales the running state by alpha and returns beta: the caller then adds
  /// (beta * exp(s_t - tile_max)) * V_t for each token through accumulate(). This is
  /// OnlineSoftmaxCombine with the tile's weighted_v folded in afterwards, so no second
  /// accumulator is needed.
  PAGEDATTN_DEVICE float begin_tile(float tile_max, float tile_exp_sum)
  {
    const SoftmaxRescale r = softmax_rescale(max_score, tile_max);
    max_score = r.max_score;
    exp_sum = rescaled_sum(r, exp_sum, tile_exp_sum);
#pragma unroll
    for (int i = 0; i < items_per_lane; ++i) { weighted_v[i] = detail::mul_rn(r.alpha, weighted_v[i]); }
    return r.beta;
  }

  PAGEDATTN_DEVICE void accumulate(int i, float weight, float value) { weighted_v[i] = fmaf(weight, value, weighted_v[i]); }
};

} // namespace pagedattn
