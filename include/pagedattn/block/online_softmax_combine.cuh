#pragma once
// Level 2: the online-softmax combine (Flash-Attention rescaling) of two attention partials.
//
// A partial over a set of tokens T summarises softmax(s)·V restricted to T without normalising it:
//     max_score  m = max_{t in T} s_t                      (-inf for the empty set)
//     exp_sum    l = sum_{t in T} exp(s_t - m)             (0 for the empty set)
//     weighted_v v = sum_{t in T} exp(s_t - m) * V_t       (0 for the empty set)
// The attention output over T is v / l. Two partials over disjoint sets A and B combine into the
// partial over A ∪ B by rescaling both to the common maximum:
//     m = max(m_a, m_b),  alpha = exp(m_a - m),  beta = exp(m_b - m)
//     l = alpha * l_a + beta * l_b,   v = alpha * v_a + beta * v_b
// Exponents are always <= 0, so nothing overflows, whatever the scores. The empty partial
// (m = -inf, l = 0, v = 0) is the identity: its factor exp(-inf - m) is 0. When *both* maxima are
// -inf the formula would compute exp(-inf - (-inf)) = exp(NaN); softmax_rescale() returns
// alpha = beta = 0 instead, so empty ⊕ empty = empty, never NaN.
// The operation is associative and commutative in exact arithmetic; in fp32 it is so within rounding.
//
// Bitwise reproducibility: every combine goes through rescaled_sum(), which pins the rounding
// (one explicit fused multiply-add of alpha*x_a onto a rounded beta*x_b), so the compiler cannot
// contract it differently at different call sites: the same fold order gives the same bits everywhere.
#include <cmath>

#include <pagedattn/config.cuh>

namespace pagedattn {

/// The two rescale factors of a combine, and the common maximum they rescale to.
struct SoftmaxRescale {
  float max_score;
  float alpha; ///< factor of the first operand
  float beta;  ///< factor of the second operand
};

namespace detail {
PAGEDATTN_HOST_DEVICE float exp_f32(float x)
{
#if defined(__CUDA_ARCH__)
  return expf(x);
#else
  return std::exp(x);
#endif
}
PAGEDATTN_HOST_DEVICE float fma_rn(float a, float b, float c)
{
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
PAGEDATTN_HOST_DEVICE float mul_rn(float a, float b)
{
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
} // namespace detail

/// The maximum a combine of partials with maxima max_a and max_b rescales to (exactly as
/// softmax_rescale takes it, so that a fold's running maximum can be computed ahead of its factors).
PAGEDATTN_HOST_DEVICE float running_max(float max_a, float max_b) { return max_a > max_b ? max_a : max_b; }

/// Rescale factors for combining partials whose maxima are max_a and max_b (either may be -inf).
PAGEDATTN_HOST_DEVICE SoftmaxRescale softmax_rescale(float max_a, float max_b)
{
  const float m = running_max(max_a, max_b);
  if (m == -INFINITY) { return {m, 0.f, 0.f}; } // both empty: avoid exp(-inf - -inf) = NaN
  return {m, detail::exp_f32(max_a - m), detail::exp_f32(max_b - m)};
}

/// alpha * a + beta * b with pinned rounding; used for exp sums and every weighted_v element.
PAGEDATTN_HOST_DEVICE float rescaled_sum(const SoftmaxRescale& r, float a, float b)
{
  return detail::fma_rn(r.alpha, a, detail::mul_rn(r.beta, b));
}

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

} // namespace pagedattn
