#pragma once
// Support code of the example and the benchmarks (not part of the library): a paged decode problem with
// every sequence of one length, made on the device, its check against the fp64 reference, and the timing
// helpers. The data (see paged_decode_data.cuh) is written by init kernels; the host regenerates a sample
// of (sequence, head) pairs for the reference.
#include <pagedattn/device/device_paged_attention.cuh>

#include "paged_decode_data.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

/// Check a CUDA runtime call (or a pagedattn entry point): on failure print where, the error and
/// pagedattn's message naming the bad argument, and exit with status 1.
#define PAGEDATTN_CHECK(expr) ::paged_decode::check_cuda((expr), #expr, __FILE__, __LINE__)

namespace paged_decode {

inline void check_cuda(cudaError_t err, const char* expr, const char* file, int line)
{
  if (err == cudaSuccess) { return; }
  std::fprintf(stderr, "%s:%d: %s failed: %s\n", file, line, expr, cudaGetErrorString(err));
  if (!pagedattn::last_error_message().empty()) { std::fprintf(stderr, "  pagedattn: %s\n", pagedattn::last_error_message().c_str()); }
  std::exit(1);
}

/// True when a CUDA device can be used (the programs print a message and exit otherwise).
inline bool have_cuda_device()
{
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

// ---- the shape and the init kernels -----------------------------------------------------------------------

/// Every sequence has seq_len tokens.
struct DecodeShape {
  int num_seqs = 1;
  int seq_len = 1;
  int num_heads = 1;
  int num_kv_heads = 1;
  int head_size = 128;
  int block_size = 16;
  pagedattn::CacheLayout layout = pagedattn::CacheLayout::vllm; ///< the caches' layout (packed)
  int q_len = 1; ///< new tokens per sequence (DecodeArguments::q_len): queries and outputs [num_seqs * q_len][num_heads][head_size]

  __host__ __device__ int blocks_per_seq() const { return (seq_len + block_size - 1) / block_size; }
  float scale() const { return 1.f / std::sqrt(float(head_size)); }
  /// The problem's elements (the sequences a whole number of blocks apart in the K/V streams).
  __host__ __device__ ProblemData data(std::uint64_t seed) const
  {
    return {seed, num_heads, num_kv_heads, head_size, std::uint64_t(blocks_per_seq()) * block_size};
  }
  template <class T>
  __host__ __device__ CacheLayout<T> cache_layout() const { return {num_kv_heads, head_size, block_size, layout}; }
};

/// Writes element i of the sequences' cache blocks, counted in logical order (sequence, block, kv head,
/// dim, token), to its place in the paged K and V caches; tokens past seq_len in a sequence's last block
/// get 0.
template <class T>
__host__ __device__ inline void fill_kv_element(T* key_cache, T* value_cache, const int* block_tables, const DecodeShape& s,
                                                std::uint64_t seed, std::uint64_t i)
{
  const int bps = s.blocks_per_seq();
  const int t = int(i % s.block_size); i /= s.block_size;
  const int d = int(i % s.head_size); i /= s.head_size;
  const int kvh = int(i % s.num_kv_heads); i /= s.num_kv_heads;
  const int b = int(i % bps);
  const int seq = int(i / bps);
  const std::int64_t token = std::int64_t(b) * s.block_size + t;
  const bool live = token < s.seq_len;
  const ProblemData data = s.data(seed);
  const CacheLayout<T> layout = s.cache_layout<T>();
  const std::uint64_t block = std::uint64_t(block_tables[std::size_t(seq) * bps + b]);
  key_cache[layout.key_offset(block, kvh, d, t)] = live ? data.key<T>(seq, token, kvh, d) : pagedattn::ElementTraits<T>::from_float(0.f);
  value_cache[layout.value_offset(block, kvh, d, t)] = live ? data.value<T>(seq, token, kvh, d) : pagedattn::ElementTraits<T>::from_float(0.f);
}

template <class T>
__global__ void fill_kv_cache_kernel(T* key_cache, T* value_cache, const int* block_tables, DecodeShape s, std::uint64_t seed)
{
  const std::uint64_t total = std::uint64_t(s.num_seqs) * s.blocks_per_seq() * s.num_kv_heads * s.head_size * s.block_size;
  for (std::uint64_t i = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; i < total; i += std::uint64_t(gridDim.x) * blockDim.x)
  {
    fill_kv_element(key_cache, value_cache, block_tables, s, seed, i);
  }
}

template <class T>
__global__ void fill_query_kernel(T* query, std::uint64_t n, ProblemData data)
{
  for (std::uint64_t i = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; i < n; i += std::uint64_t(gridDim.x) * blockDim.x)
  {
    query[i] = data.query<T>(i);
  }
}

// ---- host side: block tables and the check against the fp64 reference ---------------------------------

/// Block tables [num_seqs][blocks_per_seq]: a random permutation of the cache's blocks.
inline std::vector<int> scattered_block_tables(const DecodeShape& s, std::uint64_t seed)
{
  return shuffled_block_ids(std::size_t(s.num_seqs) * s.blocks_per_seq(), 0, seed);
}

/// n (sequence, head) pairs spread over the sequences and the heads (so over every KV head group).
inline std::vector<std::pair<int, int>> sample_pairs(const DecodeShape& s, int n)
{
  std::vector<std::pair<int, int>> pairs;
  const int den = std::max(1, n - 1);
  for (int i = 0; i < n; ++i) { pairs.push_back({i * (s.num_seqs - 1) / den, i * (s.num_heads - 1) / den}); }
  return pairs;
}

/// Largest relative L2 error ||out - ref|| / ||ref|| of output [num_seqs * q_len][num_heads][head_size] over
/// the pairs, each new token's row of them (+inf for a non-finite output); one host thread per pair. lens:
/// each sequence's length where they differ (a serving batch in a cache of s.seq_len tokens per sequence);
/// empty: s.seq_len each. An empty sequence's reference is 0, and its error is 0 when the output is 0.
/// window_left >= 0: a sliding window. query_rows: each sequence's new tokens (DecodeArguments::query_start_loc,
/// packed from row 0); empty: q_len each.
template <class T, class KvT = T>
double max_relative_error(const DecodeShape& s, std::uint64_t seed, const std::vector<T>& output,
                          const std::vector<std::pair<int, int>>& pairs, const std::vector<int>& lens = {}, double k_scale = 1,
                          double v_scale = 1, int window_left = -1, const std::vector<int>& query_rows = {})
{
  std::vector<int> first_row(std::size_t(s.num_seqs) + 1, 0);
  for (int q = 0; q < s.num_seqs; ++q) { first_row[q + 1] = first_row[q] + (query_rows.empty() ? s.q_len : query_rows[std::size_t(q)]); }
  std::vector<double> errors(pairs.size());
  std::vector<std::thread> workers;
  for (std::size_t i = 0; i < pairs.size(); ++i)
  {
    workers.emplace_back([&, i] {
      const auto [seq, head] = pairs[i];
      const int len = lens.empty() ? s.seq_len : lens[std::size_t(seq)];
      double worst = 0;
      const int n = first_row[seq + 1] - first_row[seq];
      for (int token = 0; token < n; ++token) // new token `token` of n sees len - n + 1 + token positions
      {
        const int row = first_row[seq] + token;
        const std::vector<double> ref = reference_attention<T, KvT>(s.data(seed), seq, head, std::max(0, len - n + 1 + token), s.scale(), 0,
                                                                    k_scale, v_scale, 0, -INFINITY, window_left, row);
        double num = 0, den = 0;
        for (int d = 0; d < s.head_size; ++d)
        {
          const double o = pagedattn::ElementTraits<T>::to_float(output[(std::size_t(row) * s.num_heads + head) * s.head_size + d]);
          num += (o - ref[d]) * (o - ref[d]);
          den += ref[d] * ref[d];
        }
        worst = std::max(worst, !std::isfinite(num) ? INFINITY : den > 0 ? std::sqrt(num / den) : std::sqrt(num));
      }
      errors[i] = worst;
    });
  }
  for (auto& w : workers) { w.join(); }
  return *std::max_element(errors.begin(), errors.end());
}

// ---- device side -----------------------------------------------------------------------------------------

/// Owning device array.
template <class T>
class DeviceArray {
public:
  explicit DeviceArray(std::size_t n) : n_(n) { PAGEDATTN_CHECK(cudaMalloc(&ptr_, std::max<std::size_t>(n, 1) * sizeof(T))); }
  ~DeviceArray() { PAGEDATTN_CHECK(cudaFree(ptr_)); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return ptr_; }
  std::size_t size() const { return n_; }
  void upload(const std::vector<T>& host) { PAGEDATTN_CHECK(cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice)); }
  std::vector<T> download() const
  {
    std::vector<T> host(n_);
    PAGEDATTN_CHECK(cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

private:
  T* ptr_ = nullptr;
  std::size_t n_;
};

/// A decode problem on the device: queries, K/V cache (elements KvT: T, or an fp8 cache with one K and one V
/// scale, k_scale_value and v_scale_value), block tables, seq_lens, and an output that starts as NaN (0xFF
/// bytes), so that an unwritten output fails the check.
template <class T, class KvT = T>
class PagedDecodeProblem {
public:
  static constexpr bool fp8_cache = pagedattn::is_fp8<KvT>;
  static constexpr float k_scale_value = fp8_cache ? 0.5f : 1.f; ///< an fp8 cache's scales (exact in binary)
  static constexpr float v_scale_value = fp8_cache ? 2.0f : 1.f;

  PagedDecodeProblem(const DecodeShape& shape, std::uint64_t seed)
      : s_(shape), seed_(seed), num_blocks_(std::int64_t(shape.num_seqs) * shape.blocks_per_seq()),
        query_(std::size_t(shape.num_seqs) * shape.q_len * shape.num_heads * shape.head_size), output_(query_.size()),
        key_cache_(std::size_t(num_blocks_) * shape.num_kv_heads * shape.head_size * shape.block_size),
        value_cache_(key_cache_.size()), block_tables_(std::size_t(num_blocks_)), seq_lens_(std::size_t(shape.num_seqs)),
        query_start_loc_(std::size_t(shape.num_seqs) + 1), k_scale_(1), v_scale_(1)
  {
    block_tables_.upload(scattered_block_tables(shape, seed));
    seq_lens_.upload(std::vector<int>(std::size_t(shape.num_seqs), shape.seq_len));
    k_scale_.upload({k_scale_value});
    v_scale_.upload({v_scale_value});
    fill_kv_cache_kernel<<<1024, 256>>>(key_cache_.get(), value_cache_.get(), block_tables_.get(), s_, seed);
    PAGEDATTN_CHECK(cudaGetLastError());
    fill_query_kernel<<<256, 256>>>(query_.get(), query_.size(), shape.data(seed));
    PAGEDATTN_CHECK(cudaGetLastError());
    PAGEDATTN_CHECK(cudaMemset(output_.get(), 0xFF, output_.size() * sizeof(T)));
    PAGEDATTN_CHECK(cudaDeviceSynchronize());
  }

  const DecodeShape& shape() const { return s_; }
  T* output() const { return output_.get(); }
  const T* query() const { return query_.get(); }
  const KvT* key_cache() const { return key_cache_.get(); }
  const KvT* value_cache() const { return value_cache_.get(); }
  std::int64_t num_blocks() const { return num_blocks_; }
  const int* block_tables() const { return block_tables_.get(); }
  const int* seq_lens() const { return seq_lens_.get(); }
  float scale() const { return s_.scale(); }

  /// The arguments of DevicePagedAttention::Decode for this problem (the example fills them field by field),
  /// with an output epilogue's and a score variant's types where given (their values default-constructed).
  template <class OutputEpilogue = pagedattn::IdentityOutputEpilogue, class ScoreVariant = pagedattn::DefaultScoreVariant>
  pagedattn::DecodeArguments<T, KvT, OutputEpilogue, ScoreVariant> arguments() const
  {
    pagedattn::DecodeArguments<T, KvT, OutputEpilogue, ScoreVariant> a;
    a.output = output();
    a.query = query();
    a.key_cache = key_cache();
    a.value_cache = value_cache();
    a.num_blocks = num_blocks_;
    a.block_tables = block_tables();
    a.max_blocks_per_seq = s_.blocks_per_seq();
    a.seq_lens = seq_lens();
    a.num_seqs = s_.num_seqs;
    a.max_seq_len = s_.seq_len;
    a.num_heads = s_.num_heads;
    a.num_kv_heads = s_.num_kv_heads;
    a.head_size = s_.head_size;
    a.block_size = s_.block_size;
    a.scale = scale();
    a.cache_layout = s_.layout;
    a.window_left = window_left_;
    a.q_len = s_.q_len;
    if (!query_rows_.empty())
    {
      a.query_start_loc = query_start_loc_.get();
      a.num_query_rows = s_.num_seqs * s_.q_len; // the query's and the output's rows
    }
    if constexpr (fp8_cache)
    {
      a.k_scale = k_scale_.get();
      a.v_scale = v_scale_.get();
      a.scale_head_stride = 0; // one scale for every KV head, as vLLM 0.6 passes them
    }
    return a;
  }

  /// A serving batch in this cache: each sequence's length (<= shape().seq_len), written to seq_lens.
  void set_seq_lens(const std::vector<int>& lens)
  {
    if (lens.size() != static_cast<std::size_t>(s_.num_seqs)) { throw std::invalid_argument("set_seq_lens: one length per sequence"); }
    lens_ = lens;
    seq_lens_.upload(lens);
  }
  const std::vector<int>& lens() const { return lens_; } ///< empty: every sequence shape().seq_len long

  /// Each sequence its own new tokens, 0 .. shape().q_len (DecodeArguments::query_start_loc, packed from row 0 of
  /// the query and the output, which keep their num_seqs * q_len rows); arguments(), bytes_moved() and the
  /// reference follow them.
  void set_query_rows(const std::vector<int>& rows)
  {
    if (rows.size() != static_cast<std::size_t>(s_.num_seqs)) { throw std::invalid_argument("set_query_rows: one count per sequence"); }
    std::vector<int> offsets{0};
    for (int n : rows)
    {
      if (n < 0 || n > s_.q_len) { throw std::invalid_argument("set_query_rows: each count in [0, q_len]"); }
      offsets.push_back(offsets.back() + n);
    }
    query_rows_ = rows;
    query_start_loc_.upload(offsets);
  }
  const std::vector<int>& query_rows() const { return query_rows_; } ///< empty: q_len each, no offsets

  /// A sliding window (DecodeArguments::window_left; -1: none): arguments(), bytes_moved() and the
  /// reference follow it.
  void set_window_left(int window_left) { window_left_ = window_left; }
  int window_left() const { return window_left_; }

  /// Bytes a decode step must move at least: the K and V of every live (visible) token once (not the padding of
  /// a sequence's last block, not the GQA re-reads, which a good kernel serves from one load), the
  /// queries and the output. Block tables and the partition temporaries are not counted.
  double bytes_moved() const
  {
    double tokens = 0;
    for (int q = 0; q < s_.num_seqs; ++q) // under a window: the tokens the new ones see; none without new tokens
    {
      if (!query_rows_.empty() && query_rows_[std::size_t(q)] == 0) { continue; }
      const int len = lens_.empty() ? s_.seq_len : lens_[std::size_t(q)];
      tokens += len - pagedattn::window_first_visible(len, pagedattn::rows_window_left(window_left_, s_.q_len));
    }
    const double kv = 2.0 * tokens * s_.num_kv_heads * s_.head_size * sizeof(KvT);
    double rows = double(s_.num_seqs) * s_.q_len;
    if (!query_rows_.empty()) { rows = std::accumulate(query_rows_.begin(), query_rows_.end(), 0.0); }
    return kv + 2.0 * rows * s_.num_heads * s_.head_size * sizeof(T);
  }

  std::vector<T> download_output() const { return output_.download(); }

  /// n (sequence, head) pairs spread over the sequences and the heads (so over every KV head group).
  std::vector<std::pair<int, int>> sample_pairs(int n) const { return paged_decode::sample_pairs(s_, n); }

  /// Largest relative L2 error of `output` (downloaded) against the fp64 reference over the pairs.
  double max_relative_error(const std::vector<T>& output, const std::vector<std::pair<int, int>>& pairs) const
  {
    return paged_decode::max_relative_error<T, KvT>(s_, seed_, output, pairs, lens_, k_scale_value, v_scale_value, window_left_, query_rows_);
  }

private:
  DecodeShape s_;
  std::uint64_t seed_;
  std::int64_t num_blocks_;
  DeviceArray<T> query_, output_;
  DeviceArray<KvT> key_cache_, value_cache_;
  DeviceArray<int> block_tables_, seq_lens_, query_start_loc_;
  DeviceArray<float> k_scale_, v_scale_;
  std::vector<int> lens_, query_rows_;
  int window_left_ = -1;
};

// ---- timing ----------------------------------------------------------------------------------------------

inline double median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Spins for `ns` nanoseconds (global timer): the host queues the work behind it meanwhile, so that the
/// timed launches start back to back instead of waiting on the host's launch overhead.
// (The kernels here are static: a program of several translation units, bench_decode, includes this header.)
static __global__ void hold_kernel(unsigned long long ns)
{
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do
  {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

inline void hold_stream(cudaStream_t stream, unsigned long long ns)
{
  hold_kernel<<<1, 1, 0, stream>>>(ns);
  PAGEDATTN_CHECK(cudaGetLastError());
}

/// Owning pair of CUDA events.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair()
  {
    PAGEDATTN_CHECK(cudaEventCreate(&start));
    PAGEDATTN_CHECK(cudaEventCreate(&stop));
  }
  ~EventPair()
  {
    PAGEDATTN_CHECK(cudaEventDestroy(start));
    PAGEDATTN_CHECK(cudaEventDestroy(stop));
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  double elapsed_us() const
  {
    float ms = 0;
    PAGEDATTN_CHECK(cudaEventSynchronize(stop));
    PAGEDATTN_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return 1e3 * ms;
  }
};

/// Device-to-device copy bandwidth in GB/s (1e9 bytes/s), counting the bytes read plus the bytes written:
/// the practical ceiling of a memory-bound kernel. Median of `reps` timed cudaMemcpyAsync of `bytes`.
inline double device_copy_gbps(std::size_t bytes = std::size_t(2) << 30, int reps = 20)
{
  DeviceArray<char> src(bytes), dst(bytes);
  PAGEDATTN_CHECK(cudaMemset(src.get(), 1, bytes));
  PAGEDATTN_CHECK(cudaMemcpy(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice)); // warm-up
  EventPair ev;
  std::vector<double> us;
  for (int i = 0; i < reps; ++i)
  {
    PAGEDATTN_CHECK(cudaEventRecord(ev.start));
    PAGEDATTN_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice));
    PAGEDATTN_CHECK(cudaEventRecord(ev.stop));
    us.push_back(ev.elapsed_us());
  }
  return 2.0 * double(bytes) / (median(us) * 1e3);
}

/// Reads a buffer (XOR of its 16-byte words; the zero buffer never triggers the store, which only keeps
/// the loads alive).
static __global__ void read_buffer_kernel(const uint4* p, std::size_t n, unsigned* sink)
{
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
  {
    const uint4 v = p[i];
    acc = make_uint4(acc.x ^ v.x, acc.y ^ v.y, acc.z ^ v.z, acc.w ^ v.w);
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u) { *sink = 1; }
}

/// Streams a buffer once, four independent 16-byte loads per thread and step (a grid-stride loop over
/// groups of 4 words; the tail word by word), so that each SM keeps enough loads in flight to reach the
/// read bandwidth. The XOR of the words goes to *sink only if it equals an improbable value (never, for
/// the zero buffer of device_read_gbps).
static __global__ void read_stream_kernel(const uint4* p, std::size_t n, unsigned* sink)
{
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  const std::size_t groups = n / 4;
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (std::size_t g = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; g < groups; g += stride)
  {
    uint4 v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) { v[k] = p[g + k * groups]; } // four streams a quarter of the buffer apart
#pragma unroll
    for (int k = 0; k < 4; ++k) { acc = make_uint4(acc.x ^ v[k].x, acc.y ^ v[k].y, acc.z ^ v[k].z, acc.w ^ v[k].w); }
  }
  for (std::size_t i = 4 * groups + blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += stride)
  {
    const uint4 v = p[i];
    acc = make_uint4(acc.x ^ v.x, acc.y ^ v.y, acc.z ^ v.z, acc.w ^ v.w);
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u) { *sink = 1; }
}

/// The device's read bandwidth in GB/s: the median time of read_stream_kernel over a buffer of `bytes`
/// (1 GiB: far beyond L2, so every launch reads HBM), the best of a few grid sizes (1, 2, 4 and 8 blocks
/// of 512 threads per SM), since the fastest plain read is the ceiling a decode is compared against.
inline double device_read_gbps(std::size_t bytes = std::size_t(1) << 30, int reps = 20)
{
  const std::size_t words = bytes / sizeof(uint4);
  DeviceArray<uint4> buffer(words);
  DeviceArray<unsigned> sink(1);
  PAGEDATTN_CHECK(cudaMemset(buffer.get(), 0, words * sizeof(uint4)));
  int device = 0, sms = 0;
  PAGEDATTN_CHECK(cudaGetDevice(&device));
  PAGEDATTN_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  EventPair ev;
  double best = 0.0;
  for (int blocks_per_sm : {1, 2, 4, 8})
  {
    const int grid = sms * blocks_per_sm;
    read_stream_kernel<<<grid, 512>>>(buffer.get(), words, sink.get()); // warm-up
    PAGEDATTN_CHECK(cudaGetLastError());
    std::vector<double> us;
    for (int i = 0; i < reps; ++i)
    {
      PAGEDATTN_CHECK(cudaEventRecord(ev.start));
      read_stream_kernel<<<grid, 512>>>(buffer.get(), words, sink.get());
      PAGEDATTN_CHECK(cudaGetLastError());
      PAGEDATTN_CHECK(cudaEventRecord(ev.stop));
      us.push_back(ev.elapsed_us());
    }
    best = std::max(best, double(words * sizeof(uint4)) / (median(us) * 1e3));
  }
  return best;
}

/// Evicts the L2 cache by reading a buffer of 3x its size (the issue's method), so that a timed launch
/// reads its inputs from HBM, as a decode step does in a server (the cache of one step was last touched a
/// whole model ago). Reading leaves clean lines in L2; a flush by writing (Mode::write, kept to compare)
/// leaves dirty ones, whose write-back then competes with the timed launch for HBM bandwidth.
class L2Flush {
public:
  enum class Mode { read, write };
  explicit L2Flush(Mode mode = Mode::read) : mode_(mode), buffer_(3 * std::size_t(l2_bytes())), sink_(1)
  {
    PAGEDATTN_CHECK(cudaMemset(buffer_.get(), 0, buffer_.size()));
    PAGEDATTN_CHECK(cudaDeviceSynchronize());
  }
  std::size_t bytes() const { return buffer_.size(); }
  const char* method() const { return mode_ == Mode::read ? "read" : "write"; }
  void operator()(cudaStream_t stream) const
  {
    if (mode_ == Mode::write)
    {
      PAGEDATTN_CHECK(cudaMemsetAsync(buffer_.get(), 0, buffer_.size(), stream));
      return;
    }
    read_buffer_kernel<<<1024, 256, 0, stream>>>(reinterpret_cast<const uint4*>(buffer_.get()), buffer_.size() / 16, sink_.get());
    PAGEDATTN_CHECK(cudaGetLastError());
  }

private:
  static int l2_bytes()
  {
    int device = 0, l2 = 0;
    PAGEDATTN_CHECK(cudaGetDevice(&device));
    PAGEDATTN_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    return std::max(l2, 1 << 20);
  }
  Mode mode_;
  DeviceArray<char> buffer_;
  DeviceArray<unsigned> sink_;
};

/// Median time in µs of n individually timed calls of launch() (one warm-up first). With a flush, the L2
/// is flushed before each call, outside the timed interval; the stream is held meanwhile so that the host
/// has queued the call before the start event is reached.
template <class Launch>
double median_launch_us(Launch&& launch, int n, cudaStream_t stream, const L2Flush* flush = nullptr)
{
  launch();
  PAGEDATTN_CHECK(cudaStreamSynchronize(stream));
  EventPair ev;
  std::vector<double> us;
  for (int i = 0; i < n; ++i)
  {
    hold_stream(stream, 200'000);
    if (flush) { (*flush)(stream); }
    PAGEDATTN_CHECK(cudaEventRecord(ev.start, stream));
    launch();
    PAGEDATTN_CHECK(cudaEventRecord(ev.stop, stream));
    us.push_back(ev.elapsed_us());
  }
  return median(us);
}

/// "Hot" median in µs: n launches queued back to back behind a hold (L2 warm with whatever fits), each
/// timed by the events recorded between consecutive launches.
template <class Launch>
double median_hot_us(Launch&& launch, int n, cudaStream_t stream)
{
  launch();
  PAGEDATTN_CHECK(cudaStreamSynchronize(stream));
  std::vector<cudaEvent_t> events(std::size_t(n) + 1);
  for (auto& e : events) { PAGEDATTN_CHECK(cudaEventCreate(&e)); }
  hold_stream(stream, 20'000'000);
  PAGEDATTN_CHECK(cudaEventRecord(events[0], stream));
  for (int i = 0; i < n; ++i)
  {
    launch();
    PAGEDATTN_CHECK(cudaEventRecord(events[std::size_t(i) + 1], stream));
  }
  PAGEDATTN_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> us;
  for (int i = 0; i < n; ++i)
  {
    float ms = 0;
    PAGEDATTN_CHECK(cudaEventElapsedTime(&ms, events[i], events[std::size_t(i) + 1]));
    us.push_back(1e3 * ms);
  }
  for (auto& e : events) { PAGEDATTN_CHECK(cudaEventDestroy(e)); }
  return median(us);
}

} // namespace paged_decode
