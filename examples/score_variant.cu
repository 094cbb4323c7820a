// A score modifier of one's own, as one struct: Llama 4's attention temperature tuning (query_temperature.cuh),
// passed as DecodeArguments' fourth parameter and its score_variant field. The decode's folds call its hooks
// where they call the default's, so the modifier costs one multiply per score and one float per query row.
//
// Llama 4 Scout's attention shape: 40 query heads over 8 KV heads, head size 128, fp16, a vLLM cache in
// blocks of 16 tokens; 16 sequences of lengths 1,000 .. 60,000, so the rows' temperatures differ (1.0 up to
// 1.2 at Llama 4's floor scale of 8192). Checked against an fp64 reference whose logits carry each row's
// temperature, then timed beside the default variant (L2 flushed, medians).
#include <pagedattn/device/device_paged_attention.cuh>

#include "query_temperature.cuh"
#include "support/paged_decode_problem.cuh"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

namespace {

using T = __half;
using HeadDims = std::integer_sequence<int, 128>;
using Policies = pagedattn::DefaultPagedAttentionPolicies;

constexpr int num_seqs = 16, max_len = 60000, num_heads = 40, num_kv_heads = 8, head_size = 128, block_size = 16;
constexpr double tolerance = 2e-3; // relative L2 error of an fp16 output against fp64
constexpr int timed_launches = 50;

} // namespace

int main()
{
  if (!paged_decode::have_cuda_device())
  {
    std::printf("no CUDA device: this example needs an NVIDIA GPU (sm_80 or newer)\n");
    return 1;
  }
  const paged_decode::DecodeShape shape{num_seqs, max_len, num_heads, num_kv_heads, head_size, block_size};
  const std::uint64_t seed = 2027;
  paged_decode::PagedDecodeProblem<T> problem(shape, seed);
  std::vector<int> lens(num_seqs);
  for (int s = 0; s < num_seqs; ++s) { lens[s] = 1000 + s * (max_len - 1000) / (num_seqs - 1); }
  problem.set_seq_lens(lens);

  // The default arguments, then the same with the variant: its type as DecodeArguments' fourth parameter.
  const pagedattn::DecodeArguments<T> plain = problem.arguments();
  pagedattn::DecodeArguments<T, T, pagedattn::IdentityOutputEpilogue, QueryTemperature> args =
      problem.arguments<pagedattn::IdentityOutputEpilogue, QueryTemperature>();
  args.score_variant = QueryTemperature{}; // Llama 4's floor scale 8192 and attn_scale 0.1

  std::size_t temp_bytes = 0, plain_bytes = 0;
  PAGEDATTN_CHECK((pagedattn::DevicePagedAttention::Decode<Policies, HeadDims>(nullptr, temp_bytes, args)));
  PAGEDATTN_CHECK((pagedattn::DevicePagedAttention::Decode<Policies, HeadDims>(nullptr, plain_bytes, plain)));
  paged_decode::DeviceArray<char> temp(std::max(temp_bytes, plain_bytes));
  cudaStream_t stream = nullptr;
  PAGEDATTN_CHECK(cudaStreamCreate(&stream));
  auto variant_decode = [&] { PAGEDATTN_CHECK((pagedattn::DevicePagedAttention::Decode<Policies, HeadDims>(temp.get(), temp_bytes, args, stream))); };
  auto plain_decode = [&] { PAGEDATTN_CHECK((pagedattn::DevicePagedAttention::Decode<Policies, HeadDims>(temp.get(), plain_bytes, plain, stream))); };

  // Correctness: 8 (sequence, head) pairs against fp64 attention at the row's temperature (the reference
  // scales the logits by it: its scale argument times the temperature of the query's position).
  variant_decode();
  PAGEDATTN_CHECK(cudaStreamSynchronize(stream));
  const std::vector<T> out = problem.download_output();
  double worst = 0;
  for (const auto& [seq, head] : problem.sample_pairs(8))
  {
    const int len = lens[seq];
    const float temperature = args.score_variant.temperature(len - 1);
    const std::vector<double> ref = paged_decode::reference_attention<T>(shape.data(seed), seq, head, len, problem.scale() * temperature);
    double num = 0, den = 0;
    for (int d = 0; d < head_size; ++d)
    {
      const double got = __half2float(out[(std::size_t(seq) * num_heads + head) * head_size + d]);
      num += (got - ref[d]) * (got - ref[d]);
      den += ref[d] * ref[d];
    }
    const double error = std::isfinite(num) ? std::sqrt(num / den) : INFINITY;
    worst = error > worst ? error : worst;
  }

  const paged_decode::L2Flush flush;
  const double variant_us = paged_decode::median_launch_us(variant_decode, timed_launches, stream, &flush);
  const double plain_us = paged_decode::median_launch_us(plain_decode, timed_launches, stream, &flush);
  PAGEDATTN_CHECK(cudaStreamDestroy(stream));

  const bool ok = worst < tolerance;
  std::printf("Llama 4 temperature tuning as a score variant, %d sequences of 1000 .. %d tokens, %d/%d heads, head %d, fp16: "
              "rel L2 error %.2e %s\n",
              num_seqs, max_len, num_heads, num_kv_heads, head_size, worst, ok ? "OK" : "FAILED");
  std::printf("decode with the variant %.1f us, the default %.1f us (L2 flushed, median of %d)\n", variant_us, plain_us, timed_launches);
  return ok ? 0 : 1;
}
