#pragma once
// The data of a paged decode problem, shared by the example, the benchmarks and the tests (not part of the
// library): the hash every element comes from, vLLM's cache packing, and the fp64 reference.
//
// Every element of the queries and of the K/V cache is a hash of (seed, element index) mapped to
// uniform(-1, 1) (never 0) and rounded to T; queries are scaled by 3 so that the softmax is not flat. The
// device and the host compute the same bits, so the host regenerates any element for the reference
// instead of downloading a GB-sized cache.
#include <pagedattn/device/device_paged_attention.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace paged_decode {

/// uniform(-1, 1), never 0, from splitmix64 of (seed, i). Integer arithmetic and one exact conversion: the
/// host and the device compute the same bits.
__host__ __device__ inline float hash_uniform(std::uint64_t seed, std::uint64_t i)
{
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const std::int64_t k = static_cast<std::int64_t>(z >> 40) - (1 << 23); // [-2^23, 2^23)
  return k == 0 ? 0.5f : static_cast<float>(k) * 0x1p-23f;
}

/// Where the elements of a problem come from: queries [seq][head][dim], and K/V elements (sequence,
/// token, kv head, dim) counted with the sequences tokens_per_seq apart, each stream with its own seed.
struct ProblemData {
  std::uint64_t seed = 0;
  int num_heads = 1;
  int num_kv_heads = 1;
  int head_size = 128;
  std::uint64_t tokens_per_seq = 0;

  __host__ __device__ std::uint64_t key_seed() const { return 4 * seed + 1; }
  __host__ __device__ std::uint64_t value_seed() const { return 4 * seed + 2; }
  __host__ __device__ std::uint64_t query_seed() const { return 4 * seed + 3; }

  /// Index of K/V element (sequence, token, kv head, dim) in its hash stream.
  __host__ __device__ std::uint64_t kv_index(int seq, std::int64_t token, int kv_head, int dim) const
  {
    return ((seq * tokens_per_seq + std::uint64_t(token)) * num_kv_heads + kv_head) * head_size + dim;
  }

  /// Query element i, counted in [seq][head][dim] order.
  template <class T>
  __host__ __device__ T query(std::uint64_t i) const
  {
    return pagedattn::ElementTraits<T>::from_float(3.f * hash_uniform(query_seed(), i));
  }
  template <class T>
  __host__ __device__ T key(int seq, std::int64_t token, int kv_head, int dim) const
  {
    return pagedattn::ElementTraits<T>::from_float(hash_uniform(key_seed(), kv_index(seq, token, kv_head, dim)));
  }
  template <class T>
  __host__ __device__ T value(int seq, std::int64_t token, int kv_head, int dim) const
  {
    return pagedattn::ElementTraits<T>::from_float(hash_uniform(value_seed(), kv_index(seq, token, kv_head, dim)));
  }
};

/// The paged caches' layout (see pagedattn::DecodeArguments): vLLM's (key [block][kv_head][head_size / x]
/// [block_size][x] with x the elements of 16 bytes, value [block][kv_head][head_size][block_size]), or
/// token rows, HND ([block][kv_head][block_size][head_size]) and NHD ([block][block_size][kv_head]
/// [head_size]) for both caches, with the strides given (0: packed), as DecodeArguments takes them.
template <class T>
struct CacheLayout {
  static constexpr int x = pagedattn::elements_per_vector<T>;
  int num_kv_heads = 1;
  int head_size = 128;
  int block_size = 16;
  pagedattn::CacheLayout kind = pagedattn::CacheLayout::vllm;
  std::int64_t block_stride = 0, head_stride = 0, token_stride = 0; ///< token rows: elements (0: packed)

  __host__ __device__ std::int64_t run_elements() const { return std::int64_t(head_size) * block_size; }
  __host__ __device__ std::int64_t block_step() const { return block_stride ? block_stride : num_kv_heads * run_elements(); }
  __host__ __device__ std::int64_t head_step() const
  {
    return head_stride ? head_stride : kind == pagedattn::CacheLayout::nhd ? head_size : run_elements();
  }
  __host__ __device__ std::int64_t token_step() const
  {
    return token_stride ? token_stride : kind == pagedattn::CacheLayout::nhd ? std::int64_t(num_kv_heads) * head_size : head_size;
  }
  /// Elements from one cache block to the next (a cache of n blocks holds n * block_elements()).
  __host__ __device__ std::uint64_t block_elements() const { return std::uint64_t(block_step()); }
  __host__ __device__ std::uint64_t key_offset(std::uint64_t block, int kv_head, int dim, int slot) const
  {
    if (kind != pagedattn::CacheLayout::vllm) { return row_offset(block, kv_head, dim, slot); }
    const std::uint64_t head_base = block * num_kv_heads + kv_head;
    return ((head_base * (head_size / x) + dim / x) * block_size + slot) * x + dim % x;
  }
  __host__ __device__ std::uint64_t value_offset(std::uint64_t block, int kv_head, int dim, int slot) const
  {
    if (kind != pagedattn::CacheLayout::vllm) { return row_offset(block, kv_head, dim, slot); }
    const std::uint64_t head_base = block * num_kv_heads + kv_head;
    return (head_base * head_size + dim) * block_size + slot;
  }
  /// Set the layout and strides of a's caches.
  template <class Q, class... Variants>
  void describe(pagedattn::DecodeArguments<Q, T, Variants...>& a) const
  {
    a.cache_layout = kind;
    a.cache_block_stride = block_stride;
    a.cache_head_stride = head_stride;
    a.cache_token_stride = token_stride;
  }

private:
  __host__ __device__ std::uint64_t row_offset(std::uint64_t block, int kv_head, int dim, int slot) const
  {
    return block * block_step() + kv_head * head_step() + slot * token_step() + dim;
  }
};

/// `count` cache block ids from first_id on, in a random order: a sequence's blocks end up scattered
/// over the cache, as in a long-running server.
inline std::vector<int> shuffled_block_ids(std::size_t count, int first_id, std::uint64_t seed)
{
  std::vector<int> ids(count);
  std::iota(ids.begin(), ids.end(), first_id);
  std::mt19937_64 rng(seed);
  std::shuffle(ids.begin(), ids.end(), rng);
  return ids;
}

/// fp64 attention of (seq, head) over the sequence's first seq_len tokens, from the inputs as stored: the
/// queries rounded to T, the caches to KvT and, for an fp8 cache, dequantized with the KV head's scales
/// (float(fp8) * scale): softmax(cap(scale q.k) + alibi_slope (token - seq_len + 1)) . v, where cap(s) =
/// softcap tanh(s / softcap) (softcap 0: s) and a sink logit joins the denominator (-inf: none); zeros for
/// an empty sequence. A window: the last window_left + 1 of the seq_len tokens only. query_index: the
/// query's row (seq * q_len + i for new token i of several, DecodeArguments::q_len, whose seq_len is then
/// the row's: seq_len - q_len + 1 + i); -1: seq.
template <class T, class KvT = T>
std::vector<double> reference_attention(const ProblemData& data, int seq, int head, int seq_len, float scale,
                                        double alibi_slope = 0, double k_scale = 1, double v_scale = 1, double softcap = 0,
                                        double sink = -INFINITY, int window_left = -1, int query_index = -1)
{
  using Traits = pagedattn::ElementTraits<T>;
  using KvTraits = pagedattn::ElementTraits<KvT>;
  const int D = data.head_size, kvh = head / (data.num_heads / data.num_kv_heads);
  std::vector<double> q(D);
  const std::uint64_t query_row = query_index >= 0 ? std::uint64_t(query_index) : std::uint64_t(seq);
  for (int d = 0; d < D; ++d) { q[d] = Traits::to_float(data.query<T>((query_row * data.num_heads + head) * D + d)); }
  // A sliding window: the tokens before seq_len - 1 - window_left are not seen (score -inf, weight 0).
  const int first = window_left >= 0 ? std::max(0, seq_len - 1 - window_left) : 0;
  std::vector<double> score(std::size_t(std::max(0, seq_len)), -INFINITY);
  for (int t = first; t < seq_len; ++t)
  {
    double acc = 0;
    for (int d = 0; d < D; ++d) { acc += q[d] * (KvTraits::to_float(data.key<KvT>(seq, t, kvh, d)) * k_scale); }
    const double logit = softcap > 0 ? softcap * std::tanh(acc * double(scale) / softcap) : acc * double(scale);
    score[t] = logit + alibi_slope * (t - seq_len + 1);
  }
  std::vector<double> out(D, 0.0);
  if (seq_len <= 0) { return out; }
  const double m = std::max(sink, *std::max_element(score.begin(), score.end()));
  double sum = std::exp(sink - m);
  for (int t = first; t < seq_len; ++t)
  {
    const double p = std::exp(score[t] - m);
    sum += p;
    for (int d = 0; d < D; ++d) { out[d] += p * (KvTraits::to_float(data.value<KvT>(seq, t, kvh, d)) * v_scale); }
  }
  for (double& v : out) { v /= sum; }
  return out;
}

} // namespace paged_decode
