#pragma once
// fp64 CPU references for the tests.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace test {

/// softmax(scores) · values in fp64; values is [n][head_dim] row-major; -inf scores are masked.
/// Returns zeros when every score is masked (the library's defined output for an empty softmax).
inline std::vector<double> reference_softmax_v(const std::vector<double>& scores, const std::vector<double>& values,
                                               int head_dim)
{
  const int n = static_cast<int>(scores.size());
  double m = -std::numeric_limits<double>::infinity();
  for (double s : scores) { m = std::max(m, s); }
  std::vector<double> out(head_dim, 0.0);
  if (m == -std::numeric_limits<double>::infinity()) { return out; }
  double l = 0;
  for (int t = 0; t < n; ++t)
  {
    const double p = std::exp(scores[t] - m);
    l += p;
    for (int d = 0; d < head_dim; ++d) { out[d] += p * values[static_cast<std::size_t>(t) * head_dim + d]; }
  }
  for (auto& x : out) { x /= l; }
  return out;
}

} // namespace test
