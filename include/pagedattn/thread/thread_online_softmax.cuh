#pragma once
// Thread level: the arithmetic of the online softmax, the one definition every fold uses (the warp and
// block partials, the tensor-core tile, both partition combines). That they all call these functions, in
// the same order per element, is what makes the two combines give the same bits.
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
PAGEDATTN_HOST_DEVICE float div_rn(float a, float b)
{
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
} // namespace detail

/// The maximum a combine of partials with maxima max_a and max_b rescales to (exactly as
/// softmax_rescale takes it, so that a fold's running maximum can be computed ahead of its factors).
PAGEDATTN_HOST_DEVICE float running_max(float max_a, float max_b) { return max_a > max_b ? max_a : max_b; }

/// Rescale factors for combining partials whose maxima are max_a and max_b (either may be -inf).
/// Branch-free: both exponentials are computed and the both-empty case (-inf, 0, 0) is selected, so a fold
/// whose steps' maxima are known ahead runs its steps' exponentials side by side
/// (bench/NOTES.md, "The one-wave combine: grid barrier and slice fold").
PAGEDATTN_HOST_DEVICE SoftmaxRescale softmax_rescale(float max_a, float max_b)
{
  const float m = running_max(max_a, max_b);
  const bool both_empty = m == -INFINITY; // exp(-inf - -inf) would be NaN
  const float alpha = detail::exp_f32(max_a - m), beta = detail::exp_f32(max_b - m);
  return {m, both_empty ? 0.f : alpha, both_empty ? 0.f : beta};
}

/// alpha * a + beta * b with pinned rounding; used for exp sums and every weighted_v element.
PAGEDATTN_HOST_DEVICE float rescaled_sum(const SoftmaxRescale& r, float a, float b)
{
  return detail::fma_rn(r.alpha, a, detail::mul_rn(r.beta, b));
}
/// rescaled_sum of four weighted_v elements (the combines move values as float4).
PAGEDATTN_HOST_DEVICE float4 rescaled_sum(const SoftmaxRescale& r, float4 a, float4 b)
{
  return make_float4(rescaled_sum(r, a.x, b.x), rescaled_sum(r, a.y, b.y), rescaled_sum(r, a.z, b.z), rescaled_sum(r, a.w, b.w));
}

/// The factors of step q >= 1 of the left fold p_0 ⊕ p_1 ⊕ ... of partials whose maxima are
/// max_of(0), max_of(1), ...: the running maximum of the first q (comparisons only), rescaled against
/// max_of(q). The same factors as the sequential chain r_q = softmax_rescale(r_{q-1}.max_score, max_of(q)),
/// but no step waits for another's exponentials, so a block computes the steps of a fold in parallel.
template <class MaxOf>
PAGEDATTN_HOST_DEVICE SoftmaxRescale fold_step_factors(MaxOf max_of, int q)
{
  float m = max_of(0);
  for (int p = 1; p < q; ++p) { m = running_max(m, max_of(p)); }
  return softmax_rescale(m, max_of(q));
}

/// Every step's factors of the left fold of N partials' statistics s[q] = (max score, exp sum), in one
/// thread: the running maxima first (a chain of selects), then the steps' exponentials, independent of
/// each other. r[q] for q >= 1 (r[0] is not written); equal to fold_step_factors(…, q) for each q.
template <int N>
PAGEDATTN_HOST_DEVICE void fold_factors(const float2 (&s)[N], SoftmaxRescale (&r)[N])
{
  float m[N];
  m[0] = s[0].x;
#pragma unroll
  for (int q = 1; q < N; ++q) { m[q] = running_max(m[q - 1], s[q].x); }
#pragma unroll
  for (int q = 1; q < N; ++q) { r[q] = softmax_rescale(m[q - 1], s[q].x); }
}

/// The attention output of a folded partial: weighted_v / exp_sum, rounded once per element. The empty
/// softmax (no valid token, exp_sum 0) is defined as a zero output; a NaN exp_sum (a partition that met
/// invalid input) stays NaN.
PAGEDATTN_HOST_DEVICE float normalized_output(float weighted_v, float exp_sum)
{
  return exp_sum == 0.f ? 0.f : detail::div_rn(weighted_v, exp_sum);
}
/// normalized_output of four elements (the combines write float4).
PAGEDATTN_HOST_DEVICE float4 normalized_output(float4 weighted_v, float exp_sum)
{
  if (exp_sum == 0.f) { return make_float4(0.f, 0.f, 0.f, 0.f); }
  return make_float4(detail::div_rn(weighted_v.x, exp_sum), detail::div_rn(weighted_v.y, exp_sum), detail::div_rn(weighted_v.z, exp_sum),
                     detail::div_rn(weighted_v.w, exp_sum));
}

/// A soft-capped logit (Gemma 2): cap · tanh(score / cap), which bounds it to (−cap, cap); cap 0: the
/// score itself (no cap). Applied to the scaled score, before ALiBi and the mask.
PAGEDATTN_HOST_DEVICE float soft_capped_logit(float score, float cap)
{
#if defined(__CUDA_ARCH__)
  return cap > 0.f ? cap * tanhf(score / cap) : score;
#else
  return cap > 0.f ? cap * std::tanh(score / cap) : score;
#endif
}

/// Fold an attention sink (gpt-oss: a logit that joins the softmax's denominator and adds no value) into
/// a partial (max_score, exp_sum, and weighted_v scaled by the returned factor): the sink is the partial
/// of one token of logit `sink` and value 0, so max_score' = max(max_score, sink), exp_sum' =
/// alpha · exp_sum + beta, weighted_v' = alpha · weighted_v (rescaled_sum with a zero value). A sink of
/// -inf is the identity (alpha 1, beta 0: the same bits); a NaN sink makes the partial NaN. Returns alpha.
PAGEDATTN_HOST_DEVICE float fold_sink(float& max_score, float& exp_sum, float sink)
{
  const SoftmaxRescale r = softmax_rescale(max_score, sink);
  max_score = r.max_score;
  exp_sum = rescaled_sum(r, exp_sum, 1.f);
  return r.alpha;
}

/// An ALiBi-biased logit: score + slope · (token − (seq_len − 1)), the bias 0 at the newest token.
PAGEDATTN_HOST_DEVICE float alibi_logit(float score, float slope, int token, int seq_len)
{
  return fmaf(slope, static_cast<float>(token - seq_len + 1), score);
}

} // namespace pagedattn
