#pragma once
// Thread level: the compound value of decode attention, (max_score, exp_sum, weighted_v[HeadDim]) in
// fp32, and its combine functor. The library's folds keep partials spread over lanes and registers; this
// whole-partial form is the reference they are tested against (host and device), and the functor a
// caller uses to fold partials of its own. See thread_online_softmax.cuh for the fields and the math.
#include <pagedattn/thread/thread_online_softmax.cuh>

namespace pagedattn {

/// Binary operator over partial types that expose max_score, exp_sum and weighted_v[head_dim]
/// (AttentionPartial<HeadDim>). Usable on host and device, as CUB's reduction functors are.
struct OnlineSoftmaxCombine {
  template <class PartialT>
  PAGEDATTN_HOST_DEVICE PartialT operator()(const PartialT& a, const PartialT& b) const
  {
    const SoftmaxRescale r = softmax_rescale(a.max_score, b.max_score);
    PartialT out;
    out.max_score = r.max_score;
    out.exp_sum = rescaled_sum(r, a.exp_sum, b.exp_sum);
#pragma unroll 4
    for (int d = 0; d < PartialT::head_dim; ++d) { out.weighted_v[d] = rescaled_sum(r, a.weighted_v[d], b.weighted_v[d]); }
    return out;
  }
};


template <int HeadDim>
struct AttentionPartial {
  static constexpr int head_dim = HeadDim;

  float max_score;
  float exp_sum;
  float weighted_v[HeadDim];

  /// The empty partial: identity of OnlineSoftmaxCombine.
  PAGEDATTN_HOST_DEVICE static AttentionPartial identity()
  {
    AttentionPartial p;
    p.max_score = -INFINITY;
    p.exp_sum = 0.f;
    for (int d = 0; d < HeadDim; ++d) { p.weighted_v[d] = 0.f; }
    return p;
  }

  PAGEDATTN_HOST_DEVICE bool empty() const { return exp_sum == 0.f; }

  /// Add a tile of n tokens: scores[t] (-inf for masked tokens) and values[t * HeadDim + d].
  /// The tile is summarised relative to its own maximum (p_t = exp(s_t - m_tile)), then combined
  /// with alpha/beta rescaling: the seed's corrected online-softmax step.
  PAGEDATTN_HOST_DEVICE void add_tokens(const float* scores, const float* values, int n)
  {
    AttentionPartial tile = identity();
    for (int t = 0; t < n; ++t) { tile.max_score = scores[t] > tile.max_score ? scores[t] : tile.max_score; }
    if (tile.max_score == -INFINITY) { return; } // empty or fully masked tile: identity
    for (int t = 0; t < n; ++t)
    {
      const float p = detail::exp_f32(scores[t] - tile.max_score);
      tile.exp_sum += p;
      for (int d = 0; d < HeadDim; ++d) { tile.weighted_v[d] = detail::fma_rn(p, values[t * HeadDim + d], tile.weighted_v[d]); }
    }
    *this = OnlineSoftmaxCombine{}(*this, tile);
  }

  /// Normalised attention output for dimension d, by the combines' rule (normalized_output): weighted_v[d]
  /// / exp_sum, 0 for the empty partial, NaN for a NaN exp_sum.
  PAGEDATTN_HOST_DEVICE float output(int d) const { return normalized_output(weighted_v[d], exp_sum); }
};

} // namespace pagedattn
