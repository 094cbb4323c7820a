// Host tests (CI) of the fold arithmetic every fold shares (thread/thread_online_softmax.cuh): the edge
// cases of softmax_rescale, rescaled_sum and normalized_output (-inf, NaN, empty partials), and that the
// parallel forms of a fold's factors (fold_step_factors, fold_factors) equal the sequential chain bit for
// bit, the property both partition combines' equal bits rest on.
#include <pagedattn/thread/thread_online_softmax.cuh>

#include "support/test_support.cuh"

#include <cstring>

namespace {

using pagedattn::SoftmaxRescale;

constexpr float inf = INFINITY;

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }
bool same_bits(const SoftmaxRescale& a, const SoftmaxRescale& b)
{
  return same_bits(a.max_score, b.max_score) && same_bits(a.alpha, b.alpha) && same_bits(a.beta, b.beta);
}

/// Statistics (max score, exp sum) of a random partial: finite, -inf (empty, exp sum 0) or extreme.
float2 random_stats(std::mt19937_64& rng)
{
  std::uniform_real_distribution<float> m(-30.f, 30.f), l(0.5f, 100.f);
  switch (rng() % 8)
  {
  case 0: return make_float2(-inf, 0.f);
  case 1: return make_float2(1e4f, l(rng));
  case 2: return make_float2(-1e4f, l(rng));
  default: return make_float2(m(rng), l(rng));
  }
}

/// The max score of partial k (fold_step_factors is host-device: so is what it calls).
struct MaxScoreOf {
  const float2* stats;
  PAGEDATTN_HOST_DEVICE float operator()(int k) const { return stats[k].x; }
};

} // namespace

TEST_CASE("fold arithmetic: softmax_rescale of empty, finite and equal maxima", "[thread][host]")
{
  const SoftmaxRescale both_empty = pagedattn::softmax_rescale(-inf, -inf);
  CHECK(both_empty.max_score == -inf);
  CHECK(same_bits(both_empty.alpha, 0.f)); // never exp(-inf - -inf) = NaN
  CHECK(same_bits(both_empty.beta, 0.f));
  const SoftmaxRescale empty_first = pagedattn::softmax_rescale(-inf, 2.5f);
  CHECK(empty_first.max_score == 2.5f);
  CHECK(same_bits(empty_first.alpha, 0.f));
  CHECK(same_bits(empty_first.beta, 1.f));
  const SoftmaxRescale empty_second = pagedattn::softmax_rescale(-7.f, -inf);
  CHECK(empty_second.max_score == -7.f);
  CHECK(same_bits(empty_second.alpha, 1.f));
  CHECK(same_bits(empty_second.beta, 0.f));
  const SoftmaxRescale equal = pagedattn::softmax_rescale(3.f, 3.f);
  CHECK(equal.alpha == 1.f);
  CHECK(equal.beta == 1.f);
  const SoftmaxRescale far = pagedattn::softmax_rescale(1e4f, -1e4f); // exponents <= 0: no overflow
  CHECK(far.alpha == 1.f);
  CHECK(far.beta == 0.f);
}

TEST_CASE("fold arithmetic: rescaled_sum keeps an empty operand out and a NaN in", "[thread][host]")
{
  const SoftmaxRescale r = pagedattn::softmax_rescale(-inf, 1.f);
  CHECK(pagedattn::rescaled_sum(r, 0.f, 5.f) == 5.f);
  const SoftmaxRescale none = pagedattn::softmax_rescale(-inf, -inf);
  CHECK(same_bits(pagedattn::rescaled_sum(none, 0.f, 0.f), 0.f));
  CHECK(std::isnan(pagedattn::rescaled_sum(pagedattn::softmax_rescale(0.f, 1.f), NAN, 2.f))); // a poisoned partial stays poisoned
  // A partition that met invalid input publishes a NaN exp sum with its maximum: the fold stays NaN.
  const SoftmaxRescale after_poison = pagedattn::softmax_rescale(4.f, 2.f);
  CHECK(std::isnan(pagedattn::rescaled_sum(after_poison, 3.f, NAN)));
  const float4 a = make_float4(1.f, -2.f, 3.f, -4.f), b = make_float4(0.5f, 0.25f, -1.f, 8.f);
  const SoftmaxRescale s = pagedattn::softmax_rescale(0.3f, -1.2f);
  const float4 v = pagedattn::rescaled_sum(s, a, b);
  CHECK(same_bits(v.x, pagedattn::rescaled_sum(s, a.x, b.x))); // the vector form is the scalar form four times
  CHECK(same_bits(v.y, pagedattn::rescaled_sum(s, a.y, b.y)));
  CHECK(same_bits(v.z, pagedattn::rescaled_sum(s, a.z, b.z)));
  CHECK(same_bits(v.w, pagedattn::rescaled_sum(s, a.w, b.w)));
}

TEST_CASE("fold arithmetic: normalized_output of an empty, a NaN and a regular partial", "[thread][host]")
{
  const float4 v = make_float4(3.f, -6.f, 1.5f, 0.f);
  const float4 empty = pagedattn::normalized_output(make_float4(0.f, 0.f, 0.f, 0.f), 0.f);
  CHECK((empty.x == 0.f && empty.y == 0.f && empty.z == 0.f && empty.w == 0.f));
  const float4 poisoned = pagedattn::normalized_output(v, NAN);
  CHECK((std::isnan(poisoned.x) && std::isnan(poisoned.y) && std::isnan(poisoned.z) && std::isnan(poisoned.w)));
  const float4 out = pagedattn::normalized_output(v, 3.f);
  CHECK((out.x == 1.f && out.y == -2.f && out.z == 0.5f && out.w == 0.f));
  CHECK(same_bits(out.y, pagedattn::normalized_output(v.y, 3.f)));
  CHECK(pagedattn::normalized_output(2.f, 0.f) == 0.f);
  CHECK(std::isnan(pagedattn::normalized_output(2.f, NAN)));
}

TEST_CASE("fold arithmetic: a fold's factors in parallel equal the sequential chain bit for bit", "[thread][host]")
{
  TEST_RNG(rng, 70);
  constexpr int n = 9; // a fold batch
  for (int trial = 0; trial < 2000; ++trial)
  {
    float2 s[n];
    for (auto& x : s) { x = random_stats(rng); }
    if (trial % 7 == 0) { for (auto& x : s) { x = make_float2(-inf, 0.f); } } // every partial empty
    SoftmaxRescale all[n];
    pagedattn::fold_factors(s, all);
    float running = s[0].x; // the chain: each step rescales against the previous step's maximum
    for (int q = 1; q < n; ++q)
    {
      const SoftmaxRescale chain = pagedattn::softmax_rescale(running, s[q].x);
      running = chain.max_score;
      const SoftmaxRescale step = pagedattn::fold_step_factors(MaxScoreOf{s}, q);
      INFO("trial " << trial << " step " << q);
      CHECK(same_bits(step, chain));
      CHECK(same_bits(all[q], chain));
    }
  }
}

TEST_CASE("fold arithmetic: alibi_logit biases by the distance to the newest token", "[thread][host]")
{
  CHECK(pagedattn::alibi_logit(1.5f, -0.25f, 99, 100) == 1.5f); // the newest token: no bias
  CHECK(pagedattn::alibi_logit(1.5f, -0.25f, 95, 100) == 2.5f); // slope x (95 - 99)
  CHECK(pagedattn::alibi_logit(1.5f, 0.25f, 95, 100) == 0.5f);  // vLLM's positive slopes: older tokens lose
  CHECK(pagedattn::alibi_logit(0.f, 0.5f, 0, 1) == 0.f);
}

TEST_CASE("fold arithmetic: soft_capped_logit bounds the logit, keeps its sign, and is the logit itself with cap 0", "[thread][host]")
{
  using pagedattn::soft_capped_logit;
  REQUIRE(same_bits(soft_capped_logit(3.5f, 0.f), 3.5f)); // off
  REQUIRE(soft_capped_logit(0.f, 30.f) == 0.f);
  REQUIRE(soft_capped_logit(1e6f, 30.f) == 30.f);   // saturates at the cap
  REQUIRE(soft_capped_logit(-1e6f, 30.f) == -30.f);
  REQUIRE(soft_capped_logit(inf, 30.f) == 30.f);
  const float small = soft_capped_logit(0.01f, 30.f); // nearly linear near 0
  REQUIRE(std::fabs(small - 0.01f) < 1e-7f);
  REQUIRE(std::fabs(soft_capped_logit(30.f, 30.f) - 30.f * std::tanh(1.f)) < 1e-5f);
  REQUIRE(std::isnan(soft_capped_logit(std::nanf(""), 30.f)));
}

TEST_CASE("fold arithmetic: fold_sink joins a sink to a partial's denominator; -inf is the identity", "[thread][host]")
{
  using pagedattn::fold_sink;
  // A partial over scores {1, 2}: max 2, exp sum e^-1 + 1.
  const float m = 2.f, l = std::exp(-1.f) + 1.f;
  {
    float max_score = m, exp_sum = l;
    const float alpha = fold_sink(max_score, exp_sum, -inf);
    REQUIRE(same_bits(alpha, 1.f));
    REQUIRE(same_bits(max_score, m));
    REQUIRE(same_bits(exp_sum, l));
  }
  {
    float max_score = m, exp_sum = l; // a sink below the maximum: the max stays, e^(sink - max) is added
    const float alpha = fold_sink(max_score, exp_sum, 0.5f);
    REQUIRE(alpha == 1.f);
    REQUIRE(max_score == m);
    REQUIRE(std::fabs(exp_sum - (l + std::exp(0.5f - 2.f))) < 1e-6f);
  }
  {
    float max_score = m, exp_sum = l; // above it: everything rescales to the sink
    const float alpha = fold_sink(max_score, exp_sum, 5.f);
    REQUIRE(max_score == 5.f);
    REQUIRE(std::fabs(alpha - std::exp(-3.f)) < 1e-7f);
    REQUIRE(std::fabs(exp_sum - (l * std::exp(-3.f) + 1.f)) < 1e-6f);
  }
  {
    float max_score = m, exp_sum = l; // a sink that takes it all: weighted_v * alpha = 0, exp sum 1
    REQUIRE(fold_sink(max_score, exp_sum, 1e4f) == 0.f);
    REQUIRE(exp_sum == 1.f);
  }
  {
    float max_score = -inf, exp_sum = 0.f; // the empty partial gets the sink alone (an output of 0 / 1 = 0)
    fold_sink(max_score, exp_sum, 0.5f);
    REQUIRE(max_score == 0.5f);
    REQUIRE(exp_sum == 1.f);
  }
  {
    float max_score = m, exp_sum = l;
    fold_sink(max_score, exp_sum, std::nanf(""));
    REQUIRE(std::isnan(exp_sum));
  }
}
