// Level 3 on its own: DeviceCombinePartials merges the partitions of a few segments, with CUB's two-phase
// temporary storage. Segment 0 has 40 partitions: 3 groups of <= 16, merged by look-back. The single-pass
// and two-kernel algorithms compute the same fold tree and give the same bits.
#include <pagedattn/device/device_combine_partials.cuh>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#define CHECK(expr)                                                                                \
  do {                                                                                             \
    const cudaError_t e_ = (expr);                                                                 \
    if (e_ != cudaSuccess) { std::printf("%s: %s (%s)\n", #expr, cudaGetErrorString(e_),         \
                                         pagedattn::last_error_message().c_str()); return 1; }     \
  } while (0)

constexpr int kHead = 64, kHeads = 2, kSegments = 4, kMaxParts = 40;

int main()
{
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) { std::printf("combine_partials: needs a CUDA GPU\n"); return 1; }
  // Partials: stats [segment][partition][head][2] = (max_score, exp_sum), values [..][head][kHead] (unnormalised).
  const std::vector<int> counts = {kMaxParts, 7, 1, 0}; // 0 partitions: the output is zero
  const std::size_t tiles = std::size_t(kSegments) * kMaxParts;
  std::vector<float> stats(tiles * kHeads * 2), values(tiles * kHeads * kHead);
  for (std::size_t i = 0; i < tiles * kHeads; ++i)
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

  // 1. size the temporary storage, 2. allocate it, 3. run (same storage for both algorithms).
  std::size_t bytes = 0;
  CHECK(pagedattn::DeviceCombinePartials::Combine<kHead>(nullptr, bytes, d_stats, d_values, d_counts, d_out, kSegments, kMaxParts, kHeads));
  void* d_temp;
  CHECK(cudaMalloc(&d_temp, bytes));
  std::vector<float> out[2];
  const pagedattn::PartitionCombineAlgorithm algorithms[2] = {pagedattn::PartitionCombineAlgorithm::single_pass,
                                                              pagedattn::PartitionCombineAlgorithm::two_kernel};
  for (int a = 0; a < 2; ++a)
  {
    CHECK(cudaMemset(d_out, 0xFF, std::size_t(kSegments) * kHeads * kHead * sizeof(float))); // NaN: unwritten shows
    CHECK(pagedattn::DeviceCombinePartials::Combine<kHead>(d_temp, bytes, d_stats, d_values, d_counts, d_out, kSegments,
                                                           kMaxParts, kHeads, /*stream=*/0, algorithms[a]));
    out[a].resize(std::size_t(kSegments) * kHeads * kHead);
    CHECK(cudaMemcpy(out[a].data(), d_out, out[a].size() * sizeof(float), cudaMemcpyDeviceToHost));
  }
  std::printf("temp storage: %zu bytes for %d segments x %d partitions x %d heads x %d dims\n", bytes, kSegments, kMaxParts, kHeads, kHead);
  for (int s = 0; s < kSegments; ++s)
  {
    const float* o = &out[0][std::size_t(s) * kHeads * kHead];
    std::printf("segment %d (%2d partitions): output[head 0][0..2] = %.6f %.6f %.6f\n", s, counts[s], o[0], o[1], o[2]);
  }
  const bool same = std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)) == 0;
  std::printf("single_pass vs two_kernel: %s\n", same ? "bitwise equal" : "DIFFERENT");
  CHECK(cudaFree(d_temp));
  CHECK(cudaFree(d_stats));
  CHECK(cudaFree(d_values));
  CHECK(cudaFree(d_counts));
  CHECK(cudaFree(d_out));
  return same ? 0 : 1;
}
