// Qwen3.6's gated attention output with pagedattn's output epilogue: the model's q_proj makes, per query
// head, a query and a gate of head_size elements side by side, and the attention output of that head is
// o * sigmoid(gate). The decode reads its queries from that fused tensor (a strided view: head stride
// 2 * head_size) and an epilogue functor applies the gate to each output element before the store, so the
// gate costs no kernel and no pass over the output of its own.
//
// 24 query heads over 4 KV heads, head size 256, fp16, a vLLM cache in blocks of 16 tokens, 64 sequences
// of 4096 tokens: the output checked against an fp64 reference times sigmoid(gate), and the decode timed
// with and without the gate (L2 flushed, medians).
#include <pagedattn/device/device_paged_attention.cuh>

#include "support/paged_decode_problem.cuh"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <utility>
#include <vector>

namespace {

using T = __half;
using HeadDims = std::integer_sequence<int, 256>;
using Policies = pagedattn::DefaultPagedAttentionPolicies;

constexpr int num_seqs = 64, seq_len = 4096, num_heads = 24, num_kv_heads = 4, head_size = 256, block_size = 16;
constexpr double tolerance = 2e-3; // relative L2 error of an fp16 output against fp64
constexpr int timed_launches = 50;

/// The epilogue: output element (seq, head, dim) times sigmoid of the gate at the same place of a strided
/// [num_seqs][num_heads][head_size] tensor (here the second half of each head's q_proj slot).
struct SigmoidGate {
  const T* gate;
  std::int64_t seq_stride, head_stride; // in elements
  __device__ float operator()(float value, int seq, int head, int dim) const
  {
    const float g = __half2float(gate[seq * seq_stride + head * head_stride + dim]);
    return value / (1.f + __expf(-g));
  }
};

} // namespace

int main()
{
  if (!paged_decode::have_cuda_device())
  {
    std::printf("no CUDA device: this example needs an NVIDIA GPU (sm_80 or newer)\n");
    return 1;
  }
  const paged_decode::DecodeShape shape{num_seqs, seq_len, num_heads, num_kv_heads, head_size, block_size};
  const std::uint64_t seed = 2026;
  const paged_decode::PagedDecodeProblem<T> problem(shape, seed);

  // The fused q_proj output [num_seqs][num_heads][2][head_size]: the problem's queries, then random gates.
  const std::size_t rows = std::size_t(num_seqs) * num_heads;
  paged_decode::DeviceArray<T> q_proj(rows * 2 * head_size);
  PAGEDATTN_CHECK(cudaMemcpy2D(q_proj.get(), 2 * head_size * sizeof(T), problem.query(), head_size * sizeof(T), head_size * sizeof(T), rows,
                               cudaMemcpyDeviceToDevice));
  std::vector<T> gates(rows * head_size);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-4.f, 4.f);
  for (T& g : gates) { g = __float2half(uniform(rng)); }
  PAGEDATTN_CHECK(cudaMemcpy2D(q_proj.get() + head_size, 2 * head_size * sizeof(T), gates.data(), head_size * sizeof(T),
                               head_size * sizeof(T), rows, cudaMemcpyHostToDevice));

  // The arguments, with the epilogue's type as DecodeArguments' third parameter.
  pagedattn::DecodeArguments<T, T, SigmoidGate> args;
  args.output = problem.output();
  args.query = q_proj.get();
  args.query_seq_stride = std::int64_t(num_heads) * 2 * head_size;
  args.query_head_stride = 2 * head_size;
  args.output_epilogue = SigmoidGate{q_proj.get() + head_size, args.query_seq_stride, args.query_head_stride};
  args.key_cache = problem.key_cache();
  args.value_cache = problem.value_cache();
  args.num_blocks = problem.num_blocks();
  args.block_tables = problem.block_tables();
  args.max_blocks_per_seq = shape.blocks_per_seq();
  args.seq_lens = problem.seq_lens();
  args.num_seqs = num_seqs;
  args.max_seq_len = seq_len;
  args.num_heads = num_heads;
  args.num_kv_heads = num_kv_heads;
  args.head_size = head_size;
  args.block_size = block_size;
  args.scale = problem.scale();
  pagedattn::DecodeArguments<T> plain = problem.arguments(); // the same decode without the gate

  std::size_t temp_bytes = 0, plain_bytes = 0;
  PAGEDATTN_CHECK((pagedattn::DevicePagedAttention::Decode<Policies, HeadDims>(nullptr, temp_bytes, args)));
  PAGEDATTN_CHECK((pagedattn::DevicePagedAttention::Decode<Policies, HeadDims>(nullptr, plain_bytes, plain)));
  paged_decode::DeviceArray<char> temp(std::max(temp_bytes, plain_bytes));
  cudaStream_t stream = nullptr;
  PAGEDATTN_CHECK(cudaStreamCreate(&stream));
  auto gated_decode = [&] { PAGEDATTN_CHECK((pagedattn::DevicePagedAttention::Decode<Policies, HeadDims>(temp.get(), temp_bytes, args, stream))); };
  auto plain_decode = [&] { PAGEDATTN_CHECK((pagedattn::DevicePagedAttention::Decode<Policies, HeadDims>(temp.get(), plain_bytes, plain, stream))); };

  // Correctness: 8 (sequence, head) pairs against fp64 attention times sigmoid(gate).
  gated_decode();
  PAGEDATTN_CHECK(cudaStreamSynchronize(stream));
  const std::vector<T> out = problem.download_output();
  double worst = 0;
  for (const auto& [seq, head] : problem.sample_pairs(8))
  {
    const std::vector<double> ref = paged_decode::reference_attention<T>(shape.data(seed), seq, head, seq_len, problem.scale());
    double num = 0, den = 0;
    for (int d = 0; d < head_size; ++d)
    {
      const std::size_t i = (std::size_t(seq) * num_heads + head) * head_size + d;
      const double expected = ref[d] / (1.0 + std::exp(-double(__half2float(gates[i]))));
      const double got = __half2float(out[i]);
      num += (got - expected) * (got - expected);
      den += expected * expected;
    }
    const double error = std::isfinite(num) ? std::sqrt(num / den) : INFINITY;
    worst = error > worst ? error : worst;
  }

  // Speed: the gate reads 2 bytes per output element (1.5 MB here, against 1.6 GB of K and V).
  const paged_decode::L2Flush flush;
  const double gated_us = paged_decode::median_launch_us(gated_decode, timed_launches, stream, &flush);
  const double plain_us = paged_decode::median_launch_us(plain_decode, timed_launches, stream, &flush);
  PAGEDATTN_CHECK(cudaStreamDestroy(stream));

  const bool ok = worst < tolerance;
  std::printf("Qwen3.6 gated output, %d x %d tokens, %d/%d heads, head %d, fp16: rel L2 error %.2e %s\n", num_seqs, seq_len, num_heads,
              num_kv_heads, head_size, worst, ok ? "OK" : "FAILED");
  std::printf("decode with the gate %.1f us, without %.1f us (L2 flushed, median of %d)\n", gated_us, plain_us, timed_launches);
  return ok ? 0 : 1;
}
