#pragma once
// What the tile tests share (test/block/test_block_tile_tensor_core.cu, test/warp/test_warp_tile_cuda_core.cu):
// a Scorer with a window per row and a soft cap, random windows, and the check of a tile's partial (max score,
// exp sum, unnormalised values per row) against an fp64 reference.
#include <pagedattn/thread/thread_online_softmax.cuh>
#include <pagedattn/util_type.cuh>

#include "test_support.cuh"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace test {

/// A row's visible positions: [first_visible, end).
struct WindowRow {
  int first_visible, end;
};

/// A Scorer of the tiles' interface: a window per row and an optional soft cap.
struct WindowCapScorer {
  using Row = WindowRow;
  float cap; ///< > 0: logits soft-capped
  __device__ bool Visible(const Row& row, int pos) const { return row.first_visible <= pos && pos < row.end; }
  template <int N>
  __device__ void Logits(float (&score)[N], const Row&, int) const
  {
    for (int e = 0; e < N; ++e) { score[e] = pagedattn::soft_capped_logit(score[e], cap); }
  }
};

/// Row 0 sees every token; the others a window starting in the first half (whole tiles masked), every
/// third ending up to 4 tokens early.
inline std::vector<WindowRow> random_windows(std::mt19937_64& rng, int rows, int end_token)
{
  std::vector<WindowRow> windows(rows);
  for (int r = 0; r < rows; ++r)
  {
    const int first = r == 0 ? 0 : static_cast<int>(rng() % static_cast<unsigned>(end_token / 2 + 1));
    const int end = r % 3 == 2 ? end_token - static_cast<int>(rng() % 5) : end_token;
    windows[r] = {first, end > first ? end : first + 1};
  }
  return windows;
}

/// Elements as the reference reads them: their exact values, in double.
template <class E>
std::vector<double> decoded(const std::vector<E>& elements)
{
  std::vector<double> out(elements.size());
  for (std::size_t i = 0; i < elements.size(); ++i) { out[i] = pagedattn::ElementTraits<E>::to_float(elements[i]); }
  return out;
}

/// Tolerances of a partial's check: relative to the reference's max score (1 + |max|), exp sum, and the
/// relative L2 error of the normalised output.
struct PartialTolerance {
  double max_score, exp_sum, output;
};

/// Checks a tile's partial for rows 0 .. rows - 1 (stats[2r], stats[2r + 1]: max score and exp sum; values[r *
/// head_dim + d]: unnormalised, relative to that max) against fp64: q [rows][head_dim], k and v
/// [end_token][head_dim], logits cap-soft-capped score_scale q·k over each row's window, V times v_scale. The
/// rows rows .. max_rows - 1 must be unwritten (the poison's NaN).
inline void check_partial(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v, int head_dim, int end_token,
                          const std::vector<WindowRow>& windows, double score_scale, double cap, double v_scale, const std::vector<float>& stats,
                          const std::vector<float>& values, int rows, int max_rows, const PartialTolerance& tolerance)
{
  const std::size_t hd = static_cast<std::size_t>(head_dim);
  for (int r = 0; r < rows; ++r)
  {
    INFO("row " << r << ", positions [" << windows[r].first_visible << ", " << windows[r].end << ")");
    std::vector<double> logit(end_token, -INFINITY);
    double max_logit = -INFINITY;
    for (int t = windows[r].first_visible; t < std::min(windows[r].end, end_token); ++t)
    {
      double s = 0;
      for (std::size_t d = 0; d < hd; ++d) { s += q[r * hd + d] * k[t * hd + d]; }
      s *= score_scale;
      logit[t] = cap > 0 ? cap * std::tanh(s / cap) : s;
      max_logit = std::max(max_logit, logit[t]);
    }
    const float fold_max = stats[2 * r], fold_sum = stats[2 * r + 1];
    REQUIRE(std::abs(fold_max - max_logit) <= tolerance.max_score * (1 + std::abs(max_logit)));
    // The exp sum and values are relative to the partial's own maximum.
    double sum = 0;
    std::vector<double> out(hd, 0.0);
    for (int t = 0; t < end_token; ++t)
    {
      if (logit[t] == -INFINITY) { continue; }
      const double w = std::exp(logit[t] - fold_max);
      sum += w;
      for (std::size_t d = 0; d < hd; ++d) { out[d] += w * v[t * hd + d] * v_scale; }
    }
    REQUIRE(std::abs(fold_sum - sum) <= tolerance.exp_sum * sum);
    for (double& o : out) { o /= sum; }
    std::vector<float> got(values.begin() + static_cast<std::ptrdiff_t>(r * hd), values.begin() + static_cast<std::ptrdiff_t>((r + 1) * hd));
    for (float& g : got) { g /= fold_sum; }
    REQUIRE(relative_l2_error(got, out) < tolerance.output);
  }
  for (int r = rows; r < max_rows; ++r)
  {
    INFO("row " << r << " past the tile's " << rows);
    REQUIRE(std::isnan(stats[2 * r]));
    REQUIRE(std::isnan(stats[2 * r + 1]));
    for (std::size_t d = 0; d < hd; ++d) { REQUIRE(std::isnan(values[r * hd + d])); }
  }
}

} // namespace test
