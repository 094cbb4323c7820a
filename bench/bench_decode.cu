// Decode benchmark: DevicePagedAttention::Decode over a table of shapes (Qwen3.6 and two other GQA
// configurations, long single sequences, serving batches and latency-bound small steps), each checked
// against an fp64 CPU reference, timed cold (L2 flushed) and hot, and compared with the device's copy
// bandwidth measured in the same run.
//
//   bench_decode --json PATH --commit SHA [--dtype fp16|bf16|fp32] [--quick] [--shape SEQSxLEN@HEADS/KV_HEADS/HEAD]...
//       (--shape: only the rows of the table named, e.g. 1x16384@24/4/256; for profiling one launch)
//
// Exit status: 0 if every row passed its accuracy check, 1 otherwise (the JSON is written either way),
// 2 for bad arguments.
#include <pagedattn/device/device_paged_attention.cuh>

#include "../examples/support/paged_decode_problem.cuh"
#include "bench_json.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using HeadDims = std::integer_sequence<int, 128, 256>;
using Policies = pagedattn::DefaultPagedAttentionPolicies;

struct BenchShape {
  int num_seqs, seq_len, num_heads, num_kv_heads, head_dim;
};

// Qwen3.6 (24/4, head 256) over batch x length, head 128 with the same heads, a 32/8 model (head 128),
// and two latency-bound steps (a short sequence, and a length just past a partition boundary).
const BenchShape shapes[] = {
    {1, 100000, 24, 4, 256}, {1, 16384, 24, 4, 256}, {8, 32768, 24, 4, 256}, {32, 8192, 24, 4, 256},
    {64, 4096, 24, 4, 256},  {256, 1024, 24, 4, 256}, {1, 100000, 24, 4, 128}, {64, 4096, 24, 4, 128},
    {1, 100000, 32, 8, 128}, {64, 4096, 32, 8, 128},  {1, 1000, 24, 4, 256},   {4, 2049, 24, 4, 256},
};
constexpr int block_size = 16;
constexpr int reference_pairs = 4;

struct Options {
  std::string json, commit = "unknown", dtype = "fp16";
  bool quick = false;
  std::vector<std::string> only; ///< --shape: the rows to run (all when empty)
};

struct Row {
  BenchShape shape;
  double median_us, hot_us, bytes, gbps, pct_copy, rel_err;
  bool ok;
  std::uint64_t output_fnv1a; ///< FNV-1a of the output's bytes: equal across builds iff the bits are
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

[[noreturn]] void usage(const char* argv0)
{
  std::fprintf(stderr, "usage: %s --json PATH --commit SHA [--dtype fp16|bf16|fp32] [--quick] [--shape SEQSxLEN@HEADS/KV_HEADS/HEAD]...\n", argv0);
  std::exit(2);
}

Options parse(int argc, char** argv)
{
  Options o;
  for (int i = 1; i < argc; ++i)
  {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--json" && has_value) { o.json = argv[++i]; }
    else if (a == "--commit" && has_value) { o.commit = argv[++i]; }
    else if (a == "--dtype" && has_value) { o.dtype = argv[++i]; }
    else if (a == "--quick") { o.quick = true; }
    else if (a == "--shape" && has_value) { o.only.push_back(argv[++i]); }
    else { usage(argv[0]); }
  }
  if (o.json.empty() || (o.dtype != "fp16" && o.dtype != "bf16" && o.dtype != "fp32")) { usage(argv[0]); }
  return o;
}

template <class T>
Row run_shape(const BenchShape& b, int launches, double copy_gbps, const paged_decode::L2Flush& flush, cudaStream_t stream)
{
  const paged_decode::DecodeShape shape{b.num_seqs, b.seq_len, b.num_heads, b.num_kv_heads, b.head_dim, block_size};
  const paged_decode::PagedDecodeProblem<T> problem(shape, /*seed=*/20261129);
  const pagedattn::DecodeArguments<T> args = problem.arguments();
  std::size_t temp_bytes = 0;
  PAGEDATTN_CHECK((pagedattn::DevicePagedAttention::Decode<Policies, HeadDims>(nullptr, temp_bytes, args)));
  paged_decode::DeviceArray<char> temp(temp_bytes);
  auto decode = [&] {
    PAGEDATTN_CHECK((pagedattn::DevicePagedAttention::Decode<Policies, HeadDims>(temp.get(), temp_bytes, args, stream)));
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

std::string shape_name(const BenchShape& b) { return std::to_string(b.num_seqs) + "x" + std::to_string(b.seq_len); }
std::string heads_name(const BenchShape& b) { return std::to_string(b.num_heads) + "/" + std::to_string(b.num_kv_heads); }

bool write_json(const Options& o, const char* device, double copy_gbps, int launches, std::size_t flush_bytes, const std::vector<Row>& rows)
{
  FILE* f = std::fopen(o.json.c_str(), "w");
  if (!f) { return false; }
  std::fprintf(f, "{\n \"device\": %s,\n \"commit\": %s,\n \"dtype\": %s,\n \"copy_gbps\": %s,\n", bench_json::str(device).c_str(),
               bench_json::str(o.commit).c_str(), bench_json::str(o.dtype).c_str(), bench_json::num(copy_gbps).c_str());
  std::fprintf(f, " \"block_size\": %d,\n \"launches\": %d,\n \"l2_flush_bytes\": %zu,\n", block_size, launches, flush_bytes);
  std::fprintf(f, " \"median_method\": \"median of individually timed launches (cudaEvent pair each), L2 flushed (by reading %zu bytes) before each, flush not timed\",\n", flush_bytes);
  std::fprintf(f, " \"hot_method\": \"median of per-launch cudaEvent intervals over back-to-back launches, no flush\",\n");
  std::fprintf(f, " \"bytes\": \"K+V of every live token once + query + output\",\n \"rows\": [\n");
  for (std::size_t i = 0; i < rows.size(); ++i)
  {
    const Row& r = rows[i];
    std::fprintf(f,
                 "  {\"shape\": \"%s\", \"heads\": \"%s\", \"head_dim\": %d, \"dtype\": %s, \"num_seqs\": %d, \"seq_len\": %d, "
                 "\"median_us\": %s, \"hot_us\": %s, \"bytes\": %.0f, \"gbps\": %s, \"pct_copy\": %s, \"rel_err\": %s, \"ok\": %s, "
                 "\"output_fnv1a\": \"%016llx\"}%s\n",
                 shape_name(r.shape).c_str(), heads_name(r.shape).c_str(), r.shape.head_dim, bench_json::str(o.dtype).c_str(),
                 r.shape.num_seqs, r.shape.seq_len, bench_json::num(r.median_us).c_str(), bench_json::num(r.hot_us).c_str(), r.bytes,
                 bench_json::num(r.gbps).c_str(), bench_json::num(r.pct_copy).c_str(), bench_json::num(r.rel_err).c_str(),
                 r.ok ? "true" : "false", static_cast<unsigned long long>(r.output_fnv1a), i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, " ]\n}\n");
  return std::fclose(f) == 0;
}

template <class T>
int run(const Options& o)
{
  cudaDeviceProp prop{};
  PAGEDATTN_CHECK(cudaGetDeviceProperties(&prop, 0));
  const int launches = o.quick ? 10 : 100;
  const double copy_gbps = paged_decode::device_copy_gbps();
  std::printf("%s (%d SMs), commit %s: copy %.0f GB/s (read + write); %s, block %d, %d launches per shape\n", prop.name,
              prop.multiProcessorCount, o.commit.c_str(), copy_gbps, o.dtype.c_str(), block_size, launches);
  std::printf("%-10s %-6s %5s %11s %11s %9s %7s %9s  %-6s  %s\n", "shape", "heads", "head", "median_us", "hot_us", "GB/s", "%copy",
              "rel_err", "check", "output FNV-1a");

  auto row_name = [](const BenchShape& b) { return shape_name(b) + "@" + heads_name(b) + "/" + std::to_string(b.head_dim); };
  for (const std::string& wanted : o.only)
  {
    if (std::none_of(std::begin(shapes), std::end(shapes), [&](const BenchShape& b) { return row_name(b) == wanted; }))
    {
      std::fprintf(stderr, "--shape %s: no such row (rows are named like 1x16384@24/4/256)\n", wanted.c_str());
      return 2;
    }
  }

  const paged_decode::L2Flush flush;
  cudaStream_t stream = nullptr;
  PAGEDATTN_CHECK(cudaStreamCreate(&stream));
  std::vector<Row> rows;
  for (const BenchShape& b : shapes)
  {
    if (!o.only.empty() && std::find(o.only.begin(), o.only.end(), row_name(b)) == o.only.end()) { continue; }
    const Row r = run_shape<T>(b, launches, copy_gbps, flush, stream);
    std::printf("%-10s %-6s %5d %11.1f %11.1f %9.1f %6.1f%% %9.2e  %-6s  %016llx\n", shape_name(b).c_str(), heads_name(b).c_str(),
                b.head_dim, r.median_us, r.hot_us, r.gbps, r.pct_copy, r.rel_err, r.ok ? "ok" : "FAILED",
                static_cast<unsigned long long>(r.output_fnv1a));
    std::fflush(stdout);
    rows.push_back(r);
  }
  PAGEDATTN_CHECK(cudaStreamDestroy(stream));

  if (!write_json(o, prop.name, copy_gbps, launches, flush.bytes(), rows))
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

} // namespace

int main(int argc, char** argv)
{
  const Options o = parse(argc, argv);
  if (!paged_decode::have_cuda_device())
  {
    std::fprintf(stderr, "no CUDA device: bench_decode needs an NVIDIA GPU (sm_80 or newer)\n");
    return 1;
  }
  if (o.dtype == "fp32") { return run<float>(o); } // the CUDA-core fold
  return o.dtype == "bf16" ? run<__nv_bfloat16>(o) : run<__half>(o);
}
