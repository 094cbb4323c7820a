// Level 1: WarpReduceShfl over logical warps of 8 lanes: sums, maxima, and a 32-element dot product per
// logical warp (each lane's 4 products, then the warp's Sum). One hardware warp; compared with the host.
#include <pagedattn/warp/warp_reduce_shfl.cuh>

#include <cstdio>
#include <vector>

#define CHECK(expr)                                                                                \
  do {                                                                                             \
    const cudaError_t e_ = (expr);                                                                 \
    if (e_ != cudaSuccess) { std::printf("%s: %s\n", #expr, cudaGetErrorString(e_)); return 1; }   \
  } while (0)

constexpr int kLogical = 8;                                     // lanes per logical warp
constexpr int kGroups = pagedattn::warp_threads / kLogical;     // logical warps per hardware warp
constexpr int kItems = 4;                                       // dot-product elements per lane

__global__ void warp_kernel(const float* in, const float* q, const float* k, float* sum, float* max, float* dot)
{
  using Reduce = pagedattn::WarpReduceShfl<float, kLogical>;
  const int lane = pagedattn::arch::lane_id();
  const float s = Reduce::Sum(in[lane]); // valid in logical lane 0
  const float m = Reduce::Max(in[lane]);
  float lane_dot = 0.f;
  for (int i = 0; i < kItems; ++i) { lane_dot = fmaf(q[lane * kItems + i], k[lane * kItems + i], lane_dot); }
  const float d = Reduce::Sum(lane_dot);
  if (Reduce::logical_lane_id() == 0)
  {
    const int g = Reduce::logical_warp_id();
    sum[g] = s;
    max[g] = m;
    dot[g] = d;
  }
}

int main()
{
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) { std::printf("warp_reduce: needs a CUDA GPU\n"); return 1; }
  const int n = pagedattn::warp_threads;
  std::vector<float> in(n), q(n * kItems), k(n * kItems);
  for (int i = 0; i < n; ++i) { in[i] = float((i * 7) % 13) - 6.f; }        // small integers: exact sums
  for (int i = 0; i < n * kItems; ++i) { q[i] = float(i % 5) - 2.f; k[i] = float(i % 3); }
  float *d_in, *d_q, *d_k, *d_out;
  CHECK(cudaMalloc(&d_in, n * sizeof(float)));
  CHECK(cudaMalloc(&d_q, n * kItems * sizeof(float)));
  CHECK(cudaMalloc(&d_k, n * kItems * sizeof(float)));
  CHECK(cudaMalloc(&d_out, 3 * kGroups * sizeof(float)));
  CHECK(cudaMemcpy(d_in, in.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_q, q.data(), n * kItems * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_k, k.data(), n * kItems * sizeof(float), cudaMemcpyHostToDevice));
  warp_kernel<<<1, n>>>(d_in, d_q, d_k, d_out, d_out + kGroups, d_out + 2 * kGroups);
  CHECK(cudaGetLastError());
  std::vector<float> out(3 * kGroups);
  CHECK(cudaMemcpy(out.data(), d_out, out.size() * sizeof(float), cudaMemcpyDeviceToHost));

  bool ok = true;
  for (int g = 0; g < kGroups; ++g)
  {
    float s = 0.f, m = in[g * kLogical], d = 0.f;
    for (int l = g * kLogical; l < (g + 1) * kLogical; ++l)
    {
      s += in[l];
      m = in[l] > m ? in[l] : m;
      for (int i = 0; i < kItems; ++i) { d += q[l * kItems + i] * k[l * kItems + i]; }
    }
    std::printf("logical warp %d: sum %6.1f (host %6.1f)  max %4.1f (host %4.1f)  dot %6.1f (host %6.1f)\n", g,
                out[g], s, out[kGroups + g], m, out[2 * kGroups + g], d);
    ok = ok && out[g] == s && out[kGroups + g] == m && out[2 * kGroups + g] == d;
  }
  CHECK(cudaFree(d_in));
  CHECK(cudaFree(d_q));
  CHECK(cudaFree(d_k));
  CHECK(cudaFree(d_out));
  std::printf("%s\n", ok ? "all match" : "MISMATCH");
  return ok ? 0 : 1;
}
