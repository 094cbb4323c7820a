// GPU tests of Level 1: WarpReduceShfl for every logical width and operator, against the host; the
// warp's ballot.
#include <pagedattn/warp/warp_reduce_shfl.cuh>

#include "support/test_support.cuh"

#include <algorithm>
#include <numeric>

namespace {

constexpr int block_threads = 4 * pagedattn::warp_threads;

/// Non-commutative associative operators: they reveal whether lane order is kept.
struct First {
  template <class T> __device__ T operator()(const T& a, const T&) const { return a; }
};
struct Last {
  template <class T> __device__ T operator()(const T&, const T& b) const { return b; }
};

template <class T, int Width, class Op, bool All>
__global__ void reduce_kernel(const T* in, T* out, Op op)
{
  using R = pagedattn::WarpReduceShfl<T, Width>;
  const int tid = blockIdx.x * blockDim.x + threadIdx.x;
  const T v = in[tid];
  if constexpr (All) { out[tid] = R::AllReduce(v, op); }
  else
  {
    const T r = R::Reduce(v, op);
    if (R::logical_lane_id() == 0) { out[tid / Width] = r; }
  }
}

template <class T, class HostOp>
std::vector<T> host_segments(const std::vector<T>& in, int width, HostOp op)
{
  std::vector<T> out(in.size() / width);
  for (std::size_t s = 0; s < out.size(); ++s)
  {
    T acc = in[s * width];
    for (int i = 1; i < width; ++i) { acc = op(acc, in[s * width + i]); }
    out[s] = acc;
  }
  return out;
}

template <class T>
std::vector<T> random_values(std::mt19937_64& rng, std::size_t n)
{
  std::vector<T> v(n);
  if constexpr (std::is_floating_point_v<T>)
  {
    v = test::random_floats(rng, n, -4.f, 4.f);
    // Sums are compared with a tolerance; maxima and First/Last exactly.
  }
  else
  {
    for (auto& x : v) { x = static_cast<T>(static_cast<int>(rng() % 2001) - 1000); }
  }
  return v;
}

template <class T, int Width>
void check_width(std::mt19937_64& rng)
{
  INFO("logical width " << Width << ", type " << (std::is_same_v<T, float> ? "float" : "int"));
  const int blocks = 3;
  const std::size_t n = static_cast<std::size_t>(blocks) * block_threads;
  const auto in = random_values<T>(rng, n);
  test::DeviceBuffer<T> d_in(in), d_out(n);

  auto run = [&](auto op, auto host_op, bool exact, const char* name, auto all_tag)
  {
    constexpr bool all = decltype(all_tag)::value;
    INFO("operator " << name << (all ? " (AllReduce)" : " (Reduce)"));
    d_out.poison();
    reduce_kernel<T, Width, decltype(op), all><<<blocks, block_threads>>>(d_in.get(), d_out.get(), op);
    CUDA_CHECK_LAUNCH();
    const auto out = d_out.download();
    const auto expect = host_segments(in, Width, host_op);
    for (std::size_t s = 0; s < expect.size(); ++s)
    {
      for (int lane = 0; lane < (all ? Width : 1); ++lane)
      {
        const T got = all ? out[s * Width + lane] : out[s];
        if (exact) { REQUIRE(got == expect[s]); }
        else { REQUIRE(std::abs(double(got) - double(expect[s])) <= 1e-5 * (1 + std::abs(double(expect[s])))); }
      }
    }
  };
  using yes = std::true_type;
  using no = std::false_type;
  constexpr bool exact_sum = !std::is_floating_point_v<T>;
  run(pagedattn::Sum{}, [](T a, T b) { return a + b; }, exact_sum, "sum", no{});
  run(pagedattn::Max{}, [](T a, T b) { return std::max(a, b); }, true, "max", no{});
  run(First{}, [](T a, T) { return a; }, true, "first", no{});
  run(Last{}, [](T, T b) { return b; }, true, "last", no{});
  run(pagedattn::Sum{}, [](T a, T b) { return a + b; }, exact_sum, "sum", yes{});
  run(pagedattn::Max{}, [](T a, T b) { return std::max(a, b); }, true, "max", yes{});
}

} // namespace

TEST_CASE("WarpReduceShfl: every logical width and operator matches the host", "[warp][gpu]")
{
  GPU_TEST_RNG(rng, 0);
  check_width<float, 1>(rng);
  check_width<float, 2>(rng);
  check_width<float, 4>(rng);
  check_width<float, 8>(rng);
  check_width<float, 16>(rng);
  check_width<float, 32>(rng);
  check_width<int, 1>(rng);
  check_width<int, 4>(rng);
  check_width<int, 32>(rng);
#if defined(__ILUVATAR__)
  check_width<float, 64>(rng);
#endif
}

namespace {

/// Per warp: the native ballot, the shuffle-built one (what 64-lane builds use where the toolkit's ballot
/// is narrower than the warp), the lowest set lane and the lanes below it.
__global__ void ballot_kernel(const int* predicates, pagedattn::lane_mask_t* native, pagedattn::lane_mask_t* by_shuffles, int* lowest)
{
  const int tid = blockIdx.x * blockDim.x + threadIdx.x;
  const bool p = predicates[tid] != 0;
  const pagedattn::lane_mask_t a = pagedattn::arch::ballot(p);
  const pagedattn::lane_mask_t b = pagedattn::arch::detail::ballot_by_shuffles(p);
  const int warp = tid / pagedattn::warp_threads;
  if (pagedattn::arch::lane_id() == 0)
  {
    native[warp] = a;
    by_shuffles[warp] = b;
    lowest[warp] = a ? pagedattn::arch::lowest_lane(a) : -1;
  }
}

} // namespace

TEST_CASE("arch::ballot: native and shuffle-built ballots agree with the host, lowest_lane", "[warp][gpu]")
{
  test::require_gpu_or_skip();
  using mask_t = pagedattn::lane_mask_t;
  constexpr int warps = 64;
  constexpr int n = warps * pagedattn::warp_threads;
  std::mt19937_64 rng(test::test_seed());
  std::vector<int> pred(n);
  for (int w = 0; w < warps; ++w) // densities from none to all lanes
  {
    std::bernoulli_distribution bit(w / double(warps - 1));
    for (int l = 0; l < pagedattn::warp_threads; ++l) { pred[w * pagedattn::warp_threads + l] = bit(rng) ? 1 : 0; }
  }
  test::DeviceBuffer<int> d_pred(pred);
  test::DeviceBuffer<mask_t> d_native(warps), d_shuffles(warps);
  test::DeviceBuffer<int> d_lowest(warps);
  ballot_kernel<<<warps / 4, 4 * pagedattn::warp_threads>>>(d_pred.get(), d_native.get(), d_shuffles.get(), d_lowest.get());
  CUDA_CHECK_LAUNCH();
  const auto native = d_native.download(), shuffles = d_shuffles.download();
  const auto lowest = d_lowest.download();
  for (int w = 0; w < warps; ++w)
  {
    mask_t expected = 0;
    int first = -1;
    for (int l = pagedattn::warp_threads - 1; l >= 0; --l)
    {
      if (pred[w * pagedattn::warp_threads + l]) { expected |= mask_t(1) << l, first = l; }
    }
    INFO("warp " << w);
    CHECK(native[w] == expected);
    CHECK(shuffles[w] == expected);
    CHECK(lowest[w] == first);
  }
}
