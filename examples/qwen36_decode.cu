// One decode step of Qwen3.6's attention with pagedattn: 24 query heads sharing 4 KV heads (GQA 6:1),
// head size 256, fp16, a vLLM paged KV cache in blocks of 16 tokens, two workloads:
//   - one sequence of 100000 tokens (long-context chat: a single sequence must fill the whole GPU),
//   - 64 sequences of 4096 tokens (a serving batch).
// For each: random data made on the device, DevicePagedAttention::Decode with CUB's two-phase temporary
// storage, a check of a few (sequence, head) outputs against an fp64 CPU reference, and the time with
// the L2 cache flushed before each launch, as GB/s and as a percentage of the device's copy bandwidth
// (a decode step reads each K/V byte once: it is memory bound, and a copy is the practical ceiling).
//
//   cmake --workflow --preset example        (builds and runs this program)
#include <pagedattn/device/device_paged_attention.cuh>

#include "support/paged_decode_problem.cuh"

#include <cstdio>
#include <utility>

namespace {

using T = __half;
// Instantiate only the head size this model uses (the default instantiates every supported one).
using HeadDims = std::integer_sequence<int, 256>;
using Policies = pagedattn::DefaultPagedAttentionPolicies;

constexpr int num_heads = 24, num_kv_heads = 4, head_size = 256, block_size = 16;
constexpr double tolerance = 2e-3; // relative L2 error of an fp16 output against fp64
constexpr int timed_launches = 50;

bool run_workload(int num_seqs, int seq_len, double copy_gbps, const paged_decode::L2Flush& flush, cudaStream_t stream)
{
  // Queries, cache and block tables on the device (the block tables scatter each sequence's blocks).
  const paged_decode::DecodeShape shape{num_seqs, seq_len, num_heads, num_kv_heads, head_size, block_size};
  const paged_decode::PagedDecodeProblem<T> problem(shape, /*seed=*/2026);

  // The arguments, as vLLM's paged_attention_v2 receives them: device pointers, shapes, strides.
  pagedattn::DecodeArguments<T> args;
  args.output = problem.output();             // [num_seqs][num_heads][head_size]
  args.query = problem.query();               // [num_seqs][num_heads][head_size]
  args.key_cache = problem.key_cache();       // [num_blocks][num_kv_heads][head_size / 8][block_size][8]
  args.value_cache = problem.value_cache();   // [num_blocks][num_kv_heads][head_size][block_size]
  args.num_blocks = problem.num_blocks();
  args.block_tables = problem.block_tables(); // [num_seqs][max_blocks_per_seq], int32
  args.max_blocks_per_seq = shape.blocks_per_seq();
  args.seq_lens = problem.seq_lens();         // [num_seqs], int32, on the device
  args.num_seqs = num_seqs;
  args.max_seq_len = seq_len;                 // a host-side upper bound: sizes the grid, no device read
  args.num_heads = num_heads;
  args.num_kv_heads = num_kv_heads;
  args.head_size = head_size;
  args.block_size = block_size;
  args.scale = problem.scale();               // 1 / sqrt(head_size)

  // Two-phase call: first the size of the temporary storage (partials of the KV partitions), then the run.
  std::size_t temp_bytes = 0;
  PAGEDATTN_CHECK((pagedattn::DevicePagedAttention::Decode<Policies, HeadDims>(nullptr, temp_bytes, args)));
  void* temp = nullptr;
  PAGEDATTN_CHECK(cudaMalloc(&temp, temp_bytes));
  auto decode = [&] { PAGEDATTN_CHECK((pagedattn::DevicePagedAttention::Decode<Policies, HeadDims>(temp, temp_bytes, args, stream))); };

  // Correctness: one launch, then 4 (sequence, head) pairs against the fp64 reference.
  decode();
  PAGEDATTN_CHECK(cudaStreamSynchronize(stream));
  const double error = problem.max_relative_error(problem.download_output(), problem.sample_pairs(4));

  // Speed: median of individually timed launches, each after an L2 flush (not timed).
  const double us = paged_decode::median_launch_us(decode, timed_launches, stream, &flush);
  const double gbps = problem.bytes_moved() / (us * 1e3);
  PAGEDATTN_CHECK(cudaFree(temp));

  const bool ok = error < tolerance;
  std::printf("%4d x %6d tokens: %9.1f us  %7.1f GB/s  %5.1f%% of copy  rel L2 error %.2e  %s\n", num_seqs, seq_len, us, gbps,
              100.0 * gbps / copy_gbps, error, ok ? "OK" : "FAILED");
  return ok;
}

} // namespace

int main()
{
  if (!paged_decode::have_cuda_device())
  {
    std::printf("no CUDA device: this example needs an NVIDIA GPU (sm_80 or newer)\n");
    return 1;
  }
  cudaDeviceProp prop{};
  PAGEDATTN_CHECK(cudaGetDeviceProperties(&prop, 0));
  const double copy_gbps = paged_decode::device_copy_gbps();
  std::printf("%s (%d SMs): device-to-device copy %.0f GB/s (read + write)\n", prop.name, prop.multiProcessorCount, copy_gbps);
  std::printf("Qwen3.6 decode: %d query heads, %d KV heads, head size %d, fp16, block size %d, L2 flushed, median of %d\n",
              num_heads, num_kv_heads, head_size, block_size, timed_launches);

  const paged_decode::L2Flush flush;
  cudaStream_t stream = nullptr;
  PAGEDATTN_CHECK(cudaStreamCreate(&stream));
  bool ok = run_workload(1, 100000, copy_gbps, flush, stream);
  ok = run_workload(64, 4096, copy_gbps, flush, stream) && ok;
  PAGEDATTN_CHECK(cudaStreamDestroy(stream));
  return ok ? 0 : 1;
}
