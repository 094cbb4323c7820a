// GPU tests of Level 2: BlockReducePartials for several block sizes and head sizes against a host fold
// of the same partials with OnlineSoftmaxCombine.
#include <pagedattn/thread/thread_attention_partial.cuh>
#include <pagedattn/block/block_reduce_partials.cuh>

#include "support/test_support.cuh"

namespace {

using pagedattn::warp_threads;

// stats: [blocks][warps][2] (max, sum); values: [blocks][warps][HeadDim]; out: [blocks][HeadDim + 2]
template <int HeadDim, int BlockThreads>
__global__ void block_reduce_kernel(const float* stats, const float* values, float* out)
{
  using Reduce = pagedattn::BlockReducePartials<HeadDim, BlockThreads>;
  __shared__ typename Reduce::TempStorage temp;
  constexpr int warps = BlockThreads / warp_threads;
  const int warp = pagedattn::arch::warp_id(), lane = pagedattn::arch::lane_id();
  const std::size_t slot = std::size_t(blockIdx.x) * warps + warp;

  pagedattn::WarpAttentionPartial<HeadDim> p;
  p.max_score = stats[2 * slot];
  p.exp_sum = stats[2 * slot + 1];
  for (int i = 0; i < p.items_per_lane; ++i)
  {
    const int d = p.dim(lane, i);
    p.weighted_v[i] = d < HeadDim ? values[slot * HeadDim + d] : 0.f;
  }
  Reduce reduce(temp);
  const auto agg = reduce.Reduce(p);
  float* o = out + std::size_t(blockIdx.x) * (HeadDim + 2);
  for (int d = threadIdx.x; d < HeadDim; d += BlockThreads) { o[d] = reduce.weighted_v(d); }
  if (threadIdx.x == BlockThreads - 1) // any thread: all hold the same statistics
  {
    o[HeadDim] = agg.max_score;
    o[HeadDim + 1] = agg.exp_sum;
  }
}

template <int HeadDim, int BlockThreads>
void check(std::mt19937_64& rng)
{
  INFO("HeadDim " << HeadDim << ", BlockThreads " << BlockThreads);
  constexpr int warps = BlockThreads / warp_threads;
  const int blocks = 5;
  using P = pagedattn::AttentionPartial<HeadDim>;
  std::vector<float> stats(std::size_t(blocks) * warps * 2), values(std::size_t(blocks) * warps * HeadDim);
  std::uniform_real_distribution<float> mdist(-30.f, 30.f), ldist(0.5f, 100.f);
  std::vector<P> host(std::size_t(blocks) * warps);
  for (std::size_t s = 0; s < host.size(); ++s)
  {
    const bool empty = (rng() % 5 == 0); // empty partials mixed in (a warp that saw no token)
    const auto v = test::random_floats(rng, HeadDim, -5.f, 5.f);
    host[s].max_score = empty ? -INFINITY : (s % 7 == 3 ? 1e4f : mdist(rng)); // and extreme maxima
    host[s].exp_sum = empty ? 0.f : ldist(rng);
    for (int d = 0; d < HeadDim; ++d) { host[s].weighted_v[d] = empty ? 0.f : v[d]; }
    stats[2 * s] = host[s].max_score;
    stats[2 * s + 1] = host[s].exp_sum;
    std::copy(host[s].weighted_v, host[s].weighted_v + HeadDim, values.begin() + s * HeadDim);
  }
  test::DeviceBuffer<float> d_stats(stats), d_values(values), d_out(std::size_t(blocks) * (HeadDim + 2));
  block_reduce_kernel<HeadDim, BlockThreads><<<blocks, BlockThreads>>>(d_stats.get(), d_values.get(), d_out.get());
  CUDA_CHECK_LAUNCH();
  const auto out = d_out.download();
  for (int b = 0; b < blocks; ++b)
  {
    P ref = P::identity();
    for (int w = 0; w < warps; ++w) { ref = pagedattn::OnlineSoftmaxCombine{}(ref, host[std::size_t(b) * warps + w]); }
    const float* o = out.data() + std::size_t(b) * (HeadDim + 2);
    REQUIRE(o[HeadDim] == ref.max_score);
    if (ref.exp_sum == 0.f) { REQUIRE(o[HeadDim + 1] == 0.f); }
    else { REQUIRE(std::abs(o[HeadDim + 1] - ref.exp_sum) <= 1e-5f * ref.exp_sum); }
    std::vector<double> ref_v(ref.weighted_v, ref.weighted_v + HeadDim);
    std::vector<float> got(o, o + HeadDim);
    if (ref.exp_sum == 0.f) { for (float x : got) { REQUIRE(x == 0.f); } }
    else { REQUIRE(test::relative_l2_error(got, ref_v) < 1e-5); }
  }
}

} // namespace

TEST_CASE("BlockReducePartials: block sizes x head sizes against a host fold", "[block][gpu]")
{
  GPU_TEST_RNG(rng, 0);
  check<64, 32>(rng);
  check<64, 128>(rng);
  check<80, 96>(rng);
  check<128, 64>(rng);
  check<128, 256>(rng);
  check<192, 160>(rng);
  check<256, 128>(rng);
  check<256, 512>(rng);
  check<256, 1024>(rng);
}
