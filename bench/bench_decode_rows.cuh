#pragma once
// bench_decode's rows, options and JSON (see bench_decode.cu): run<T, KvT, Policies> runs every row of one query
// and cache type under one policy chain. Each translation unit of the program instantiates the ones it runs
// (bench_decode.cu the 16-bit and fp32 caches, parts/bench_decode_fp8.cu the fp8 ones, parts/bench_decode_biv100.cu
// the BI-V100 policy's), so the build compiles them side by side.
#include <pagedattn/device/device_paged_attention.cuh>

#include "../examples/support/paged_decode_problem.cuh"
#include "bench_batches.cuh"
#include "bench_json.cuh"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <cstdio>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace bench_decode {

using HeadDims = std::integer_sequence<int, 120, 128, 256>; ///< every head size of the rows below
/// --policy default: each architecture's own policy.
using DefaultPolicies = pagedattn::DefaultPagedAttentionPolicies;
/// --policy biv100: the BI-V100 policy's CUDA-core tile on this GPU, at its 32-lane warps (BI-V100 runs it at 64).
using BIV100Policies = pagedattn::SinglePolicyChain<pagedattn::PagedAttentionPolicyBIV100>;
/// Whether a run has the rows with query offsets (ServingShape::query_rows): fp16 with the default policies
/// only, the run that reports them; the other runs instantiate uniform query rows alone (half the kernels).
template <class T, class KvT, class Policies>
inline constexpr bool has_offsets_rows = std::is_same_v<T, __half> && std::is_same_v<KvT, __half> && std::is_same_v<Policies, DefaultPolicies>;
/// Decode as the benchmark calls it: the head sizes of the rows, every layout, the run's query rows.
template <class Policies, class QueryRowForms = pagedattn::UniformQueryRows, class T, class KvT>
cudaError_t decode_call(void* temp, std::size_t& bytes, const pagedattn::DecodeArguments<T, KvT>& a, cudaStream_t stream = 0)
{
  return pagedattn::DevicePagedAttention::Decode<Policies, HeadDims, pagedattn::SupportedCacheLayouts, QueryRowForms>(temp, bytes, a, stream);
}

struct BenchShape {
  int num_seqs, seq_len, num_heads, num_kv_heads, head_dim;
  int window = 0; ///< a sliding window of this many positions (DecodeArguments::window_left = window - 1); 0: none
  int q_len = 1;  ///< new tokens per sequence
};

// Qwen3.6 (24/4, head 256) over batch x length, heads 128 and 120 with the same heads (120 carried in a
// 128-wide tile: its time should be 120/128 of 128's), a 32/8 model (head 128),
// and two latency-bound steps (a short sequence, and a length just past a partition boundary); a
// 4096-token window over 100000 tokens against a 4096-token sequence (the window's time should
// be the window's); four new tokens per sequence (speculative decoding: the cache read once for
// the 24 rows of a KV head) over 1 x 100000 and 64 x 4096.
const BenchShape shapes[] = {
    {1, 100000, 24, 4, 256}, {1, 16384, 24, 4, 256}, {8, 32768, 24, 4, 256}, {32, 8192, 24, 4, 256},
    {64, 4096, 24, 4, 256},  {256, 1024, 24, 4, 256}, {1, 100000, 24, 4, 128}, {64, 4096, 24, 4, 128},
    {1, 100000, 32, 8, 128}, {64, 4096, 32, 8, 128},  {1, 1000, 24, 4, 256},   {4, 2049, 24, 4, 256},
    {256, 1024, 24, 4, 128}, {1, 1000, 24, 4, 128},   {1, 4096, 24, 4, 256},   {1, 100000, 24, 4, 256, 4096},
    {1, 100000, 24, 4, 256, 0, 4}, {64, 4096, 24, 4, 256, 0, 4}, {1, 100000, 24, 4, 120}, {64, 4096, 24, 4, 120},
};
constexpr int block_size = 16;
constexpr int reference_pairs = 4;

struct Options {
  std::string json, commit = "unknown", dtype = "fp16", layout = "vllm", policy = "default";
  bool quick = false;
  std::vector<std::string> only; ///< --shape: the rows to run (all when empty)
};

/// A serving batch of Qwen3.6 (24/4 heads, head 256): each sequence's length in a cache of `bound` tokens
/// per sequence, launched with max_seq_len = bound. A graph row captures one launch and times its
/// replays, against a fresh launch with max_seq_len at the true maximum.
struct ServingShape {
  std::string name;
  std::vector<int> lens;
  int bound; ///< max_seq_len: the longest length, or the bound a graph was captured under
  bool graph;
  std::vector<int> query_rows = {}; ///< each sequence's new tokens (query_start_loc; q_len their most); empty: one each
};

/// Draft lengths 0 .. `most` in turn (speculative decoding with per-request proposals; 0: speculation off and
/// the token already verified, nothing to compute).
inline std::vector<int> cycling_rows(int n, int most)
{
  std::vector<int> rows;
  for (int i = 0; i < n; ++i) { rows.push_back(i % (most + 1)); }
  return rows;
}
/// `first` for the first sequence, then `a` and `b` in turn.
inline std::vector<int> mixed_rows(int n, int first, int a, int b)
{
  std::vector<int> rows{first};
  for (int i = 1; i < n; ++i) { rows.push_back(i % 2 ? a : b); }
  return rows;
}

using bench_batches::log_uniform_lengths;
using bench_batches::skewed_lengths;

inline std::vector<ServingShape> serving_shapes()
{
  return {
      {"1x32768+63x100", skewed_lengths(32768, 63, 100), 32768, false},
      {"1x100000+63x512", skewed_lengths(100000, 63, 512), 100000, false},
      {"64xlog100-100000", log_uniform_lengths(64, 100, 100000, 64), 100000, false},
      {"256xlog16-8192", log_uniform_lengths(256, 16, 8192, 256), 8192, false},
      {"graph:1x1000@65536", std::vector<int>(1, 1000), 65536, true},
      {"graph:64x1000@65536", std::vector<int>(64, 1000), 65536, true},
      {"graph:32x1000@8192", std::vector<int>(32, 1000), 8192, true},
      {"graph:32x1000@131072", std::vector<int>(32, 1000), 131072, true},
      // The skewed and log-uniform batches replayed from a graph captured at their own bound: the
      // persistent grid's schedule of the same work as the fresh rows above.
      {"graph:1x32768+63x100@32768", skewed_lengths(32768, 63, 100), 32768, true},
      {"graph:1x100000+63x512@100000", skewed_lengths(100000, 63, 512), 100000, true},
      {"graph:64xlog100-100000@100000", log_uniform_lengths(64, 100, 100000, 64), 100000, true},
      {"graph:256xlog16-8192@8192", log_uniform_lengths(256, 16, 8192, 256), 8192, true},
      // Uniform batches replayed from a graph captured at their own length: the persistent grid against
      // the fresh launch's grid of one block per item.
      {"graph:64x4096@4096", std::vector<int>(64, 4096), 4096, true},
      {"graph:256x1024@1024", std::vector<int>(256, 1024), 1024, true},
      {"graph:1x100000@100000", std::vector<int>(1, 100000), 100000, true},
      // Each sequence its own new tokens in one launch (query_start_loc), against one launch per distinct
      // count (split_us) and the bytes alone at the read bandwidth (bytes_us).
      {"64x4096+rows0-4", std::vector<int>(64, 4096), 4096, false, cycling_rows(64, 4)},
      {"1x100000+15x8192+rows4/1", skewed_lengths(100000, 15, 8192), 100000, false, mixed_rows(16, 4, 1, 4)},
      // The same bound with short sequences: the grid of a block per item of the bound, mostly without one.
      {"1x100000+15x100+rows4/1", skewed_lengths(100000, 15, 100), 100000, false, mixed_rows(16, 4, 1, 4)},
  };
}

struct Row {
  BenchShape shape; ///< a serving row: num_seqs, its longest length, the heads
  double median_us, hot_us, bytes, gbps, pct_copy, rel_err;
  bool ok;
  std::uint64_t output_fnv1a; ///< FNV-1a of the output's bytes: equal across builds iff the bits are
  std::string serving_name;   ///< a serving row's name (empty: a row of the uniform table)
  double fresh_us = std::numeric_limits<double>::quiet_NaN(); ///< graph rows: a fresh launch at the true maximum
  double pct_read = std::numeric_limits<double>::quiet_NaN(); ///< of the read bandwidth measured in the same run
  double split_us = std::numeric_limits<double>::quiet_NaN(); ///< per-sequence rows: one launch per distinct count
};

/// 64-bit FNV-1a of a buffer's bytes (the output fingerprint that shows two builds give the same bits).
template <class T>
std::uint64_t fnv1a(const std::vector<T>& v)
{
  std::uint64_t h = 0xcbf29ce484222325ull;
  const unsigned char* p = reinterpret_cast<const unsigned char*>(v.data());
  for (std::size_t i = 0; i < v.size() * sizeof(T); ++i) { h = (h ^ p[i]) * 0x100000001b3ull; }
  return h;
}

[[noreturn]] inline void usage(const char* argv0)
{
  std::fprintf(stderr,
               "usage: %s --json PATH --commit SHA [--dtype fp16|bf16|fp32|fp16/fp8_e4m3|fp16/fp8_e5m2|bf16/fp8_e4m3] [--layout vllm|hnd|nhd] "
               "[--policy default|biv100 (biv100: fp16 only)] [--quick] [--shape SEQSxLEN@HEADS/KV_HEADS/HEAD]...\n",
               argv0);
  std::exit(2);
}

inline Options parse(int argc, char** argv)
{
  Options o;
  for (int i = 1; i < argc; ++i)
  {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--json" && has_value) { o.json = argv[++i]; }
    else if (a == "--commit" && has_value) { o.commit = argv[++i]; }
    else if (a == "--dtype" && has_value) { o.dtype = argv[++i]; }
    else if (a == "--layout" && has_value) { o.layout = argv[++i]; }
    else if (a == "--policy" && has_value) { o.policy = argv[++i]; }
    else if (a == "--quick") { o.quick = true; }
    else if (a == "--shape" && has_value) { o.only.push_back(argv[++i]); }
    else { usage(argv[0]); }
  }
  const char* dtypes[] = {"fp16", "bf16", "fp32", "fp16/fp8_e4m3", "fp16/fp8_e5m2", "bf16/fp8_e4m3"};
  if (o.json.empty() || std::none_of(std::begin(dtypes), std::end(dtypes), [&](const char* d) { return o.dtype == d; })) { usage(argv[0]); }
  if (o.layout != "vllm" && o.layout != "hnd" && o.layout != "nhd") { usage(argv[0]); }
  // The BI-V100 policy's rows are instantiated for fp16 only (parts/bench_decode_biv100.cu).
  if (o.policy != "default" && !(o.policy == "biv100" && o.dtype == "fp16")) { usage(argv[0]); }
  return o;
}

template <class T, class KvT, class Policies>
Row run_shape(const BenchShape& b, pagedattn::CacheLayout layout, int launches, double copy_gbps, const paged_decode::L2Flush& flush,
              cudaStream_t stream)
{
  const paged_decode::DecodeShape shape{b.num_seqs, b.seq_len, b.num_heads, b.num_kv_heads, b.head_dim, block_size, layout, b.q_len};
  paged_decode::PagedDecodeProblem<T, KvT> problem(shape, /*seed=*/20261129);
  problem.set_window_left(b.window - 1);
  const pagedattn::DecodeArguments<T, KvT> args = problem.arguments();
  std::size_t temp_bytes = 0;
  PAGEDATTN_CHECK((decode_call<Policies>(nullptr, temp_bytes, args)));
  paged_decode::DeviceArray<char> temp(temp_bytes);
  auto decode = [&] {
    PAGEDATTN_CHECK((decode_call<Policies>(temp.get(), temp_bytes, args, stream)));
  };

  decode(); // the output starts as NaN: this launch's result is the one checked
  PAGEDATTN_CHECK(cudaStreamSynchronize(stream));
  const std::vector<T> output = problem.download_output();
  const double rel_err = problem.max_relative_error(output, problem.sample_pairs(reference_pairs));
  const double tolerance = std::is_same_v<T, __nv_bfloat16> ? 1e-2 : 2e-3;

  Row r{b, 0, 0, problem.bytes_moved(), 0, 0, rel_err, rel_err < tolerance, fnv1a(output)};
  r.median_us = paged_decode::median_launch_us(decode, launches, stream, &flush);
  r.hot_us = paged_decode::median_hot_us(decode, launches, stream);
  r.gbps = r.bytes / (r.median_us * 1e3);
  r.pct_copy = 100.0 * r.gbps / copy_gbps;
  return r;
}

/// A batch of per-sequence new tokens launched as it is done without query offsets: one launch per distinct
/// count n over the sequences with n (their block table rows and lengths gathered; q_len n, max_seq_len their
/// longest), back to back. The median of the launches together (the L2 flushed once before them).
template <class T, class KvT, class Policies>
double split_launches_us(const paged_decode::PagedDecodeProblem<T, KvT>& problem, const pagedattn::DecodeArguments<T, KvT>& with_offsets,
                         const ServingShape& sh, std::uint64_t seed, int launches, const paged_decode::L2Flush& flush, cudaStream_t stream)
{
  const paged_decode::DecodeShape& shape = problem.shape();
  const std::vector<int> tables = paged_decode::scattered_block_tables(shape, seed);
  const int per_seq = shape.blocks_per_seq();
  std::vector<std::unique_ptr<paged_decode::DeviceArray<int>>> keep; // each split's tables and lengths
  std::vector<pagedattn::DecodeArguments<T, KvT>> splits;
  std::size_t temp_bytes = 0;
  for (int n = 1; n <= shape.q_len; ++n)
  {
    std::vector<int> split_tables, split_lens;
    for (int q = 0; q < shape.num_seqs; ++q)
    {
      if (sh.query_rows[std::size_t(q)] != n) { continue; }
      split_tables.insert(split_tables.end(), tables.begin() + std::ptrdiff_t(q) * per_seq, tables.begin() + std::ptrdiff_t(q + 1) * per_seq);
      split_lens.push_back(sh.lens[std::size_t(q)]);
    }
    if (split_lens.empty()) { continue; }
    keep.push_back(std::make_unique<paged_decode::DeviceArray<int>>(split_tables.size()));
    keep.back()->upload(split_tables);
    pagedattn::DecodeArguments<T, KvT> a = with_offsets;
    a.block_tables = keep.back()->get();
    keep.push_back(std::make_unique<paged_decode::DeviceArray<int>>(split_lens.size()));
    keep.back()->upload(split_lens);
    a.seq_lens = keep.back()->get();
    a.num_seqs = int(split_lens.size());
    a.max_seq_len = *std::max_element(split_lens.begin(), split_lens.end());
    a.q_len = n;
    a.query_start_loc = nullptr;
    a.num_query_rows = 0;
    std::size_t bytes = 0;
    PAGEDATTN_CHECK((decode_call<Policies>(nullptr, bytes, a)));
    temp_bytes = std::max(temp_bytes, bytes);
    splits.push_back(a);
  }
  paged_decode::DeviceArray<char> temp(temp_bytes);
  auto launch_splits = [&] {
    for (const auto& a : splits)
    {
      std::size_t bytes = temp_bytes;
      PAGEDATTN_CHECK((decode_call<Policies>(temp.get(), bytes, a, stream)));
    }
  };
  return paged_decode::median_launch_us(launch_splits, launches, stream, &flush);
}

/// A serving row: the batch in a cache of `bound` tokens per sequence; a graph row's median is the replay's.
template <class T, class KvT, class Policies>
Row run_serving(const ServingShape& sh, pagedattn::CacheLayout layout, int launches, double copy_gbps, const paged_decode::L2Flush& flush,
                cudaStream_t stream)
{
  using Q = std::conditional_t<has_offsets_rows<T, KvT, Policies>, pagedattn::SupportedQueryRows, pagedattn::UniformQueryRows>;
  const int longest = *std::max_element(sh.lens.begin(), sh.lens.end());
  const int most_rows = sh.query_rows.empty() ? 1 : *std::max_element(sh.query_rows.begin(), sh.query_rows.end());
  const paged_decode::DecodeShape shape{int(sh.lens.size()), sh.bound, 24, 4, 256, block_size, layout, most_rows};
  const std::uint64_t seed = 20261201;
  paged_decode::PagedDecodeProblem<T, KvT> problem(shape, seed);
  problem.set_seq_lens(sh.lens);
  if (!sh.query_rows.empty()) { problem.set_query_rows(sh.query_rows); }
  pagedattn::DecodeArguments<T, KvT> args = problem.arguments(); // max_seq_len = the bound
  pagedattn::DecodeArguments<T, KvT> fresh_args = args;
  fresh_args.max_seq_len = longest;
  std::size_t temp_bytes = 0, fresh_bytes = 0;
  PAGEDATTN_CHECK((decode_call<Policies, Q>(nullptr, temp_bytes, args)));
  PAGEDATTN_CHECK((decode_call<Policies, Q>(nullptr, fresh_bytes, fresh_args)));
  paged_decode::DeviceArray<char> temp(std::max(temp_bytes, fresh_bytes));
  auto fresh = [&] {
    PAGEDATTN_CHECK((decode_call<Policies, Q>(temp.get(), fresh_bytes, fresh_args, stream)));
  };

  cudaGraphExec_t exec = nullptr;
  std::function<void()> decode = fresh;
  if (sh.graph)
  {
    cudaGraph_t graph;
    PAGEDATTN_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    PAGEDATTN_CHECK((decode_call<Policies, Q>(temp.get(), temp_bytes, args, stream)));
    PAGEDATTN_CHECK(cudaStreamEndCapture(stream, &graph));
    PAGEDATTN_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    PAGEDATTN_CHECK(cudaGraphDestroy(graph));
    decode = [&] { PAGEDATTN_CHECK(cudaGraphLaunch(exec, stream)); };
  }

  decode(); // the output starts as NaN: this launch's result is the one checked
  PAGEDATTN_CHECK(cudaStreamSynchronize(stream));
  const std::vector<T> output = problem.download_output();
  const double rel_err = problem.max_relative_error(output, problem.sample_pairs(reference_pairs));
  const double tolerance = std::is_same_v<T, __nv_bfloat16> ? 1e-2 : 2e-3;

  Row r{{shape.num_seqs, longest, shape.num_heads, shape.num_kv_heads, shape.head_size, 0, most_rows}, 0, 0, problem.bytes_moved(), 0, 0,
        rel_err, rel_err < tolerance, fnv1a(output), sh.name};
  r.median_us = paged_decode::median_launch_us(decode, launches, stream, &flush);
  r.hot_us = paged_decode::median_hot_us(decode, launches, stream);
  if (sh.graph)
  {
    r.fresh_us = paged_decode::median_launch_us(fresh, launches, stream, &flush);
    PAGEDATTN_CHECK(cudaGraphExecDestroy(exec));
  }
  if (!sh.query_rows.empty()) { r.split_us = split_launches_us<T, KvT, Policies>(problem, fresh_args, sh, seed, launches, flush, stream); }
  r.gbps = r.bytes / (r.median_us * 1e3);
  r.pct_copy = 100.0 * r.gbps / copy_gbps;
  return r;
}

inline pagedattn::CacheLayout layout_of(const Options& o)
{
  return o.layout == "hnd" ? pagedattn::CacheLayout::hnd : o.layout == "nhd" ? pagedattn::CacheLayout::nhd : pagedattn::CacheLayout::vllm;
}

/// "64x4096", with a window "1x100000w4096", with four new tokens per sequence "1x100000q4".
inline std::string shape_name(const BenchShape& b)
{
  return std::to_string(b.num_seqs) + "x" + std::to_string(b.seq_len) + (b.window > 0 ? "w" + std::to_string(b.window) : "") +
         (b.q_len > 1 ? "q" + std::to_string(b.q_len) : "");
}
inline std::string row_shape(const Row& r) { return r.serving_name.empty() ? shape_name(r.shape) : r.serving_name; }
inline std::string heads_name(const BenchShape& b) { return std::to_string(b.num_heads) + "/" + std::to_string(b.num_kv_heads); }

inline bool write_json(const Options& o, const char* device, double copy_gbps, double read_gbps, int launches, std::size_t flush_bytes,
                const std::vector<Row>& rows)
{
  FILE* f = std::fopen(o.json.c_str(), "w");
  if (!f) { return false; }
  std::fprintf(f, "{\n \"device\": %s,\n \"commit\": %s,\n \"dtype\": %s,\n \"layout\": %s,\n \"policy\": %s,\n \"copy_gbps\": %s,\n \"read_gbps\": %s,\n",
               bench_json::str(device).c_str(), bench_json::str(o.commit).c_str(), bench_json::str(o.dtype).c_str(), bench_json::str(o.layout).c_str(),
               bench_json::str(o.policy).c_str(), bench_json::num(copy_gbps).c_str(), bench_json::num(read_gbps).c_str());
  std::fprintf(f, " \"read_method\": \"a plain kernel reading a 1 GiB buffer (16-byte loads, four in flight per thread), median of 20 "
                  "launches, the best of 1, 2, 4 and 8 blocks of 512 threads per SM\",\n");
  std::fprintf(f, " \"block_size\": %d,\n \"launches\": %d,\n \"l2_flush_bytes\": %zu,\n", block_size, launches, flush_bytes);
  std::fprintf(f, " \"median_method\": \"median of individually timed launches (cudaEvent pair each), L2 flushed (by reading %zu bytes) before each, flush not timed\",\n", flush_bytes);
  std::fprintf(f, " \"hot_method\": \"median of per-launch cudaEvent intervals over back-to-back launches, no flush\",\n");
  std::fprintf(f, " \"bytes\": \"K+V of every live token once (in the cache's element type) + query + output\",\n \"rows\": [\n");
  for (std::size_t i = 0; i < rows.size(); ++i)
  {
    const Row& r = rows[i];
    std::fprintf(f,
                 "  {\"shape\": \"%s\", \"heads\": \"%s\", \"head_dim\": %d, \"dtype\": %s, \"num_seqs\": %d, \"seq_len\": %d, "
                 "\"q_len\": %d, \"window\": %d, \"layout\": %s, \"policy\": %s, \"median_us\": %s, \"hot_us\": %s, \"bytes\": %.0f, \"gbps\": %s, \"pct_copy\": %s, \"pct_read\": %s, \"rel_err\": %s, \"ok\": %s, "
                 "\"output_fnv1a\": \"%016llx\"%s}%s\n",
                 row_shape(r).c_str(), heads_name(r.shape).c_str(), r.shape.head_dim, bench_json::str(o.dtype).c_str(),
                 r.shape.num_seqs, r.shape.seq_len, r.shape.q_len, r.shape.window, bench_json::str(o.layout).c_str(), bench_json::str(o.policy).c_str(), bench_json::num(r.median_us).c_str(), bench_json::num(r.hot_us).c_str(), r.bytes,
                 bench_json::num(r.gbps).c_str(), bench_json::num(r.pct_copy).c_str(), bench_json::num(r.pct_read).c_str(),
                 bench_json::num(r.rel_err).c_str(),
                 r.ok ? "true" : "false", static_cast<unsigned long long>(r.output_fnv1a),
                 (std::string(std::isnan(r.fresh_us) ? ""
                                                     : ", \"fresh_us\": " + bench_json::num(r.fresh_us) + ", \"ratio_vs_fresh\": " +
                                                           bench_json::num(r.median_us / r.fresh_us)) +
                  (std::isnan(r.split_us) ? ""
                                          : ", \"split_us\": " + bench_json::num(r.split_us) + ", \"ratio_vs_split\": " +
                                                bench_json::num(r.median_us / r.split_us) + ", \"bytes_us\": " +
                                                bench_json::num(r.bytes / (read_gbps * 1e3))))
                     .c_str(),
                 i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, " ]\n}\n");
  return std::fclose(f) == 0;
}

template <class T, class KvT, class Policies = DefaultPolicies>
int run(const Options& o)
{
  cudaDeviceProp prop{};
  PAGEDATTN_CHECK(cudaGetDeviceProperties(&prop, 0));
  const int launches = o.quick ? 10 : 100;
  const double copy_gbps = paged_decode::device_copy_gbps();
  const double read_gbps = paged_decode::device_read_gbps();
  std::printf("%s (%d SMs), commit %s: copy %.0f GB/s (read + write), read %.0f GB/s; %s, layout %s, policy %s, block %d, %d launches per shape\n",
              prop.name, prop.multiProcessorCount, o.commit.c_str(), copy_gbps, read_gbps, o.dtype.c_str(), o.layout.c_str(), o.policy.c_str(),
              block_size, launches);
  std::printf("%-10s %-6s %5s %11s %11s %9s %7s %7s %9s  %-6s  %s\n", "shape", "heads", "head", "median_us", "hot_us", "GB/s", "%copy",
              "%read", "rel_err", "check", "output FNV-1a");

  auto row_name = [](const BenchShape& b) { return shape_name(b) + "@" + heads_name(b) + "/" + std::to_string(b.head_dim); };
  const std::vector<ServingShape> serving = serving_shapes();
  // The rows with query offsets run where they are instantiated (has_offsets_rows): skipped elsewhere, an
  // error where asked for by name.
  auto runs_row = [](const ServingShape& sh) { return sh.query_rows.empty() || has_offsets_rows<T, KvT, Policies>; };
  for (const std::string& wanted : o.only)
  {
    if (std::any_of(serving.begin(), serving.end(), [&](const ServingShape& sh) { return sh.name == wanted && !runs_row(sh); }))
    {
      std::fprintf(stderr, "--shape %s: the rows with query offsets run with --dtype fp16 --policy default only\n", wanted.c_str());
      return 2;
    }
    if (std::none_of(std::begin(shapes), std::end(shapes), [&](const BenchShape& b) { return row_name(b) == wanted; }) &&
        std::none_of(serving.begin(), serving.end(), [&](const ServingShape& sh) { return sh.name == wanted; }))
    {
      std::fprintf(stderr, "--shape %s: no such row (rows are named like 1x16384@24/4/256 or 1x100000+63x512)\n", wanted.c_str());
      return 2;
    }
  }
  auto print_row = [](const Row& r) {
    std::printf("%-10s %-6s %5d %11.1f %11.1f %9.1f %6.1f%% %6.1f%% %9.2e  %-6s  %016llx", row_shape(r).c_str(), heads_name(r.shape).c_str(),
                r.shape.head_dim, r.median_us, r.hot_us, r.gbps, r.pct_copy, r.pct_read, r.rel_err, r.ok ? "ok" : "FAILED",
                static_cast<unsigned long long>(r.output_fnv1a));
    if (!std::isnan(r.fresh_us)) { std::printf("  fresh %.1f us, ratio %.2f", r.fresh_us, r.median_us / r.fresh_us); }
    if (!std::isnan(r.split_us)) { std::printf("  a launch per count %.1f us, ratio %.2f", r.split_us, r.median_us / r.split_us); }
    std::printf("\n");
    std::fflush(stdout);
  };

  const paged_decode::L2Flush flush;
  cudaStream_t stream = nullptr;
  PAGEDATTN_CHECK(cudaStreamCreate(&stream));
  std::vector<Row> rows;
  for (const BenchShape& b : shapes)
  {
    if (!o.only.empty() && std::find(o.only.begin(), o.only.end(), row_name(b)) == o.only.end()) { continue; }
    Row r = run_shape<T, KvT, Policies>(b, layout_of(o), launches, copy_gbps, flush, stream);
    r.pct_read = 100.0 * r.gbps / read_gbps;
    print_row(r);
    rows.push_back(r);
  }
  for (const ServingShape& sh : serving)
  {
    if (!o.only.empty() && std::find(o.only.begin(), o.only.end(), sh.name) == o.only.end()) { continue; }
    if (!runs_row(sh)) { continue; }
    Row r = run_serving<T, KvT, Policies>(sh, layout_of(o), launches, copy_gbps, flush, stream);
    r.pct_read = 100.0 * r.gbps / read_gbps;
    print_row(r);
    rows.push_back(r);
  }
  PAGEDATTN_CHECK(cudaStreamDestroy(stream));

  if (!write_json(o, prop.name, copy_gbps, read_gbps, launches, flush.bytes(), rows))
  {
    std::fprintf(stderr, "cannot write %s\n", o.json.c_str());
    return 1;
  }
  std::printf("wrote %s\n", o.json.c_str());
  for (const Row& r : rows)
  {
    if (!r.ok) { return 1; }
  }
  return 0;
}

} // namespace bench_decode
