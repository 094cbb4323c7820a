#pragma once
// Paged-attention problems with a length per sequence, built on the host from the data of
// examples/support/paged_decode_data.cuh (NaN wherever no sequence's token lives), run through
// DevicePagedAttention::Decode and checked against that header's fp64 reference. Shared by the decode tests.
#include <pagedattn/device/device_paged_attention.cuh>

#include "support/paged_decode_data.cuh"
#include "support/test_support.cuh"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <thread>

namespace test {

/// A problem's shape; the first fields in order, {seq_lens, num_heads, num_kv_heads, head_size, block_size},
/// make the usual brace initialiser.
struct DecodeShape {
  std::vector<int> seq_lens;
  int num_heads = 8, num_kv_heads = 2, head_size = 128, block_size = 16;
  bool alibi = false;
  int spare_blocks = 3;         ///< unused cache blocks (filled with NaN: reading one shows)
  std::int64_t min_block_id = 0; ///< place the sequences' blocks at ids >= this (large caches)
  int reference_heads = -1;     ///< check only this many heads per sequence (first and last ones); -1 all
  int max_seq_len_override = -1; ///< DecodeArguments::max_seq_len when >= 0 (a looser bound); else the longest length
  int partition_tokens = 0;      ///< DecodeArguments::partition_tokens (0: automatic)
  std::int64_t scale_head_stride = 1; ///< fp8 caches: DecodeArguments::scale_head_stride (scales differ per KV head)
  pagedattn::CacheLayout cache_layout = pagedattn::CacheLayout::vllm; ///< DecodeArguments::cache_layout and strides
  std::int64_t cache_block_stride = 0, cache_head_stride = 0, cache_token_stride = 0; ///< (gaps between hold NaN)
  float softcap = 0.f; ///< DecodeArguments::logit_softcap
  bool sinks = false;  ///< attention sinks per head (sink_of): -inf (none), 0.5, 2 and 4 in turn
  float scale = 0.f;   ///< DecodeArguments::scale when > 0 (large scores); else 1 / sqrt(head_size)
  float sink_base = 0.f; ///< added to every sink but -inf (a large one takes the whole softmax)
  int window_left = -1;  ///< DecodeArguments::window_left; the table entries of the blocks wholly before a window
                         ///< are invalid ids (-1, INT_MAX in turn) whose reading would show (NaN, error_count)
  int q_len = 1;         ///< DecodeArguments::q_len: queries and outputs [num_seqs * q_len][num_heads][head_size]
  std::vector<int> query_rows; ///< per sequence, 0 .. q_len new tokens (DecodeArguments::query_start_loc, packed
                               ///< in order); empty: q_len each, without offsets
  int spare_query_rows = 0;    ///< with query_rows: rows past the last sequence's (num_query_rows is larger)

  /// The sink of head h when sinks is set.
  float sink_of(int h) const
  {
    const float cycle[] = {-INFINITY, 0.5f, 2.f, 4.f};
    return h % 4 == 0 ? cycle[0] : cycle[h % 4] + sink_base;
  }

  template <class KvT>
  paged_decode::CacheLayout<KvT> layout() const
  {
    return {num_kv_heads, head_size, block_size, cache_layout, cache_block_stride, cache_head_stride, cache_token_stride};
  }

  /// Cache blocks that sequence q uses.
  int blocks_of(int q) const { return std::max(0, (seq_lens[q] + block_size - 1) / block_size); }
  /// New tokens of sequence q, and its first row of the query and output.
  int rows_of(int q) const { return query_rows.empty() ? q_len : query_rows[std::size_t(q)]; }
  int first_row_of(int q) const
  {
    int first = 0;
    for (int s = 0; s < q; ++s) { first += rows_of(s); }
    return first;
  }
  /// DecodeArguments::query_start_loc (num_seqs + 1 offsets) and num_query_rows.
  std::vector<int> query_offsets() const
  {
    std::vector<int> o{0};
    for (int q = 0; q < int(seq_lens.size()); ++q) { o.push_back(o.back() + rows_of(q)); }
    return o;
  }
  int total_rows() const { return first_row_of(int(seq_lens.size())) + (query_rows.empty() ? 0 : spare_query_rows); }
  /// Positions new token i of sequence q sees (DecodeArguments::q_len): seq_len - n + 1 + i of its n new tokens, at least 0.
  int row_len(int q, int i) const { return std::max(0, seq_lens[q] - rows_of(q) + 1 + i); }
  /// The launch's shape and variants in a line (a failing case's INFO).
  std::string describe() const
  {
    return "q_len " + std::to_string(q_len) + " heads " + std::to_string(num_heads) + "/" + std::to_string(num_kv_heads) + " head " +
           std::to_string(head_size) + " block " + std::to_string(block_size) + " window " + std::to_string(window_left) + " alibi " +
           std::to_string(alibi) + " softcap " + std::to_string(softcap) + " sinks " + std::to_string(sinks) + " partition_tokens " +
           std::to_string(partition_tokens) + " max_seq_len " + std::to_string(max_seq_len_override);
  }
};

template <class T>
struct DecodeProblem {
  DecodeShape shape;
  paged_decode::ProblemData data;
  int num_seqs = 0, max_blocks_per_seq = 0, max_seq_len = 0;
  std::int64_t num_blocks = 0;
  float scale = 0;
  std::vector<T> query;
  std::vector<int> block_tables;
  std::vector<float> alibi;
};

/// Generate the problem and upload the cache blocks that sequences use; other blocks hold NaN when the
/// cache is small enough to fill (spare blocks, tokens past each sequence's end). KvT: the caches' element
/// type (T, or an fp8 format with scales per KV head: k_scales, v_scales, which a test may change).
template <class T, class KvT = T>
struct DeviceDecode {
  static constexpr bool fp8 = pagedattn::is_fp8<KvT>;
  DecodeProblem<T> prob;
  KvT* d_key = nullptr;
  KvT* d_value = nullptr;
  DeviceBuffer<T> query, output;
  DeviceBuffer<int> block_tables, seq_lens;
  DeviceBuffer<int> query_start_loc; ///< with DecodeShape::query_rows (a test may overwrite it: invalid offsets)
  DeviceBuffer<float> alibi, sinks;
  DeviceBuffer<unsigned> error_count;
  std::vector<float> k_scales, v_scales; ///< fp8: per KV head (the first one only when scale_head_stride is 0)
  DeviceBuffer<float> d_k_scales, d_v_scales;

  DeviceDecode(const DecodeShape& s, std::uint64_t seed)
      : prob(make(s, seed)), query(prob.query), output(std::size_t(s.total_rows()) * s.num_heads * s.head_size),
        block_tables(prob.block_tables), seq_lens(s.seq_lens), query_start_loc(s.query_offsets()), alibi(prob.alibi.empty() ? std::vector<float>{1.f} : prob.alibi),
        sinks(sink_values(s)),
        error_count(1), k_scales(default_scales(s, 0.5f, 0.25f)), v_scales(default_scales(s, 1.5f, -0.25f)), d_k_scales(k_scales),
        d_v_scales(v_scales)
  {
    upload_cache();
    CUDA_CHECK(cudaMemset(error_count.get(), 0, sizeof(unsigned)));
  }
  ~DeviceDecode()
  {
    cudaFree(d_key);
    cudaFree(d_value);
  }

  static std::vector<float> sink_values(const DecodeShape& s)
  {
    std::vector<float> v;
    for (int h = 0; h < s.num_heads; ++h) { v.push_back(s.sink_of(h)); }
    return v;
  }

  /// Scales first, first + step, ... per KV head (never 0: first 0.5 or 1.5, at most 16 KV heads here).
  static std::vector<float> default_scales(const DecodeShape& s, float first, float step)
  {
    std::vector<float> v;
    for (int h = 0; h < s.num_kv_heads; ++h) { v.push_back(first + step * float(h % 4)); }
    return v;
  }

  /// Replace the scales on the device (the next launch or graph replay reads them).
  void set_scales(const std::vector<float>& k, const std::vector<float>& v)
  {
    k_scales = k;
    v_scales = v;
    d_k_scales.upload(k);
    d_v_scales.upload(v);
  }
  double k_scale_of(int kv_head) const { return fp8 ? k_scales[kv_head * prob.shape.scale_head_stride] : 1.0; }
  double v_scale_of(int kv_head) const { return fp8 ? v_scales[kv_head * prob.shape.scale_head_stride] : 1.0; }

  static DecodeProblem<T> make(const DecodeShape& s, std::uint64_t seed)
  {
    DecodeProblem<T> p;
    p.shape = s;
    p.num_seqs = int(s.seq_lens.size());
    const int longest = std::max(0, *std::max_element(s.seq_lens.begin(), s.seq_lens.end()));
    p.max_seq_len = s.max_seq_len_override >= 0 ? s.max_seq_len_override : longest;
    p.max_blocks_per_seq = std::max(1, (p.max_seq_len + s.block_size - 1) / s.block_size);
    // The K/V streams keep the sequences the longest one apart, whatever max_seq_len says.
    p.data = {seed, s.num_heads, s.num_kv_heads, s.head_size, std::uint64_t(longest)};
    int used = 0;
    for (int q = 0; q < p.num_seqs; ++q) { used += s.blocks_of(q); }
    p.num_blocks = s.min_block_id + used + s.spare_blocks;
    p.scale = s.scale > 0.f ? s.scale : 1.f / std::sqrt(float(s.head_size));
    // Block ids: a random permutation of [min_block_id, min_block_id + used + spare); table slots past a
    // sequence's blocks hold a valid but unrelated id.
    const std::vector<int> ids = paged_decode::shuffled_block_ids(std::size_t(used + s.spare_blocks), int(s.min_block_id), seed);
    p.block_tables.assign(std::size_t(p.num_seqs) * p.max_blocks_per_seq, ids.back());
    std::size_t next = 0;
    for (int q = 0; q < p.num_seqs; ++q)
    {
      const int first_visible = pagedattn::window_first_visible(s.seq_lens[q], pagedattn::rows_window_left(s.window_left, s.q_len));
      for (int b = 0; b < s.blocks_of(q); ++b)
      {
        const bool before_window = (b + 1) * s.block_size <= first_visible; // never to be read
        p.block_tables[std::size_t(q) * p.max_blocks_per_seq + b] = before_window ? (b % 2 ? -1 : INT_MAX) : ids[next];
        ++next;
      }
    }
    p.query.resize(std::size_t(s.total_rows()) * s.num_heads * s.head_size);
    for (std::size_t i = 0; i < p.query.size(); ++i) { p.query[i] = p.data.template query<T>(i); }
    if (s.alibi)
    {
      for (int h = 0; h < s.num_heads; ++h) { p.alibi.push_back(-std::pow(2.f, -8.f * (h + 1) / s.num_heads)); }
    }
    return p;
  }

  /// Packs each used block on the host (NaN in the slots past the sequence's end, and in the gaps that
  /// strides leave) and copies it to its id.
  void upload_cache()
  {
    const auto& s = prob.shape;
    const paged_decode::CacheLayout<KvT> layout = s.template layout<KvT>();
    const std::size_t block_elements = layout.block_elements();
    const std::size_t bytes = std::size_t(prob.num_blocks) * block_elements * sizeof(KvT);
    CUDA_CHECK(cudaMalloc(&d_key, bytes));
    CUDA_CHECK(cudaMalloc(&d_value, bytes));
    if (s.min_block_id == 0)
    {
      CUDA_CHECK(cudaMemset(d_key, 0xFF, bytes)); // NaN everywhere a sequence's token does not live (fp8 too)
      CUDA_CHECK(cudaMemset(d_value, 0xFF, bytes));
    }
    const KvT nan = pagedattn::ElementTraits<KvT>::from_float(std::nanf(""));
    std::vector<KvT> key_block(block_elements, nan), value_block(block_elements, nan);
    for (int q = 0; q < prob.num_seqs; ++q)
    {
      const int len = s.seq_lens[q];
      for (int b = 0; b < s.blocks_of(q); ++b)
      {
        for (int kvh = 0; kvh < s.num_kv_heads; ++kvh)
        {
          for (int t = 0; t < s.block_size; ++t)
          {
            const std::int64_t pos = std::int64_t(b) * s.block_size + t;
            for (int d = 0; d < s.head_size; ++d)
            {
              const bool live = pos < len;
              key_block[layout.key_offset(0, kvh, d, t)] = live ? prob.data.template key<KvT>(q, pos, kvh, d) : nan;
              value_block[layout.value_offset(0, kvh, d, t)] = live ? prob.data.template value<KvT>(q, pos, kvh, d) : nan;
            }
          }
        }
        const int id = prob.block_tables[std::size_t(q) * prob.max_blocks_per_seq + b];
        if (id < 0 || id >= prob.num_blocks) { continue; } // a block before the window (DecodeShape::window_left)
        const std::size_t offset = std::size_t(id) * block_elements;
        CUDA_CHECK(cudaMemcpy(d_key + offset, key_block.data(), block_elements * sizeof(KvT), cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(d_value + offset, value_block.data(), block_elements * sizeof(KvT), cudaMemcpyHostToDevice));
      }
    }
  }

  /// The arguments (with an output epilogue of type Epilogue when given one).
  template <class Epilogue = pagedattn::IdentityOutputEpilogue>
  pagedattn::DecodeArguments<T, KvT, Epilogue> arguments(const Epilogue& epilogue = {})
  {
    const auto& s = prob.shape;
    pagedattn::DecodeArguments<T, KvT, Epilogue> a;
    a.output_epilogue = epilogue;
    a.output = output.get();
    a.query = query.get();
    a.key_cache = d_key;
    a.value_cache = d_value;
    a.num_blocks = prob.num_blocks;
    a.block_tables = block_tables.get();
    a.max_blocks_per_seq = prob.max_blocks_per_seq;
    a.seq_lens = seq_lens.get();
    a.num_seqs = prob.num_seqs;
    a.max_seq_len = prob.max_seq_len;
    a.num_heads = s.num_heads;
    a.num_kv_heads = s.num_kv_heads;
    a.head_size = s.head_size;
    a.block_size = s.block_size;
    a.scale = prob.scale;
    a.alibi_slopes = s.alibi ? alibi.get() : nullptr;
    a.logit_softcap = s.softcap;
    a.sinks = s.sinks ? sinks.get() : nullptr;
    a.window_left = s.window_left;
    a.q_len = s.q_len;
    if (!s.query_rows.empty())
    {
      a.query_start_loc = query_start_loc.get();
      a.num_query_rows = s.total_rows();
    }
    a.error_count = error_count.get();
    a.partition_tokens = s.partition_tokens;
    s.template layout<KvT>().describe(a);
    if constexpr (fp8)
    {
      a.k_scale = d_k_scales.get();
      a.v_scale = d_v_scales.get();
      a.scale_head_stride = s.scale_head_stride;
    }
    return a;
  }

  /// Poison the output, run Decode (sizing and allocating temp storage), return the output.
  /// Layouts: the cache layouts instantiated (vLLM's only unless a test asks: half the tensor-core kernels).
  /// QueryRowForms: uniform query rows unless a test of query offsets asks (PerSequenceQueryRows).
  template <class PolicyChain = pagedattn::DefaultPagedAttentionPolicies, class HeadDims = pagedattn::SupportedHeadDims,
            class Layouts = pagedattn::VllmCacheLayout, class QueryRowForms = pagedattn::UniformQueryRows,
            class Epilogue = pagedattn::IdentityOutputEpilogue>
  std::vector<T> run(cudaStream_t stream = 0, const Epilogue& epilogue = {})
  {
    const auto a = arguments(epilogue);
    std::size_t bytes = 0;
    {
      const cudaError_t sized = pagedattn::DevicePagedAttention::Decode<PolicyChain, HeadDims, Layouts, QueryRowForms>(nullptr, bytes, a);
      INFO(pagedattn::last_error_message());
      REQUIRE(sized == cudaSuccess);
    }
    DeviceBuffer<char> temp(bytes);
    output.poison();
    const cudaError_t err = pagedattn::DevicePagedAttention::Decode<PolicyChain, HeadDims, Layouts, QueryRowForms>(temp.get(), bytes, a, stream);
    INFO(pagedattn::last_error_message());
    REQUIRE(err == cudaSuccess);
    CUDA_CHECK_LAUNCH();
    return output.download();
  }

  /// run() of a shape with query_rows (query offsets): the kernels of per-sequence query rows, every head size.
  std::vector<T> run_per_sequence(cudaStream_t stream = 0)
  {
    return run<pagedattn::DefaultPagedAttentionPolicies, pagedattn::SupportedHeadDims, pagedattn::VllmCacheLayout, pagedattn::PerSequenceQueryRows>(stream);
  }

  /// fp64 reference of one (sequence, head), of new token i of the sequence (DecodeShape::q_len).
  std::vector<double> reference(int q, int h, int i = 0) const
  {
    const auto& s = prob.shape;
    const int kv_head = h / (s.num_heads / s.num_kv_heads);
    return paged_decode::reference_attention<T, KvT>(prob.data, q, h, s.q_len == 1 ? s.seq_lens[q] : s.row_len(q, i), prob.scale,
                                                     s.alibi ? prob.alibi[h] : 0.0, k_scale_of(kv_head), v_scale_of(kv_head), s.softcap,
                                                     s.sinks ? s.sink_of(h) : -INFINITY, s.window_left, s.first_row_of(q) + i);
  }

  /// Heads checked for sequence q (all, or the first and last reference_heads/2 of them).
  std::vector<int> checked_heads() const
  {
    const auto& s = prob.shape;
    std::vector<int> heads;
    if (s.reference_heads < 0 || s.reference_heads >= s.num_heads)
    {
      for (int h = 0; h < s.num_heads; ++h) { heads.push_back(h); }
    }
    else
    {
      for (int i = 0; i < s.reference_heads; ++i) { heads.push_back(i % 2 ? s.num_heads - 1 - i / 2 : i / 2); }
    }
    return heads;
  }

  /// Worst relative L2 error over the checked (sequence, new token, head) rows; rows that see nothing must be 0.
  double worst_error(const std::vector<T>& out) const
  {
    const auto& s = prob.shape;
    double worst = 0;
    std::vector<std::array<int, 3>> work; // (sequence, new token, head)
    for (int q = 0; q < prob.num_seqs; ++q)
    {
      for (int i = 0; i < s.rows_of(q); ++i)
      {
        for (int h : checked_heads()) { work.push_back({q, i, h}); }
      }
    }
    std::vector<double> errs(work.size());
    // The reference is the slow part for long sequences: spread it over the host's cores.
    const unsigned threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    for (unsigned w = 0; w < threads; ++w)
    {
      pool.emplace_back([&, w] {
        for (std::size_t i = w; i < work.size(); i += threads)
        {
          const auto [q, token, h] = work[i];
          const auto ref = reference(q, h, token);
          std::vector<float> got(s.head_size);
          for (int d = 0; d < s.head_size; ++d)
          {
            got[d] = pagedattn::ElementTraits<T>::to_float(out[((std::size_t(s.first_row_of(q)) + token) * s.num_heads + h) * s.head_size + d]);
          }
          if (s.seq_lens[q] >= 0 && s.row_len(q, token) == 0) // nothing seen (an empty sequence, a new token before it)
          {
            errs[i] = std::all_of(got.begin(), got.end(), [](float v) { return v == 0.f; }) ? 0.0 : INFINITY;
          }
          else { errs[i] = relative_l2_error(got, ref); }
        }
      });
    }
    for (auto& t : pool) { t.join(); }
    for (double e : errs) { worst = std::max(worst, std::isnan(e) ? INFINITY : e); }
    return worst;
  }
};

/// "1, 0, 4": a list of numbers for a test's message.
inline std::string joined(const std::vector<int>& v)
{
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) { s += (i ? ", " : "") + std::to_string(v[i]); }
  return s;
}

/// Print a measured error, and append it to $PAGEDATTN_TEST_REPORT when set (the device run collects
/// the per-dtype worst errors from there).
inline void report(const char* what, const char* dtype, double error)
{
  std::printf("[%s] %s: worst relative L2 error %.3g\n", dtype, what, error);
  if (const char* path = std::getenv("PAGEDATTN_TEST_REPORT"))
  {
    if (FILE* f = std::fopen(path, "a"))
    {
      std::fprintf(f, "%s %s %.6g\n", dtype, what, error);
      std::fclose(f);
    }
  }
}

template <class T>
double tolerance() { return std::is_same_v<T, __nv_bfloat16> ? 1e-2 : 2e-3; }

/// The report's dtype: "fp16", or "fp16/fp8_e4m3" for an fp8 cache.
template <class KvT>
std::string fp8_suffix(const char* query_type)
{
  return pagedattn::is_fp8<KvT> ? std::string(query_type) + "/" + pagedattn::ElementTraits<KvT>::name : std::string(query_type);
}

template <class T>
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b)
{
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

/// DevicePagedAttention::Decode with every head size and vLLM's cache layout only (the tests of other
/// layouts instantiate theirs: each set of layouts is a set of kernels to compile), uniform query rows unless
/// a test of query offsets asks.
template <class QueryRowForms = pagedattn::UniformQueryRows, class T, class KvT>
cudaError_t decode_vllm(void* temp, std::size_t& bytes, const pagedattn::DecodeArguments<T, KvT>& a, cudaStream_t stream = 0)
{
  return pagedattn::DevicePagedAttention::Decode<pagedattn::DefaultPagedAttentionPolicies, pagedattn::SupportedHeadDims,
                                                 pagedattn::VllmCacheLayout, QueryRowForms>(temp, bytes, a, stream);
}

/// A batch for the decode variants on one more path: one token, a partition's worth, an empty sequence and
/// several combine groups, 24/4 heads, logits of tens (scale 0.5) soft-capped at 1.5 (so that no output is
/// tiny: see the sinks' note in decode_cases_each_type.cuh) and sinks -inf, 0.5, 2, 4; ALiBi when asked;
/// a sliding window of window_left + 1 positions (one that cuts through the blocks of 16 tokens) when >= 0;
/// q_len new tokens per sequence.
inline DecodeShape variants_shape(int head_size, bool alibi, int window_left = -1, int q_len = 1)
{
  DecodeShape s{{1, 700, 0, 5003}, /*num_heads=*/24, /*num_kv_heads=*/4, head_size};
  s.softcap = 1.5f;
  s.sinks = true;
  s.scale = 0.5f;
  s.alibi = alibi;
  s.window_left = window_left;
  s.q_len = q_len;
  return s;
}

/// The output epilogue of the tests: each element times sigmoid(gate) at its place of a [num_seqs * q_len]
/// [num_heads][head_size] float tensor (Qwen3.6's gated attention output, examples/gated_output.cu).
struct SigmoidGateEpilogue {
  const float* gate;
  int num_heads, head_size;
  __device__ float operator()(float value, int seq, int head, int dim) const
  {
    return value / (1.f + __expf(-gate[(std::size_t(seq) * num_heads + head) * head_size + dim]));
  }
};

/// Run a shape with SigmoidGateEpilogue (gates in [-4, 4]) and require the worst error against the fp64
/// reference times sigmoid(gate) under the dtype's tolerance; an empty sequence's output stays 0.
/// HeadDims, Layouts: the instantiations (each epilogue type compiles kernels of its own: keep them few).
template <class T, class PolicyChain, class KvT, class HeadDims, class Layouts = pagedattn::VllmCacheLayout>
double check_decode_with_gate(const DecodeShape& s, std::uint64_t seed)
{
  DeviceDecode<T, KvT> dd(s, seed);
  std::vector<float> gates(std::size_t(dd.prob.num_seqs) * s.q_len * s.num_heads * s.head_size);
  std::mt19937 rng(static_cast<unsigned>(seed));
  std::uniform_real_distribution<float> uniform(-4.f, 4.f);
  for (float& g : gates) { g = uniform(rng); }
  DeviceBuffer<float> d_gates(gates);
  const auto out = dd.template run<PolicyChain, HeadDims, Layouts, pagedattn::UniformQueryRows>(0, SigmoidGateEpilogue{d_gates.get(), s.num_heads, s.head_size});
  double worst = 0;
  for (int row = 0; row < dd.prob.num_seqs * s.q_len; ++row)
  {
    const int q = row / s.q_len, token = row % s.q_len;
    for (int h : dd.checked_heads())
    {
      const std::size_t base = (std::size_t(row) * s.num_heads + h) * s.head_size;
      std::vector<double> ref = dd.reference(q, h, token);
      std::vector<float> got(s.head_size);
      for (int d = 0; d < s.head_size; ++d)
      {
        ref[d] /= 1.0 + std::exp(-double(gates[base + d]));
        got[d] = pagedattn::ElementTraits<T>::to_float(out[base + d]);
      }
      const double err = s.row_len(q, token) == 0 ? (std::all_of(got.begin(), got.end(), [](float v) { return v == 0.f; }) ? 0.0 : INFINITY)
                                            : relative_l2_error(got, ref);
      worst = std::max(worst, std::isnan(err) ? INFINITY : err);
    }
  }
  INFO("gated output: worst rel L2 " << worst);
  REQUIRE(worst < tolerance<T>());
  REQUIRE(dd.error_count.download()[0] == 0u);
  return worst;
}

/// Run one shape and require the worst error under the dtype's tolerance; returns the error.
/// HeadDims: the head sizes to instantiate (fewer compile faster; s.head_size must be one of them).
template <class T, class PolicyChain = pagedattn::DefaultPagedAttentionPolicies, class KvT = T, class HeadDims = pagedattn::SupportedHeadDims,
          class Layouts = pagedattn::VllmCacheLayout, class QueryRowForms = pagedattn::UniformQueryRows>
double check_decode(const DecodeShape& s, std::uint64_t seed)
{
  DeviceDecode<T, KvT> dd(s, seed);
  const auto out = dd.template run<PolicyChain, HeadDims, Layouts, QueryRowForms>();
  const double err = dd.worst_error(out);
  INFO(pagedattn::ElementTraits<T>::name << "/" << pagedattn::ElementTraits<KvT>::name << " heads " << s.num_heads << "/" << s.num_kv_heads << " head_size " << s.head_size
                                         << " block " << s.block_size << " alibi " << s.alibi << " layout " << int(s.cache_layout)
                                         << " strides " << s.cache_block_stride << "/" << s.cache_head_stride << "/" << s.cache_token_stride
                                         << " seqs " << s.seq_lens.size()
                                         << " max_len " << dd.prob.max_seq_len << ": worst rel L2 " << err);
  REQUIRE(err < tolerance<T>());
  const std::string dtype = fp8_suffix<KvT>(pagedattn::ElementTraits<T>::name);
  report(s.seq_lens.size() == 1 ? ("single sequence of " + std::to_string(s.seq_lens[0])).c_str() : "batch", dtype.c_str(), err);
  unsigned errors = 0;
  CUDA_CHECK(cudaMemcpy(&errors, dd.error_count.get(), sizeof(unsigned), cudaMemcpyDeviceToHost));
  REQUIRE(errors == 0);
  return err;
}

/// The lengths the issue asks for (1M and 100K are separate, larger tests).
inline std::vector<int> matrix_lengths()
{
  if (reduced_matrix()) { return {1, 17, 513, 0}; }
  return {1, 15, 16, 17, 511, 512, 513, 1000, 4097, 0, 300};
}

/// Every head size x block size, GQA ratios cycling through 1, 4, 6, 8 (and ALiBi on and off), each a
/// mixed-length batch; prints the worst error of the dtype.
template <class T, class PolicyChain = pagedattn::DefaultPagedAttentionPolicies>
void run_matrix(std::uint64_t seed)
{
  const int ratios[] = {1, 4, 6, 8};
  int combo = 0;
  double worst = 0;
  for (int head_size : {64, 80, 96, 112, 120, 128, 192, 256})
  {
    for (int block_size : {8, 16, 32})
    {
      if (reduced_matrix() && combo % 5 != 0) { ++combo; continue; }
      DecodeShape s;
      s.head_size = head_size;
      s.block_size = block_size;
      s.num_kv_heads = 2;
      s.num_heads = 2 * ratios[combo % 4];
      s.alibi = (combo / 4) % 2 == 1;
      s.seq_lens = matrix_lengths();
      s.partition_tokens = (combo % 3 == 0) ? 0 : (combo % 3 == 1) ? 512 : 64; // automatic, the seeds' size, small
      worst = std::max(worst, check_decode<T, PolicyChain>(s, seed + combo));
      ++combo;
    }
  }
  report("matrix", pagedattn::ElementTraits<T>::name, worst);
}

/// Every head size of HeadDims (the kernels instantiated) x block size of one query type and fp8 format,
/// GQA ratios cycling through 1, 6, 8, 16, ALiBi on every other one, scales per KV head or shared,
/// mixed-length batches.
template <class T, class KvT, int... HeadSizes>
void run_fp8_matrix(std::uint64_t seed, std::integer_sequence<int, HeadSizes...>)
{
  using HeadDims = std::integer_sequence<int, HeadSizes...>;
  const int ratios[] = {1, 6, 8, 16};
  int combo = 0;
  double worst = 0;
  for (int head_size : {HeadSizes...})
  {
    // A key of one-byte elements that is not whole 16-byte vectors (head 120) is refused, not decoded (the
    // emulated host test checks the refusal); the other heads keep their combos.
    if (!pagedattn::head_is_whole_vectors<KvT>(head_size)) { continue; }
    for (int block_size : {8, 16, 32})
    {
      if (reduced_matrix() && combo % 5 != 0) { ++combo; continue; }
      DecodeShape s;
      s.head_size = head_size;
      s.block_size = block_size;
      s.num_kv_heads = 2;
      s.num_heads = 2 * ratios[combo % 4];
      s.alibi = combo % 2 == 1;
      s.scale_head_stride = (combo / 2) % 2; // shared, then per KV head
      s.seq_lens = matrix_lengths();
      s.partition_tokens = (combo % 3 == 0) ? 0 : (combo % 3 == 1) ? 512 : 64;
      worst = std::max(worst, check_decode<T, pagedattn::DefaultPagedAttentionPolicies, KvT, HeadDims>(s, seed + combo));
      ++combo;
    }
  }
  report("matrix", fp8_suffix<KvT>(pagedattn::ElementTraits<T>::name).c_str(), worst);
}

} // namespace test
