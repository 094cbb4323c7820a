// Timeline of one decode launch: every thread block records %globaltimer at the numbered steps of
// PAGEDATTN_TRACE_POINT (config.cuh), and this tool prints, per shape, when the blocks reach each step
// (µs from the first block's start: min / median / max over the blocks that reach it), beside the
// launch's cudaEvent time (L2 flushed before it, as in bench_decode). It answers "where do the
// microseconds go" for the latency-bound shapes: the launch and init pass, the prologue, the stream,
// the combine's tail.
//
//   trace_decode [--hot] [--graph] [--shape SEQSxLEN[xHEAD[pPARTITION_TOKENS]][+COUNTxSHORT][@HEADS/KV_HEADS]]...
//       (+COUNTxSHORT: COUNT more sequences of SHORT tokens, max_seq_len LEN; SEQSxlogLO-HI: bench_decode's
//       log-uniform batch, e.g. 64xlog100-100000, max_seq_len HI; --graph: the shapes after it are captured
//       once in a CUDA graph and their replays traced)
//       (fp16, block 16; 24/4 heads, head 256 and automatic partitions unless given; --hot: the timelines
//       come from launches without an L2 flush before them)
#include <cooperative_groups.h>

#include <cstdio>

__device__ unsigned long long trace_ns[1 << 16][24]; // [block][pagedattn::TracePoint]: 24 columns (at least TracePoint::count)
__device__ unsigned trace_sm[1 << 16];
__device__ __forceinline__ unsigned sm_id()
{
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}
#define PAGEDATTN_TRACE_POINT(point)                                                                            \
  do {                                                                                                          \
    if (threadIdx.x == 0 && blockIdx.x < (1u << 16))                                                            \
    {                                                                                                           \
      trace_ns[blockIdx.x][static_cast<int>(point)] = pagedattn::arch::global_timer_ns();                      \
      if ((point) == pagedattn::TracePoint::block_start) { trace_sm[blockIdx.x] = sm_id(); }                  \
    }                                                                                                           \
  } while (0)

// After the register `value` has arrived: a mov that reads it comes first (asm volatile keeps the order).
#define PAGEDATTN_TRACE_AFTER(point, value)                                                                     \
  do {                                                                                                          \
    if (threadIdx.x == 0 && blockIdx.x < (1u << 16))                                                            \
    {                                                                                                           \
      unsigned dummy_;                                                                                          \
      asm volatile("mov.b32 %0, %1;" : "=r"(dummy_) : "f"(value));                                              \
      trace_ns[blockIdx.x][static_cast<int>(point)] = pagedattn::arch::global_timer_ns() + (dummy_ == 0x7fc00001u ? 1 : 0); \
    }                                                                                                           \
  } while (0)
#include <pagedattn/device/device_paged_attention.cuh>

#include "../examples/support/paged_decode_problem.cuh"
#include "bench_batches.cuh"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace {

using HeadDims = std::integer_sequence<int, 128, 256>;
constexpr int columns = 24; // trace_ns's row
constexpr int points = static_cast<int>(pagedattn::TracePoint::count);
static_assert(points <= 24, "one name (and one trace_ns column) per trace point");
const char* const point_names[24] = {"start", "tile chosen", "block ids", "first K/V tile", "partition folded",
                                         "aggregate stored", "group folded", "done", "fold: loads",
                                         "fold: factors", "fold: done", "group published", "looked back",
                                         "final fold", "slice: start", "slice: item 0 stats", "slice: stats landed",
                                         "slice: values landed", "grid barrier", "slice: group stats", "slice: group values",
                                         "plan: lengths read", "plan: chosen", "plan: scanned"};

__global__ void empty_kernel() {}
__global__ void grid_sync_kernel() { cooperative_groups::this_grid().sync(); }

/// One thread follows a chain of `steps` dependent loads through `next` (ld.global.cg: L2), twice: the
/// first pass brings the lines in, the second is timed. ns and SM clocks per load go to out[0], out[1].
__global__ void l2_latency_kernel(const unsigned* next, int steps, double* out)
{
  unsigned i = 0;
  for (int k = 0; k < steps; ++k) { i = __ldcg(next + i); }
  const unsigned long long t0 = pagedattn::arch::global_timer_ns();
  const long long c0 = clock64();
  for (int k = 0; k < steps; ++k) { i = __ldcg(next + i); }
  const long long c1 = clock64();
  const unsigned long long t1 = pagedattn::arch::global_timer_ns();
  out[0] = double(t1 - t0) / steps;
  out[1] = double(c1 - c0) / steps + (i == 0xffffffffu ? 1 : 0); // (i keeps the chain alive)
}

struct Shape {
  int seqs, len, head, partition_tokens, heads = 24, kv_heads = 4;
  int short_count = 0, short_len = 0; ///< SEQSxLEN+COUNTxSHORT: COUNT more sequences of SHORT tokens
  int log_lo = 0;                     ///< SEQSxlogLO-HI (len = HI): bench_decode's log-uniform batch
  bool graph = false;                 ///< the timeline of a graph's replay (captured at max_seq_len LEN)
};

double percentile(std::vector<double> v, double q)
{
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * (v.size() - 1) + 0.5)];
}

/// Event times of `reps` launches of `work`, each after `before` and an L2 flush (none if `flush` is
/// null; the stream is held meanwhile, so that the launch is queued before the first event).
template <class F, class B>
std::vector<double> event_times_us(F&& work, const paged_decode::L2Flush* flush, cudaStream_t stream, int reps, B&& before)
{
  paged_decode::EventPair ev;
  std::vector<double> us;
  for (int i = 0; i < reps; ++i)
  {
    before();
    paged_decode::hold_stream(stream, 200'000);
    if (flush) { (*flush)(stream); }
    PAGEDATTN_CHECK(cudaEventRecord(ev.start, stream));
    work();
    PAGEDATTN_CHECK(cudaEventRecord(ev.stop, stream));
    us.push_back(ev.elapsed_us());
  }
  return us;
}

template <class F>
double median_event_us(F&& work, const paged_decode::L2Flush& flush, cudaStream_t stream)
{
  return percentile(event_times_us(work, &flush, stream, 21, [] {}), 0.5);
}

void trace_shape(const Shape& sh, const paged_decode::L2Flush& flush, const paged_decode::L2Flush& write_flush, bool hot, cudaStream_t stream)
{
  const paged_decode::DecodeShape shape{sh.seqs + sh.short_count, sh.len, sh.heads, sh.kv_heads, sh.head, 16};
  paged_decode::PagedDecodeProblem<__half> problem(shape, 20261129);
  if (sh.short_count > 0)
  {
    std::vector<int> lens(std::size_t(sh.seqs), sh.len);
    lens.resize(std::size_t(sh.seqs + sh.short_count), sh.short_len);
    problem.set_seq_lens(lens);
  }
  if (sh.log_lo > 0) { problem.set_seq_lens(bench_batches::log_uniform_lengths(sh.seqs, sh.log_lo, sh.len, std::uint64_t(sh.seqs))); }
  pagedattn::DecodeArguments<__half> args = problem.arguments();
  args.partition_tokens = sh.partition_tokens;
  std::size_t temp_bytes = 0;
  PAGEDATTN_CHECK((pagedattn::DevicePagedAttention::Decode<pagedattn::DefaultPagedAttentionPolicies, HeadDims>(nullptr, temp_bytes, args)));
  paged_decode::DeviceArray<char> temp(temp_bytes);
  std::function<void()> decode = [&] {
    PAGEDATTN_CHECK((pagedattn::DevicePagedAttention::Decode<pagedattn::DefaultPagedAttentionPolicies, HeadDims>(temp.get(), temp_bytes, args, stream)));
  };
  cudaGraphExec_t exec = nullptr;
  if (sh.graph)
  {
    cudaGraph_t graph;
    PAGEDATTN_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    decode();
    PAGEDATTN_CHECK(cudaStreamEndCapture(stream, &graph));
    PAGEDATTN_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    PAGEDATTN_CHECK(cudaGraphDestroy(graph));
    decode = [&] { PAGEDATTN_CHECK(cudaGraphLaunch(exec, stream)); };
  }
  decode();
  PAGEDATTN_CHECK(cudaStreamSynchronize(stream));

  void* trace = nullptr;
  PAGEDATTN_CHECK(cudaGetSymbolAddress(&trace, trace_ns));
  std::vector<unsigned long long> host(std::size_t(1 << 16) * columns);
  const std::vector<double> event_us = event_times_us(decode, hot ? nullptr : &flush, stream, 5, [&] { // the last launch's timeline is printed
    PAGEDATTN_CHECK(cudaMemsetAsync(trace, 0, host.size() * sizeof(unsigned long long), stream));
  });
  PAGEDATTN_CHECK(cudaMemcpy(host.data(), trace, host.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
  unsigned long long t0 = ~0ull;
  std::size_t blocks = 0;
  for (std::size_t b = 0; b < (1u << 16); ++b)
  {
    if (host[b * columns]) { t0 = std::min(t0, host[b * columns]); blocks = b + 1; }
  }
  if (sh.log_lo > 0) { std::printf("\n%s%dxlog%d-%d", sh.graph ? "graph:" : "", sh.seqs, sh.log_lo, sh.len); }
  else { std::printf("\n%s%dx%d", sh.graph ? "graph:" : "", sh.seqs, sh.len); }
  if (sh.short_count > 0) { std::printf("+%dx%d", sh.short_count, sh.short_len); }
  std::printf(" %d/%d heads head %d partition %d: %zu blocks; event time %.1f us (median of 5%s; last %.1f); median of 21: %.1f us (read flush), "
              "%.1f us (write flush)\n", sh.heads, sh.kv_heads, sh.head, sh.partition_tokens, blocks, percentile(event_us, 0.5), hot ? ", L2 not flushed: the timeline is hot" : "", event_us.back(),
              median_event_us(decode, flush, stream), median_event_us(decode, write_flush, stream));
  std::printf("  %-18s %7s %8s %8s %8s %8s\n", "step", "blocks", "min", "median", "p90", "max");
  for (int k = 0; k < points; ++k)
  {
    std::vector<double> at;
    for (std::size_t b = 0; b < blocks; ++b)
    {
      const unsigned long long t = host[b * columns + k];
      if (t) { at.push_back((t - t0) * 1e-3); }
    }
    if (at.empty()) { continue; }
    std::printf("  %-18s %7zu %8.2f %8.2f %8.2f %8.2f\n", point_names[k], at.size(), percentile(at, 0), percentile(at, 0.5),
                percentile(at, 0.9), percentile(at, 1));
  }
  // The critical path: every step of the block that finished last.
  std::size_t last = 0;
  for (std::size_t b = 0; b < blocks; ++b)
  {
    if (host[b * columns + 7] > host[last * columns + 7]) { last = b; }
  }
  std::printf("  last block (%zu):", last);
  for (int k = 0; k < points; ++k)
  {
    const unsigned long long t = host[last * columns + k];
    if (t) { std::printf(" %d:%.2f", k, (t - t0) * 1e-3); }
  }
  std::printf("\n");
  // Is a slow stream a slow SM? The 6 slowest streams, with the other blocks on their SM.
  std::vector<unsigned> sm(1u << 16);
  PAGEDATTN_CHECK(cudaMemcpyFromSymbol(sm.data(), trace_sm, sm.size() * sizeof(unsigned)));
  std::vector<std::pair<double, std::size_t>> streams;
  for (std::size_t b = 0; b < blocks; ++b)
  {
    const unsigned long long* t = &host[b * columns];
    if (t[3] && t[4]) { streams.push_back({(t[4] - t[3]) * 1e-3, b}); }
  }
  std::sort(streams.rbegin(), streams.rend());
  for (std::size_t i = 0; i < streams.size() && i < 6; ++i)
  {
    std::printf("  slow stream %.2f us: block %zu on SM %u; same SM:", streams[i].first, streams[i].second, sm[streams[i].second]);
    for (const auto& other : streams)
    {
      if (other.second != streams[i].second && sm[other.second] == sm[streams[i].second]) { std::printf(" %.2f", other.first); }
    }
    std::printf("\n");
  }
  // Per block: fold time (first tile landed -> folded) and prologue (start -> first tile).
  std::vector<double> fold, prologue;
  for (std::size_t b = 0; b < blocks; ++b)
  {
    const unsigned long long* t = &host[b * columns];
    if (t[3] && t[4]) { fold.push_back((t[4] - t[3]) * 1e-3); }
    if (t[0] && t[3]) { prologue.push_back((t[3] - t[0]) * 1e-3); }
  }
  if (!fold.empty())
  {
    std::printf("  per block: prologue (start -> first tile) median %.2f max %.2f; stream (first tile -> folded) median %.2f max %.2f us\n",
                percentile(prologue, 0.5), percentile(prologue, 1), percentile(fold, 0.5), percentile(fold, 1));
  }
  if (exec) { PAGEDATTN_CHECK(cudaGraphExecDestroy(exec)); }
}

} // namespace

int main(int argc, char** argv)
{
  if (!paged_decode::have_cuda_device())
  {
    std::fprintf(stderr, "no CUDA device\n");
    return 1;
  }
  std::vector<Shape> shapes;
  bool hot = false, graph_next = false; // --graph: the shapes after it are replayed from a graph
  for (int i = 1; i < argc; ++i)
  {
    if (std::string(argv[i]) == "--hot") { hot = true; }
    Shape s{0, 0, 256, 0};
    const std::string arg = i + 1 < argc ? argv[i + 1] : "";
    const std::size_t at = arg.find('@');
    if (std::string(argv[i]) == "--graph") { graph_next = true; }
    const std::size_t plus = arg.find('+');
    if (plus != std::string::npos && plus < at) { std::sscanf(arg.c_str() + plus + 1, "%dx%d", &s.short_count, &s.short_len); }
    s.graph = graph_next;
    if (std::string(argv[i]) == "--shape" && arg.find("xlog") != std::string::npos)
    {
      if (std::sscanf(arg.c_str(), "%dxlog%d-%d", &s.seqs, &s.log_lo, &s.len) == 3 && s.seqs > 0 && 0 < s.log_lo && s.log_lo <= s.len)
      {
        shapes.push_back(s);
      }
      else { std::fprintf(stderr, "--shape %s: a log-uniform batch is SEQSxlogLO-HI with 0 < LO <= HI\n", arg.c_str()); return 2; }
    }
    else if (std::string(argv[i]) == "--shape" && std::sscanf(arg.substr(0, std::min(at, plus)).c_str(), "%dx%dx%dp%d", &s.seqs, &s.len, &s.head, &s.partition_tokens) >= 2 &&
        (at == std::string::npos || std::sscanf(arg.c_str() + at + 1, "%d/%d", &s.heads, &s.kv_heads) == 2))
    {
      shapes.push_back(s);
    }
  }
  if (shapes.empty())
  {
    shapes = {{1, 1000, 256, 0},       {1, 16384, 256, 0}, {1, 100000, 256, 0}, {1, 100000, 128, 0},
              {1, 100000, 128, 0, 32, 8}, {64, 4096, 256, 0},  {4, 2049, 256, 0}};
  }

  const paged_decode::L2Flush flush, write_flush(paged_decode::L2Flush::Mode::write);
  cudaStream_t stream = nullptr;
  PAGEDATTN_CHECK(cudaStreamCreate(&stream));
  void* scratch = nullptr;
  PAGEDATTN_CHECK(cudaMalloc(&scratch, 4096));
  {
    // L2 hit latency: a chain through 64 lines of 128 bytes (stride 33 lines, so not sequential)
    constexpr int lines = 64, stride = 32; // unsigneds per line
    std::vector<unsigned> chain(lines * stride);
    for (int l = 0; l < lines; ++l) { chain[l * stride] = ((l * 33 + 1) % lines) * stride; }
    paged_decode::DeviceArray<unsigned> d_chain(chain.size());
    paged_decode::DeviceArray<double> d_out(2);
    PAGEDATTN_CHECK(cudaMemcpy(d_chain.get(), chain.data(), chain.size() * sizeof(unsigned), cudaMemcpyHostToDevice));
    l2_latency_kernel<<<1, 1, 0, stream>>>(d_chain.get(), 256, d_out.get());
    PAGEDATTN_CHECK(cudaGetLastError());
    double out[2];
    PAGEDATTN_CHECK(cudaMemcpy(out, d_out.get(), sizeof(out), cudaMemcpyDeviceToHost));
    std::printf("baseline: L2 hit latency (one thread, dependent ld.global.cg) %.0f ns = %.0f SM clocks per load\n", out[0], out[1]);
  }
  // A launch like the one-wave decode's (264 blocks, 72 KB of shared memory each, cooperative), empty or
  // passing one grid barrier: what the launch and the runtime's barrier cost alone.
  constexpr int big_smem = 72 * 1024;
  PAGEDATTN_CHECK(cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, big_smem));
  PAGEDATTN_CHECK(cudaFuncSetAttribute(grid_sync_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, big_smem));
  auto cooperative = [&](const void* kernel) {
    return [&, kernel] {
      PAGEDATTN_CHECK(cudaLaunchCooperativeKernel(kernel, dim3(264), dim3(128), nullptr, big_smem, stream));
    };
  };
  std::printf("baselines (event time, L2 flushed, median of 21): empty kernel 264 x 128 with 72 KB shared memory: %.2f us, "
              "the same cooperative %.2f us, cooperative with one grid barrier %.2f us\n",
              median_event_us([&] { empty_kernel<<<264, 128, big_smem, stream>>>(); }, flush, stream),
              median_event_us(cooperative(reinterpret_cast<const void*>(empty_kernel)), flush, stream),
              median_event_us(cooperative(reinterpret_cast<const void*>(grid_sync_kernel)), flush, stream));
  std::printf("baselines (event time, L2 flushed, median of 21): nothing %.2f us, memset 4 KB %.2f us, empty kernel %.2f us, "
              "memset + empty kernel %.2f us\n",
              median_event_us([] {}, flush, stream),
              median_event_us([&] { PAGEDATTN_CHECK(cudaMemsetAsync(scratch, 0, 4096, stream)); }, flush, stream),
              median_event_us([&] { empty_kernel<<<264, 128, 0, stream>>>(); }, flush, stream),
              median_event_us([&] {
                PAGEDATTN_CHECK(cudaMemsetAsync(scratch, 0, 4096, stream));
                empty_kernel<<<264, 128, 0, stream>>>();
              }, flush, stream));
  for (const Shape& s : shapes) { trace_shape(s, flush, write_flush, hot, stream); }
  PAGEDATTN_CHECK(cudaFree(scratch));
  PAGEDATTN_CHECK(cudaStreamDestroy(stream));
  return 0;
}
