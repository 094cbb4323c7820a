#pragma once
// The serving batches' lengths, shared by bench_decode (its serving table) and trace_decode (their
// timelines), so that both build the same batch from the same name.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace bench_batches {

/// n lengths log-uniform in [lo, hi], from a fixed seed: the same batch in every run. The benchmark's
/// batches use seed n (64xlog100-100000: seed 64).
inline std::vector<int> log_uniform_lengths(int n, int lo, int hi, std::uint64_t seed)
{
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(std::log(double(lo)), std::log(double(hi)));
  std::vector<int> lens(std::size_t(n), 0);
  for (int& len : lens) { len = std::min(hi, std::max(lo, int(std::lround(std::exp(u(rng)))))); }
  return lens;
}

/// One long sequence, then `short_count` of `short_len` tokens.
inline std::vector<int> skewed_lengths(int long_len, int short_count, int short_len)
{
  std::vector<int> lens(std::size_t(short_count) + 1, short_len);
  lens[0] = long_len;
  return lens;
}

} // namespace bench_batches
