// GPU tests of Level 3: DeviceCombinePartials, single-pass look-back and two-kernel, against an fp64 host
// fold; bitwise determinism over launches, algorithms, random delays and CUDA-graph replays.
#include <pagedattn/device/device_combine_partials.cuh>

#include "support/test_support.cuh"

#include <cstring>

namespace {

using pagedattn::DeviceCombinePartials;
using pagedattn::detail::PartitionCombineAlgorithm;
constexpr int head_dim = 256;
constexpr int heads = 6;

struct Problem {
  std::vector<int> counts; // partitions per segment
  int max_partitions = 0;
  std::vector<float> stats, values;
  std::vector<double> reference; // [segments][heads][head_dim]

  std::size_t segments() const { return counts.size(); }
  std::size_t output_size() const { return segments() * heads * head_dim; }
};

/// Random partials: maxima in [-20, 20], some empty, some extreme (1e4 or -1e4) maxima.
Problem make_problem(std::mt19937_64& rng, std::vector<int> counts)
{
  Problem p;
  p.counts = std::move(counts);
  p.max_partitions = std::max(1, *std::max_element(p.counts.begin(), p.counts.end()));
  const std::size_t tiles = p.segments() * p.max_partitions;
  p.stats.assign(tiles * heads * 2, std::nanf(""));
  p.values.assign(tiles * heads * head_dim, std::nanf("")); // unused partition slots stay NaN: never read
  std::uniform_real_distribution<float> m(-20.f, 20.f), l(1.f, 300.f), v(-50.f, 50.f);
  p.reference.assign(p.output_size(), 0.0);
  for (std::size_t s = 0; s < p.segments(); ++s)
  {
    for (int h = 0; h < heads; ++h)
    {
      double big_m = -INFINITY;
      std::vector<double> ms(p.counts[s]), ls(p.counts[s]);
      for (int q = 0; q < p.counts[s]; ++q)
      {
        const std::size_t slot = (s * p.max_partitions + q) * heads + h;
        const unsigned kind = rng() % 16;
        const bool empty = kind == 0;
        const float mx = empty ? -INFINITY : kind == 1 ? 1e4f : kind == 2 ? -1e4f : m(rng);
        p.stats[2 * slot] = mx;
        p.stats[2 * slot + 1] = empty ? 0.f : l(rng);
        for (int d = 0; d < head_dim; ++d) { p.values[slot * head_dim + d] = empty ? 0.f : v(rng); }
        ms[q] = mx;
        ls[q] = p.stats[2 * slot + 1];
        big_m = std::max(big_m, double(mx));
      }
      if (big_m == -INFINITY) { continue; } // every partition empty: zero output
      double big_l = 0;
      std::vector<double> out(head_dim, 0.0);
      for (int q = 0; q < p.counts[s]; ++q)
      {
        if (ms[q] == -INFINITY) { continue; }
        const double w = std::exp(ms[q] - big_m);
        big_l += w * ls[q];
        const std::size_t slot = (s * p.max_partitions + q) * heads + h;
        for (int d = 0; d < head_dim; ++d) { out[d] += w * p.values[slot * head_dim + d]; }
      }
      for (int d = 0; d < head_dim; ++d) { p.reference[(s * heads + h) * head_dim + d] = out[d] / big_l; }
    }
  }
  return p;
}

struct DeviceProblem {
  test::DeviceBuffer<float> stats, values, output;
  test::DeviceBuffer<int> counts;
  test::DeviceBuffer<char> temp;
  std::size_t temp_bytes;
  DeviceProblem(const Problem& p, std::size_t temp_bytes_)
      : stats(p.stats), values(p.values), output(p.output_size()), counts(p.counts), temp(temp_bytes_), temp_bytes(temp_bytes_)
  {}
};

std::size_t temp_bytes_for(const Problem& p)
{
  std::size_t bytes = 0;
  REQUIRE(DeviceCombinePartials::Combine<head_dim>(nullptr, bytes, nullptr, nullptr, nullptr, nullptr, int(p.segments()),
                                                   p.max_partitions, heads) == cudaSuccess);
  return bytes;
}

/// The facade's single pass, or (for the comparisons and the stress test) the detail:: entry with the
/// two-kernel algorithm or the debug hooks.
std::vector<float> run(const Problem& p, DeviceProblem& d, PartitionCombineAlgorithm algorithm,
                       const pagedattn::detail::CombineDebugOptions& debug = {})
{
  d.output.poison();
  const bool facade = algorithm == PartitionCombineAlgorithm::single_pass && debug.max_delay_ns == 0 && debug.timing == nullptr;
  const cudaError_t err =
      facade ? DeviceCombinePartials::Combine<head_dim>(d.temp.get(), d.temp_bytes, d.stats.get(), d.values.get(), d.counts.get(),
                                                        d.output.get(), int(p.segments()), p.max_partitions, heads)
             : pagedattn::detail::dispatch_combine_partials<head_dim, 8, /*Debug=*/true>(d.temp.get(), d.temp_bytes, d.stats.get(),
                                                                                          d.values.get(), d.counts.get(), d.output.get(),
                                                                                          int(p.segments()), p.max_partitions, heads,
                                                                                          algorithm, 0, debug);
  INFO(pagedattn::last_error_message());
  REQUIRE(err == cudaSuccess);
  CUDA_CHECK_LAUNCH();
  return d.output.download();
}

void check_against_reference(const Problem& p, const std::vector<float>& out)
{
  for (std::size_t s = 0; s < p.segments(); ++s)
  {
    INFO("segment " << s << " with " << p.counts[s] << " partitions");
    const std::size_t n = heads * head_dim, off = s * n;
    std::vector<float> got(out.begin() + off, out.begin() + off + n);
    std::vector<double> ref(p.reference.begin() + off, p.reference.begin() + off + n);
    bool ref_zero = std::all_of(ref.begin(), ref.end(), [](double x) { return x == 0.0; });
    if (ref_zero) { for (float x : got) { REQUIRE(x == 0.f); } }
    else { REQUIRE(test::relative_l2_error(got, ref) < 1e-5); }
  }
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b)
{
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<int> segment_counts()
{
  if (test::reduced_matrix()) { return {1, 2, 0, 33, 200, 31}; }
  // Many segments per launch: each size twice, interleaved, plus an empty segment.
  std::vector<int> c;
  for (int rep = 0; rep < 2; ++rep) { for (int n : {1, 2, 31, 32, 33, 200, 1000, 2048}) { c.push_back(n); } }
  c.push_back(0);
  return c;
}

} // namespace

TEST_CASE("combine partials: single-pass and two-kernel match an fp64 fold, bit for bit equal", "[combine][gpu]")
{
  GPU_TEST_RNG(rng, 0);
  const Problem p = make_problem(rng, segment_counts());
  DeviceProblem d(p, temp_bytes_for(p));

  const auto single = run(p, d, PartitionCombineAlgorithm::single_pass);
  check_against_reference(p, single);
  const auto two = run(p, d, PartitionCombineAlgorithm::two_kernel);
  check_against_reference(p, two);
  REQUIRE(bitwise_equal(single, two));

  const int launches = test::reduced_matrix() ? 3 : 20;
  for (int i = 0; i < launches; ++i)
  {
    INFO("launch " << i);
    REQUIRE(bitwise_equal(run(p, d, PartitionCombineAlgorithm::single_pass), single));
  }
}

TEST_CASE("combine partials: random publish delays change nothing", "[combine][gpu][stress]")
{
  GPU_TEST_RNG(rng, 1);
  const Problem p = make_problem(rng, test::reduced_matrix() ? std::vector<int>{2, 33, 64} : std::vector<int>{2, 33, 200, 1000, 1, 64});
  DeviceProblem d(p, temp_bytes_for(p));
  const auto undelayed = run(p, d, PartitionCombineAlgorithm::single_pass);
  check_against_reference(p, undelayed);
  for (unsigned max_delay : {2000u, 20000u})
  {
    INFO("max delay " << max_delay << " ns");
    pagedattn::detail::CombineDebugOptions debug;
    debug.max_delay_ns = max_delay;
    REQUIRE(bitwise_equal(run(p, d, PartitionCombineAlgorithm::single_pass, debug), undelayed));
    REQUIRE(bitwise_equal(run(p, d, PartitionCombineAlgorithm::two_kernel, debug), undelayed));
  }
}

TEST_CASE("combine partials: CUDA-graph replay needs no reset between replays", "[combine][gpu][graph]")
{
  GPU_TEST_RNG(rng, 2);
  const Problem p = make_problem(rng, {3, 200, 1, 47});
  DeviceProblem d(p, temp_bytes_for(p));
  const auto expected = run(p, d, PartitionCombineAlgorithm::single_pass);

  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  REQUIRE(DeviceCombinePartials::Combine<head_dim>(d.temp.get(), d.temp_bytes, d.stats.get(), d.values.get(), d.counts.get(),
                                                   d.output.get(), int(p.segments()), p.max_partitions, heads, stream) == cudaSuccess);
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 10; ++replay)
  {
    INFO("replay " << replay);
    d.output.poison();
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    REQUIRE(bitwise_equal(d.output.download(), expected));
  }
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_CASE("combine partials: bad arguments are rejected with a message", "[combine][gpu]")
{
  test::require_gpu_or_skip();
  std::size_t bytes = 0;
  CHECK(DeviceCombinePartials::Combine<head_dim>(nullptr, bytes, nullptr, nullptr, nullptr, nullptr, 4, 8, 9) == cudaErrorInvalidValue);
  CHECK(pagedattn::last_error_message().find("heads") != std::string::npos);
  REQUIRE(DeviceCombinePartials::Combine<head_dim>(nullptr, bytes, nullptr, nullptr, nullptr, nullptr, 4, 8, 2) == cudaSuccess);
  test::DeviceBuffer<char> temp(bytes);
  std::size_t small = bytes - 1;
  CHECK(DeviceCombinePartials::Combine<head_dim>(temp.get(), small, nullptr, nullptr, nullptr, nullptr, 4, 8, 2) == cudaErrorInvalidValue);
  CHECK(pagedattn::last_error_message().find("temp_storage_bytes") != std::string::npos);
  CHECK(DeviceCombinePartials::Combine<head_dim>(temp.get(), bytes, nullptr, nullptr, nullptr, nullptr, 4, 8, 2) == cudaErrorInvalidValue);
  CHECK(pagedattn::last_error_message().find("d_partial_stats") != std::string::npos);
}

TEST_CASE("combine partials: a partition count outside [0, max_partitions] gives NaN for that segment only", "[combine][gpu]")
{
  test::require_gpu_or_skip();
  std::mt19937_64 rng(test::test_seed() + 3);
  const Problem p = make_problem(rng, {3, 4, 2, 4});
  DeviceProblem d(p, temp_bytes_for(p));
  d.counts.upload({3, -1, 2, 5}); // max_partitions is 4
  for (auto algorithm : {PartitionCombineAlgorithm::single_pass, PartitionCombineAlgorithm::two_kernel})
  {
    const auto out = run(p, d, algorithm);
    const std::size_t n = heads * head_dim;
    for (std::size_t i = 0; i < n; ++i)
    {
      REQUIRE(std::isnan(out[1 * n + i]));
      REQUIRE(std::isnan(out[3 * n + i]));
    }
    std::vector<float> good(out.begin(), out.begin() + n);
    std::vector<double> ref(p.reference.begin(), p.reference.begin() + n);
    REQUIRE(test::relative_l2_error(good, ref) < 1e-5);
    std::vector<float> good2(out.begin() + 2 * n, out.begin() + 3 * n);
    std::vector<double> ref2(p.reference.begin() + 2 * n, p.reference.begin() + 3 * n);
    REQUIRE(test::relative_l2_error(good2, ref2) < 1e-5);
  }
}
