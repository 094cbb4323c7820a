// GPU end-to-end check of Levels 1 and 2 together: one thread block computes the attention of one query
// over N contiguous fp16 tokens (QK dot products summed over the lanes by WarpReduceShfl,
// WarpAttentionPartial, BlockReducePartials), and matches an fp64 reference.
#include <pagedattn/block/block_reduce_partials.cuh>
#include <pagedattn/warp/warp_reduce_shfl.cuh>

#include <cuda_fp16.h>

#include "support/reference_attention.h"
#include "support/test_support.cuh"

namespace {

using pagedattn::warp_threads;
constexpr int block_threads = 4 * warp_threads;

/// Each warp owns chunks of warp_threads tokens (chunk c goes to warp c % warps); lane l of the warp
/// holds the score of the chunk's token l and the query/key dimensions l*Items .. l*Items+Items-1.
template <int HeadDim>
__global__ void one_partition_kernel(const __half* q, const __half* k, const __half* v, int n, float scale, float* out)
{
  namespace arch = pagedattn::arch;
  constexpr int items = HeadDim / warp_threads;
  using Warp = pagedattn::WarpReduceShfl<float>;
  using Reduce = pagedattn::BlockReducePartials<HeadDim, block_threads>;
  __shared__ typename Reduce::TempStorage temp;

  const int warp = arch::warp_id(), lane = arch::lane_id();
  float qs[items];
  for (int i = 0; i < items; ++i) { qs[i] = __half2float(q[lane * items + i]) * scale; }

  pagedattn::WarpAttentionPartial<HeadDim> partial;
  partial.reset();
  for (int chunk = warp; chunk * warp_threads < n; chunk += block_threads / warp_threads)
  {
    const int first = chunk * warp_threads;
    float my_score = -INFINITY;
    for (int t = 0; t < warp_threads && first + t < n; ++t)
    {
      float lane_dot = 0.f;
      for (int i = 0; i < items; ++i) { lane_dot = fmaf(qs[i], __half2float(k[std::size_t(first + t) * HeadDim + lane * items + i]), lane_dot); }
      const float s = Warp::AllSum(lane_dot); // every lane holds the score; lane t keeps it
      if (lane == t) { my_score = s; }
    }
    const float tile_max = Warp::AllMax(my_score); // finite: the chunk holds at least one token
    const float p = my_score == -INFINITY ? 0.f : expf(my_score - tile_max);
    const float beta = partial.begin_tile(tile_max, Warp::AllSum(p));
    for (int t = 0; t < warp_threads && first + t < n; ++t)
    {
      const float w = arch::shfl_idx(beta * p, t);
      for (int i = 0; i < partial.items_per_lane; ++i)
      {
        partial.accumulate(i, w, __half2float(v[std::size_t(first + t) * HeadDim + partial.dim(lane, i)]));
      }
    }
  }
  Reduce reduce(temp);
  const auto stats = reduce.Reduce(partial);
  for (int d = threadIdx.x; d < HeadDim; d += block_threads) { out[d] = reduce.weighted_v(d) / stats.exp_sum; }
}

template <int HeadDim>
void check(std::mt19937_64& rng, int n)
{
  INFO("HeadDim " << HeadDim << ", tokens " << n);
  const float scale = 1.f / std::sqrt(float(HeadDim));
  // Query scaled up so that the softmax is far from flat.
  const auto q = test::random_floats(rng, HeadDim, -3.f, 3.f);
  const auto k = test::random_floats(rng, std::size_t(n) * HeadDim), v = test::random_floats(rng, std::size_t(n) * HeadDim);
  auto to_half = [](const std::vector<float>& x)
  {
    std::vector<__half> h(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) { h[i] = __float2half(x[i]); }
    return h;
  };
  auto back = [](const std::vector<__half>& h)
  {
    std::vector<double> x(h.size());
    for (std::size_t i = 0; i < h.size(); ++i) { x[i] = __half2float(h[i]); }
    return x;
  };
  const auto qh = to_half(q), kh = to_half(k), vh = to_half(v);
  test::DeviceBuffer<__half> d_q(qh), d_k(kh), d_v(vh);
  test::DeviceBuffer<float> d_out(HeadDim);
  one_partition_kernel<HeadDim><<<1, block_threads>>>(d_q.get(), d_k.get(), d_v.get(), n, scale, d_out.get());
  CUDA_CHECK_LAUNCH();

  const auto q64 = back(qh), k64 = back(kh), v64 = back(vh);
  std::vector<double> scores(n);
  for (int t = 0; t < n; ++t)
  {
    double s = 0;
    for (int d = 0; d < HeadDim; ++d) { s += q64[d] * k64[std::size_t(t) * HeadDim + d]; }
    scores[t] = s * scale;
  }
  const auto ref = test::reference_softmax_v(scores, v64, HeadDim);
  const double err = test::relative_l2_error(d_out.download(), ref);
  INFO("relative L2 error " << err);
  REQUIRE(err < 1e-3);
}

} // namespace

TEST_CASE("one partition: warp dot + warp partials + block reduce match fp64 attention", "[block][gpu]")
{
  GPU_TEST_RNG(rng, 0);
  for (int n : {1, 17, 512, 1000})
  {
    check<64>(rng, n);
    check<128>(rng, n);
    check<256>(rng, n);
  }
}
