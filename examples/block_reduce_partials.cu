// Level 1½ + 2: each warp folds tiles of warp_threads tokens into a WarpAttentionPartial; BlockReducePartials
// merges the warps' partials in warp order. Checked against a host AttentionPartial fold (within rounding).
#include <pagedattn/thread/thread_attention_partial.cuh>
#include <pagedattn/block/block_reduce_partials.cuh>
#include <pagedattn/warp/warp_reduce_shfl.cuh>

#include <cmath>
#include <cstdio>
#include <vector>

#define CHECK(expr)                                                                                \
  do {                                                                                             \
    const cudaError_t e_ = (expr);                                                                 \
    if (e_ != cudaSuccess) { std::printf("%s: %s\n", #expr, cudaGetErrorString(e_)); return 1; }   \
  } while (0)

using namespace pagedattn;
constexpr int kHead = 64, kThreads = 4 * warp_threads, kWarps = kThreads / warp_threads;
constexpr int kTile = warp_threads, kTilesPerWarp = 3, kTokens = kWarps * kTilesPerWarp * kTile;
using Partial = WarpAttentionPartial<kHead>; // kHead is a multiple of warp_threads: every slot is a dimension
// scores[kTokens], values[kTokens][kHead]; warp w owns tiles w * kTilesPerWarp ... of kTile tokens.
__global__ void __launch_bounds__(kThreads) block_kernel(const float* scores, const float* values, float* out)
{
  __shared__ BlockReducePartials<kHead, kThreads>::TempStorage temp;
  const int lane = arch::lane_id();
  Partial partial;
  partial.reset(); // the empty partial
  for (int c = 0; c < kTilesPerWarp; ++c)
  {
    const int t0 = (arch::warp_id() * kTilesPerWarp + c) * kTile;
    const float s = scores[t0 + lane]; // lane t holds token t0 + t
    const float tile_max = WarpReduceShfl<float>::AllMax(s);
    const float e = expf(s - tile_max);
    const float beta = partial.begin_tile(tile_max, WarpReduceShfl<float>::AllSum(e));
    for (int t = 0; t < kTile; ++t)
    {
      const float w = beta * arch::shfl_idx(e, t);
      for (int i = 0; i < Partial::items_per_lane; ++i) { partial.accumulate(i, w, values[(t0 + t) * kHead + Partial::dim(lane, i)]); }
    }
  }
  BlockReducePartials<kHead, kThreads> reduce(temp);
  const auto stats = reduce.Reduce(partial); // every thread of the block calls it
  if (threadIdx.x == 0) { out[0] = stats.max_score, out[1] = stats.exp_sum; }
  for (int d = threadIdx.x; d < kHead; d += kThreads) { out[2 + d] = reduce.weighted_v(d); }
}

int main()
{
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) { std::printf("block_reduce_partials: needs a CUDA GPU\n"); return 1; }
  std::vector<float> in(kTokens + kTokens * kHead), out(2 + kHead); // scores, then values
  float *scores = in.data(), *values = in.data() + kTokens;
  for (int t = 0; t < kTokens; ++t) { scores[t] = 4.f * std::sin(0.37f * t); }
  for (int i = 0; i < kTokens * kHead; ++i) { values[i] = std::cos(0.11f * i); }
  float* d_in; // inputs, then the output at d_in + in.size()
  CHECK(cudaMalloc(&d_in, (in.size() + out.size()) * sizeof(float)));
  CHECK(cudaMemcpy(d_in, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice));
  block_kernel<<<1, kThreads>>>(d_in, d_in + kTokens, d_in + in.size());
  CHECK(cudaGetLastError());
  CHECK(cudaMemcpy(out.data(), d_in + in.size(), out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  auto host = AttentionPartial<kHead>::identity(); // one partial per warp (add_tokens per tile), folded in warp order
  for (int w = 0; w < kWarps; ++w)
  {
    auto p = AttentionPartial<kHead>::identity();
    for (int c = 0; c < kTilesPerWarp; ++c)
    {
      const int t0 = (w * kTilesPerWarp + c) * kTile;
      p.add_tokens(&scores[t0], &values[t0 * kHead], kTile);
    }
    host = OnlineSoftmaxCombine{}(host, p);
  }
  double worst = 0; // max |device - host| of the normalised output
  for (int d = 0; d < kHead; ++d) { worst = std::fmax(worst, std::fabs(out[2 + d] / out[1] - host.output(d))); }
  std::printf("device: max_score %.6f exp_sum %.6f output[0..1] %.6f %.6f\n", out[0], out[1], out[2] / out[1], out[3] / out[1]);
  std::printf("host:   max_score %.6f exp_sum %.6f output[0..1] %.6f %.6f\n", host.max_score, host.exp_sum, host.output(0), host.output(1));
  std::printf("max |device - host| of the normalised output: %.3g\n", worst);
  CHECK(cudaFree(d_in));
  return worst < 1e-5 ? 0 : 1;
}
