// Level 3 measurement: DeviceCombinePartials, single-pass look-back against the classic two-kernel
// combine, on random partials (fp32, head size 256, 6 heads per segment: one Qwen3.6 KV head group):
//   (a)   4 segments x 196 partitions: the 1 x 100K-token Qwen3.6 step with 512-token partitions,
//   (b) 256 segments x   2 partitions: a large batch of short sequences.
// Per case and algorithm: the median time of individually timed launches (L2 NOT flushed: the partials
// of a decode step were just written, they are in L2), and for single_pass the tail, from each segment's
// CombineTiming: output_written_ns - aggregate_ready_ns, i.e. from the segment's last aggregate being
// stored to its output being written (median and max over launches and segments; global timer, whose
// resolution may be coarse). The two algorithms must give bitwise-identical outputs (exit status 1
// otherwise).
//
//   bench_combine --json PATH --commit SHA [--quick]
#include <pagedattn/device/device_combine_partials.cuh>

#include "../examples/support/paged_decode_problem.cuh"
#include "bench_json.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

namespace {

using pagedattn::detail::PartitionCombineAlgorithm;
constexpr int head_dim = 256;
constexpr int heads = 6;

struct Case {
  const char* name;
  int segments, partitions;
};
const Case cases[] = {{"4x196", 4, 196}, {"256x2", 256, 2}};

struct Row {
  const Case* c;
  const char* algorithm;
  double median_us, tail_us_median, tail_us_max; // tails: NaN for two_kernel
};

/// Partials of plausible magnitudes: maxima in (-20, 20), exp sums in (1, 301), values in (-50, 50).
__global__ void fill_partials_kernel(float* stats, float* values, std::size_t partials, std::uint64_t seed)
{
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < partials * head_dim;
       i += std::size_t(gridDim.x) * blockDim.x)
  {
    values[i] = 50.f * paged_decode::hash_uniform(seed, i);
    if (i < partials)
    {
      stats[2 * i] = 20.f * paged_decode::hash_uniform(seed + 1, i);
      stats[2 * i + 1] = 151.f + 150.f * paged_decode::hash_uniform(seed + 2, i);
    }
  }
}

struct CombineProblem {
  const Case& c;
  std::size_t partials = std::size_t(c.segments) * c.partitions * heads;
  paged_decode::DeviceArray<float> stats{2 * partials}, values{partials * head_dim};
  paged_decode::DeviceArray<int> counts{std::size_t(c.segments)};
  paged_decode::DeviceArray<float> output{std::size_t(c.segments) * heads * head_dim};
  std::size_t temp_bytes = 0;

  explicit CombineProblem(const Case& c_) : c(c_)
  {
    fill_partials_kernel<<<512, 256>>>(stats.get(), values.get(), partials, 7);
    PAGEDATTN_CHECK(cudaGetLastError());
    counts.upload(std::vector<int>(std::size_t(c.segments), c.partitions));
    PAGEDATTN_CHECK(combine(nullptr, PartitionCombineAlgorithm::single_pass, nullptr, 0));
  }

  /// The detail:: entry: the two-kernel comparison and the timing hook are not in the facade.
  cudaError_t combine(void* temp, PartitionCombineAlgorithm algorithm, pagedattn::detail::CombineTiming* timing, cudaStream_t stream)
  {
    pagedattn::detail::CombineDebugOptions debug;
    debug.timing = timing;
    return pagedattn::detail::dispatch_combine_partials<head_dim, 8, /*Debug=*/true>(temp, temp_bytes, stats.get(), values.get(), counts.get(),
                                                                     output.get(), c.segments, c.partitions, heads, algorithm, stream,
                                                                     debug);
  }
};

/// Tails (µs) of `launches` single-pass launches with the timing hook, one per segment and launch.
std::vector<double> single_pass_tails(CombineProblem& p, void* temp, int launches, cudaStream_t stream)
{
  paged_decode::DeviceArray<pagedattn::detail::CombineTiming> timing(std::size_t(p.c.segments));
  std::vector<double> tails;
  for (int i = 0; i < launches; ++i)
  {
    PAGEDATTN_CHECK(cudaMemsetAsync(timing.get(), 0, timing.size() * sizeof(pagedattn::detail::CombineTiming), stream));
    PAGEDATTN_CHECK(p.combine(temp, PartitionCombineAlgorithm::single_pass, timing.get(), stream));
    PAGEDATTN_CHECK(cudaStreamSynchronize(stream));
    for (const auto& t : timing.download())
    {
      if (t.aggregate_ready_ns == 0 || t.output_written_ns == 0) { continue; } // not a multi-partition segment
      tails.push_back(1e-3 * double(static_cast<long long>(t.output_written_ns - t.aggregate_ready_ns)));
    }
  }
  return tails;
}

bool write_json(const std::string& path, const char* device, const std::string& commit, int launches, bool identical,
                const std::vector<Row>& rows)
{
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) { return false; }
  std::fprintf(f, "{\n \"device\": %s,\n \"commit\": %s,\n \"heads\": %d,\n \"head_dim\": %d,\n \"launches\": %d,\n",
               bench_json::str(device).c_str(), bench_json::str(commit).c_str(), heads, head_dim, launches);
  std::fprintf(f, " \"l2_flushed\": false,\n \"bitwise_identical\": %s,\n \"rows\": [\n", identical ? "true" : "false");
  for (std::size_t i = 0; i < rows.size(); ++i)
  {
    const Row& r = rows[i];
    std::fprintf(f,
                 "  {\"case\": \"%s\", \"segments\": %d, \"partitions\": %d, \"algorithm\": \"%s\", \"median_us\": %s, "
                 "\"tail_us_median\": %s, \"tail_us_max\": %s}%s\n",
                 r.c->name, r.c->segments, r.c->partitions, r.algorithm, bench_json::num(r.median_us).c_str(),
                 bench_json::num(r.tail_us_median).c_str(), bench_json::num(r.tail_us_max).c_str(), i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, " ]\n}\n");
  return std::fclose(f) == 0;
}

} // namespace

int main(int argc, char** argv)
{
  std::string json, commit = "unknown";
  bool quick = false;
  for (int i = 1; i < argc; ++i)
  {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) { json = argv[++i]; }
    else if (a == "--commit" && i + 1 < argc) { commit = argv[++i]; }
    else if (a == "--quick") { quick = true; }
    else { json.clear(); break; }
  }
  if (json.empty())
  {
    std::fprintf(stderr, "usage: %s --json PATH --commit SHA [--quick]\n", argv[0]);
    return 2;
  }
  if (!paged_decode::have_cuda_device())
  {
    std::fprintf(stderr, "no CUDA device: bench_combine needs an NVIDIA GPU (sm_80 or newer)\n");
    return 1;
  }
  cudaDeviceProp prop{};
  PAGEDATTN_CHECK(cudaGetDeviceProperties(&prop, 0));
  const int launches = quick ? 10 : 100;
  cudaStream_t stream = nullptr;
  PAGEDATTN_CHECK(cudaStreamCreate(&stream));

  std::printf("%s, commit %s: DeviceCombinePartials, %d heads x %d, median of %d launches, L2 not flushed\n", prop.name,
              commit.c_str(), heads, head_dim, launches);
  std::printf("%-8s %-12s %10s %15s %12s\n", "case", "algorithm", "median_us", "tail_us_median", "tail_us_max");
  std::vector<Row> rows;
  bool identical = true;
  for (const Case& c : cases)
  {
    CombineProblem p(c);
    paged_decode::DeviceArray<char> temp(p.temp_bytes);
    std::vector<float> outputs[2];
    for (const auto algorithm : {PartitionCombineAlgorithm::single_pass, PartitionCombineAlgorithm::two_kernel})
    {
      const bool single = algorithm == PartitionCombineAlgorithm::single_pass;
      PAGEDATTN_CHECK(cudaMemset(p.output.get(), 0xFF, p.output.size() * sizeof(float)));
      auto launch = [&] { PAGEDATTN_CHECK(p.combine(temp.get(), algorithm, nullptr, stream)); };
      Row r{&c, single ? "single_pass" : "two_kernel", paged_decode::median_launch_us(launch, launches, stream), NAN, NAN};
      outputs[single ? 0 : 1] = p.output.download();
      if (single)
      {
        const std::vector<double> tails = single_pass_tails(p, temp.get(), launches, stream);
        if (!tails.empty())
        {
          r.tail_us_median = paged_decode::median(tails);
          r.tail_us_max = *std::max_element(tails.begin(), tails.end());
        }
      }
      std::printf("%-8s %-12s %10.2f %15.2f %12.2f\n", c.name, r.algorithm, r.median_us, r.tail_us_median, r.tail_us_max);
      rows.push_back(r);
    }
    const bool same = std::memcmp(outputs[0].data(), outputs[1].data(), outputs[0].size() * sizeof(float)) == 0;
    std::printf("%-8s single_pass and two_kernel outputs bitwise identical: %s\n", c.name, same ? "yes" : "NO");
    identical = identical && same;
  }
  PAGEDATTN_CHECK(cudaStreamDestroy(stream));

  if (!write_json(json, prop.name, commit, launches, identical, rows))
  {
    std::fprintf(stderr, "cannot write %s\n", json.c_str());
    return 1;
  }
  std::printf("wrote %s\n", json.c_str());
  return identical ? 0 : 1;
}
