// Level 3 on its own: DeviceCombinePartials merges the partitions of a few segments, with CUB's two-phase
// temporary storage. Segment 0 has 40 partitions: 5 groups of 8, merged by look-back. Checked against the
// host's fold of the same partials with the thread-level functor, OnlineSoftmaxCombine.
#include <pagedattn/device/device_combine_partials.cuh>
#include <pagedattn/thread/thread_attention_partial.cuh>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#define CHECK(expr)                                                                                \
  do {                                                                                             \
    const cudaError_t e_ = (expr);                                                                 \
    if (e_ != cudaSuccess) { std::printf("%s: %s (%s)\n", #expr, cudaGetErrorString(e_),         \
                                         pagedattn::last_error_message().c_str()); return 1; }     \
  } while (0)

constexpr int kHead = 64, kHeads = 2, kSegments = 4, kMaxParts = 40;
using Partial = pagedattn::AttentionPartial<kHead>;

int main()
{
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) { std::printf("combine_partials: needs a CUDA GPU\n"); return 1; }
  // Partials: stats [segment][partition][head][2] = (max_score, exp_sum), values [..][head][kHead] (unnormalised).
  const std::vector<int> counts = {kMaxParts, 7, 1, 0}; // 0 partitions: the output is zero
  const std::size_t slots = std::size_t(kSegments) * kMaxParts;
  std::vector<float> stats(slots * kHeads * 2), values(slots * kHeads * kHead);
  for (std::size_t i = 0; i < slots * kHeads; ++i)
  {
    stats[2 * i] = 3.f * std::sin(1.3f * i);          // max_score
    stats[2 * i + 1] = 1.f + 0.5f * std::cos(0.7f * i); // exp_sum > 0
    for (int d = 0; d < kHead; ++d) { values[i * kHead + d] = stats[2 * i + 1] * std::sin(0.01f * (i * kHead + d)); }
  }
  float *d_stats, *d_values, *d_out;
  int* d_counts;
  CHECK(cudaMalloc(&d_stats, stats.size() * sizeof(float)));
  CHECK(cudaMalloc(&d_values, values.size() * sizeof(float)));
  CHECK(cudaMalloc(&d_counts, counts.size() * sizeof(int)));
  CHECK(cudaMalloc(&d_out, std::size_t(kSegments) * kHeads * kHead * sizeof(float)));
  CHECK(cudaMemcpy(d_stats, stats.data(), stats.size() * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_values, values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_counts, counts.data(), counts.size() * sizeof(int), cudaMemcpyHostToDevice));

  // 1. size the temporary storage, 2. allocate it, 3. run.
  std::size_t bytes = 0;
  CHECK(pagedattn::DeviceCombinePartials::Combine<kHead>(nullptr, bytes, d_stats, d_values, d_counts, d_out, kSegments, kMaxParts, kHeads));
  void* d_temp;
  CHECK(cudaMalloc(&d_temp, bytes));
  CHECK(cudaMemset(d_out, 0xFF, std::size_t(kSegments) * kHeads * kHead * sizeof(float))); // NaN: unwritten shows
  CHECK(pagedattn::DeviceCombinePartials::Combine<kHead>(d_temp, bytes, d_stats, d_values, d_counts, d_out, kSegments, kMaxParts, kHeads));
  std::vector<float> out(std::size_t(kSegments) * kHeads * kHead);
  CHECK(cudaMemcpy(out.data(), d_out, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  std::printf("temp storage: %zu bytes for %d segments x %d partitions x %d heads x %d dims\n", bytes, kSegments, kMaxParts, kHeads, kHead);

  // The host's left fold of the same partials with the thread-level functor. The device folds a fixed tree
  // (groups of 8, then the groups), so the two agree within fp32 rounding, not bit for bit.
  double worst = 0;
  for (int s = 0; s < kSegments; ++s)
  {
    for (int h = 0; h < kHeads; ++h)
    {
      Partial host = Partial::identity();
      for (int q = 0; q < counts[s]; ++q)
      {
        const int i = (s * kMaxParts + q) * kHeads + h;
        Partial p;
        p.max_score = stats[2 * i];
        p.exp_sum = stats[2 * i + 1];
        for (int d = 0; d < kHead; ++d) { p.weighted_v[d] = values[std::size_t(i) * kHead + d]; }
        host = pagedattn::OnlineSoftmaxCombine{}(host, p);
      }
      const float* o = &out[(std::size_t(s) * kHeads + h) * kHead];
      for (int d = 0; d < kHead; ++d) { worst = std::max(worst, std::fabs(double(o[d]) - host.output(d))); }
      if (h == 0) { std::printf("segment %d (%2d partitions): output[head 0][0..2] = %.6f %.6f %.6f\n", s, counts[s], o[0], o[1], o[2]); }
    }
  }
  const bool same = worst < 1e-5;
  std::printf("largest difference from the host's fold: %.3g (%s)\n", worst, same ? "within fp32 rounding" : "TOO LARGE");
  CHECK(cudaFree(d_temp));
  CHECK(cudaFree(d_stats));
  CHECK(cudaFree(d_values));
  CHECK(cudaFree(d_counts));
  CHECK(cudaFree(d_out));
  return same ? 0 : 1;
}
