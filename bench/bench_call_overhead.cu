// The C++ call's wall time, measured as python/bench/bench_ops.py measures the PyTorch operator: the
// median over calls of a call followed by cudaStreamSynchronize (host work, launch and kernel together),
// and the same for a replay of a CUDA graph that captured the call. The operator's overhead (the
// target: < 5 µs) is its eager time minus this eager time, on the same shapes (Qwen3.6 fp16, block 16):
// 1x1000, 64x4096, 1x100000. The temporary storage is sized once and reused, as a C++ caller would.
//
//   bench_call_overhead --json PATH --commit SHA [--quick]
//
// Exit status: 0 when every shape ran, 1 otherwise, 2 for bad arguments.
#include <pagedattn/device/device_paged_attention.cuh>

#include "../examples/support/paged_decode_problem.cuh"
#include "bench_json.cuh"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

struct Row {
  int num_seqs, seq_len;
  double eager_us, graph_us, host_us;
};

/// Median wall time of f() followed by a synchronize of `stream`, over n calls after 20 untimed ones.
template <class F>
double median_wall_us(F&& f, cudaStream_t stream, int n)
{
  for (int i = 0; i < 20; ++i)
  {
    f();
    PAGEDATTN_CHECK(cudaStreamSynchronize(stream));
  }
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
  {
    const auto start = std::chrono::steady_clock::now();
    f();
    PAGEDATTN_CHECK(cudaStreamSynchronize(stream));
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  return paged_decode::median(us);
}

/// Median time until f() returns (the host's work and the launch), the stream drained between calls.
template <class F>
double median_host_us(F&& f, cudaStream_t stream, int n)
{
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n + 20; ++i)
  {
    const auto start = std::chrono::steady_clock::now();
    f();
    const auto end = std::chrono::steady_clock::now();
    PAGEDATTN_CHECK(cudaStreamSynchronize(stream));
    if (i >= 20) { us.push_back(std::chrono::duration<double, std::micro>(end - start).count()); }
  }
  return paged_decode::median(us);
}

/// The one head size and layout timed (fewer instantiations compile faster).
using HeadDims = std::integer_sequence<int, 256>;

Row run_shape(int num_seqs, int seq_len, int calls, cudaStream_t stream)
{
  const paged_decode::DecodeShape shape{num_seqs, seq_len, 24, 4, 256, 16};
  const paged_decode::PagedDecodeProblem<__half> problem(shape, /*seed=*/20261201);
  const pagedattn::DecodeArguments<__half> args = problem.arguments();
  std::size_t bytes = 0;
  PAGEDATTN_CHECK((pagedattn::DevicePagedAttention::Decode<pagedattn::DefaultPagedAttentionPolicies, HeadDims, pagedattn::VllmCacheLayout>(nullptr, bytes, args)));
  paged_decode::DeviceArray<char> temp(bytes);
  auto decode = [&] { PAGEDATTN_CHECK((pagedattn::DevicePagedAttention::Decode<pagedattn::DefaultPagedAttentionPolicies, HeadDims, pagedattn::VllmCacheLayout>(temp.get(), bytes, args, stream))); };

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  PAGEDATTN_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  decode();
  PAGEDATTN_CHECK(cudaStreamEndCapture(stream, &graph));
  PAGEDATTN_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  PAGEDATTN_CHECK(cudaGraphDestroy(graph));
  Row r{num_seqs, seq_len, 0, 0, 0};
  r.eager_us = median_wall_us(decode, stream, calls);
  r.host_us = median_host_us(decode, stream, calls);
  r.graph_us = median_wall_us([&] { PAGEDATTN_CHECK(cudaGraphLaunch(exec, stream)); }, stream, calls);
  PAGEDATTN_CHECK(cudaGraphExecDestroy(exec));
  return r;
}

} // namespace

int main(int argc, char** argv)
{
  std::string json, commit = "unknown";
  bool quick = false;
  for (int i = 1; i < argc; ++i)
  {
    const bool has_value = i + 1 < argc;
    if (!std::strcmp(argv[i], "--json") && has_value) { json = argv[++i]; }
    else if (!std::strcmp(argv[i], "--commit") && has_value) { commit = argv[++i]; }
    else if (!std::strcmp(argv[i], "--quick")) { quick = true; }
    else
    {
      std::fprintf(stderr, "usage: %s --json PATH --commit SHA [--quick]\n", argv[0]);
      return 2;
    }
  }
  if (json.empty())
  {
    std::fprintf(stderr, "usage: %s --json PATH --commit SHA [--quick]\n", argv[0]);
    return 2;
  }
  if (!paged_decode::have_cuda_device())
  {
    std::fprintf(stderr, "no CUDA device: bench_call_overhead needs an NVIDIA GPU (sm_80 or newer)\n");
    return 1;
  }
  cudaStream_t stream;
  PAGEDATTN_CHECK(cudaStreamCreate(&stream));
  const int calls = quick ? 50 : 500;
  std::vector<Row> rows;
  std::printf("C++ call, commit %s: wall time of a call + cudaStreamSynchronize, median of %d (fp16, 24/4 heads, head 256)\n",
              commit.c_str(), calls);
  std::printf("%-10s %10s %10s %10s\n", "shape", "eager_us", "graph_us", "host_us");
  const std::vector<std::pair<int, int>> shapes = {{1, 1000}, {64, 4096}, {1, 100000}}; // (sequences, length)
  for (const auto& s : shapes)
  {
    rows.push_back(run_shape(s.first, s.second, calls, stream));
    std::printf("%-10s %10.1f %10.1f %10.1f\n", (std::to_string(s.first) + "x" + std::to_string(s.second)).c_str(), rows.back().eager_us,
                rows.back().graph_us, rows.back().host_us);
  }
  PAGEDATTN_CHECK(cudaStreamDestroy(stream));

  FILE* f = std::fopen(json.c_str(), "w");
  if (!f)
  {
    std::fprintf(stderr, "cannot write %s\n", json.c_str());
    return 1;
  }
  std::fprintf(f, "{\n \"commit\": %s,\n \"method\": \"median wall time of a call followed by cudaStreamSynchronize (python/bench/bench_ops.py's method)\",\n \"rows\": [\n",
               bench_json::str(commit).c_str());
  for (std::size_t i = 0; i < rows.size(); ++i)
  {
    std::fprintf(f, "  {\"shape\": \"%dx%d\", \"heads\": \"24/4\", \"head_dim\": 256, \"dtype\": \"fp16\", \"eager_us\": %s, \"graph_us\": %s, \"host_us\": %s}%s\n",
                 rows[i].num_seqs, rows[i].seq_len, bench_json::num(rows[i].eager_us).c_str(), bench_json::num(rows[i].graph_us).c_str(),
                 bench_json::num(rows[i].host_us).c_str(), i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, " ]\n}\n");
  return std::fclose(f) == 0 ? 0 : 1;
}
