// Host tests of the thread-level AttentionPartial and OnlineSoftmaxCombine: identity, commutativity, associativity,
// extreme scores and the fold of chunks against an fp64 softmax·V.
#include <pagedattn/thread/thread_attention_partial.cuh>

#include "support/reference_attention.h"
#include "support/test_support.cuh"

#include <cstring>

using pagedattn::AttentionPartial;
using pagedattn::OnlineSoftmaxCombine;

namespace {

constexpr int D = 64;
using Partial = AttentionPartial<D>;

Partial random_partial(std::mt19937_64& rng, float max_lo = -5.f, float max_hi = 5.f)
{
  Partial p;
  std::uniform_real_distribution<float> m(max_lo, max_hi), l(1.f, 50.f), v(-10.f, 10.f);
  p.max_score = m(rng);
  p.exp_sum = l(rng);
  for (auto& x : p.weighted_v) { x = v(rng); }
  return p;
}

bool bitwise_equal(const Partial& a, const Partial& b) { return std::memcmp(&a, &b, sizeof(Partial)) == 0; }

bool all_finite(const Partial& p)
{
  if (std::isnan(p.max_score) || !std::isfinite(p.exp_sum)) { return false; }
  for (float x : p.weighted_v) { if (!std::isfinite(x)) { return false; } }
  return true;
}

/// Relative L2 difference of the two partials' normalised outputs (elementwise ratios are meaningless
/// where alpha * v_a + beta * v_b cancels).
double output_difference(const Partial& a, const Partial& b)
{
  double num = 0, den = 0;
  for (int d = 0; d < D; ++d)
  {
    const double x = a.output(d), y = b.output(d);
    num += (x - y) * (x - y);
    den += x * x;
  }
  return std::sqrt(num / den);
}

/// Two orders of combining the same partials: the same maximum, the exp sums within `sum_tolerance`
/// (relative) and the outputs within fp32 rounding.
void check_equal_within_rounding(const Partial& x, const Partial& y, double sum_tolerance)
{
  CHECK(x.max_score == y.max_score);
  CHECK(std::abs(x.exp_sum - y.exp_sum) <= sum_tolerance * x.exp_sum);
  CHECK(output_difference(x, y) < 1e-6);
}

} // namespace

TEST_CASE("combine: the empty partial is a two-sided identity, bit for bit", "[combine][host]")
{
  TEST_RNG(rng, 0);
  const Partial id = Partial::identity();
  for (int trial = 0; trial < 100; ++trial)
  {
    const Partial a = random_partial(rng, -1e4f, 1e4f);
    CHECK(bitwise_equal(OnlineSoftmaxCombine{}(a, id), a));
    CHECK(bitwise_equal(OnlineSoftmaxCombine{}(id, a), a));
  }
  const Partial both = OnlineSoftmaxCombine{}(id, id);
  CHECK(both.max_score == -INFINITY);
  CHECK(both.exp_sum == 0.f);
  for (float x : both.weighted_v) { CHECK(x == 0.f); } // no NaN from -inf - (-inf)
}

TEST_CASE("combine: commutative within fp32 rounding", "[combine][host]")
{
  TEST_RNG(rng, 0);
  for (int trial = 0; trial < 1000; ++trial)
  {
    const Partial a = random_partial(rng), b = random_partial(rng);
    check_equal_within_rounding(OnlineSoftmaxCombine{}(a, b), OnlineSoftmaxCombine{}(b, a), 4e-7);
  }
}

TEST_CASE("combine: associative within fp32 rounding over random triples", "[combine][host]")
{
  TEST_RNG(rng, 0);
  for (int trial = 0; trial < 1000; ++trial)
  {
    const Partial a = random_partial(rng), b = random_partial(rng), c = random_partial(rng);
    const OnlineSoftmaxCombine op;
    check_equal_within_rounding(op(op(a, b), c), op(a, op(b, c)), 1e-6);
  }
}

TEST_CASE("add_tokens: extreme scores neither overflow nor produce NaN", "[combine][host]")
{
  TEST_RNG(rng, 0);
  const int n = 37;
  const auto values = test::random_floats(rng, static_cast<std::size_t>(n) * D);
  std::vector<double> values64(values.begin(), values.end());

  auto check_against_reference = [&](const std::vector<float>& scores, int chunk)
  {
    Partial p = Partial::identity();
    for (int t0 = 0; t0 < n; t0 += chunk)
    {
      p.add_tokens(scores.data() + t0, values.data() + static_cast<std::size_t>(t0) * D, std::min(chunk, n - t0));
    }
    REQUIRE(all_finite(p));
    const auto ref = test::reference_softmax_v(std::vector<double>(scores.begin(), scores.end()), values64, D);
    std::vector<float> out(D);
    for (int d = 0; d < D; ++d) { out[d] = p.output(d); }
    CHECK(test::relative_l2_error(out, ref) < 1e-5);
  };

  for (float big : {1e4f, -1e4f})
  {
    INFO("scores around " << big);
    auto scores = test::random_floats(rng, n, big - 20.f, big + 20.f);
    for (int chunk : {1, 5, 16, n}) { check_against_reference(scores, chunk); }
  }
  SECTION("one huge outlier dominates")
  {
    auto scores = test::random_floats(rng, n, -3.f, 3.f);
    scores[23] = 1e4f;
    for (int chunk : {1, 7, n}) { check_against_reference(scores, chunk); }
  }
  SECTION("every score masked gives the empty partial")
  {
    std::vector<float> scores(n, -INFINITY);
    Partial p = Partial::identity();
    p.add_tokens(scores.data(), values.data(), n);
    CHECK(p.max_score == -INFINITY);
    CHECK(p.exp_sum == 0.f);
    for (int d = 0; d < D; ++d) { CHECK(p.output(d) == 0.f); }
  }
  SECTION("masked tokens mixed in are ignored")
  {
    auto scores = test::random_floats(rng, n, -3.f, 3.f);
    for (int t = 0; t < n; t += 3) { scores[t] = -INFINITY; }
    for (int chunk : {1, 3, 8, n}) { check_against_reference(scores, chunk); }
  }
}

TEST_CASE("a fold of random chunks equals a direct fp64 softmax·V", "[combine][host]")
{
  TEST_RNG(rng, 0);
  constexpr int HD = 256;
  using P = AttentionPartial<HD>;
  for (int n : {1, 17, 512, 1000})
  {
    INFO("tokens " << n);
    const auto scores = test::random_floats(rng, n, -8.f, 8.f);
    const auto values = test::random_floats(rng, static_cast<std::size_t>(n) * HD);
    // Chunks of random sizes, each summarised on its own, then combined in a random tree shape.
    std::vector<P> chunks;
    for (int t0 = 0; t0 < n;)
    {
      const int len = std::min(n - t0, 1 + static_cast<int>(rng() % 64));
      P c = P::identity();
      c.add_tokens(scores.data() + t0, values.data() + static_cast<std::size_t>(t0) * HD, len);
      chunks.push_back(c);
      t0 += len;
    }
    while (chunks.size() > 1)
    {
      const std::size_t i = rng() % (chunks.size() - 1);
      chunks[i] = OnlineSoftmaxCombine{}(chunks[i], chunks[i + 1]);
      chunks.erase(chunks.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    }
    std::vector<float> out(HD);
    for (int d = 0; d < HD; ++d) { out[d] = chunks[0].output(d); }
    const auto ref = test::reference_softmax_v(std::vector<double>(scores.begin(), scores.end()),
                                               std::vector<double>(values.begin(), values.end()), HD);
    CHECK(test::relative_l2_error(out, ref) < 1e-5);
  }
}
