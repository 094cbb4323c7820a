// Policy sweep: times candidate tuning policies of the paged decode on a few Qwen3.6 shapes (24/4/256,
// fp16, block 16) in one run, to choose the constants of the sm_90 policy. Prints a table and writes
// JSON (--json PATH). Same method as bench_decode: the stream is held while the host queues each launch,
// L2 is flushed before each timed launch; medians of 30 launches.
#include <pagedattn/device/device_paged_attention.cuh>

#include "../examples/support/paged_decode_problem.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#define CHECK_CUDA(expr)                                                                                        \
  do {                                                                                                          \
    cudaError_t e_ = (expr);                                                                                    \
    if (e_ != cudaSuccess) { std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); std::exit(1); } \
  } while (0)

/// sm_90's policy with the swept members overridden.
template <int Threads, int Partition, int MinBlocks, int Stages>
struct Candidate : pagedattn::PagedAttentionPolicySm90 {
  static constexpr const char* name = "candidate";
  static constexpr int block_threads = Threads;
  static constexpr int max_partition_tokens = Partition;
  static constexpr std::size_t smem_budget_bytes = 227 * 1024;
  static constexpr int min_blocks_per_sm = MinBlocks;
  static constexpr int stages = Stages;
};

__global__ void fill_random(__half* p, std::size_t n, unsigned seed)
{
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
  {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
    p[i] = __float2half(static_cast<float>(h & 0xffff) / 32768.f - 1.f + 1.f / 65536.f);
  }
}

struct Shape { int seqs, len; };

template <class Chain>
cudaError_t decode_with(void* temp, std::size_t& bytes, const pagedattn::DecodeArguments<__half>& a, cudaStream_t stream = nullptr)
{
  return pagedattn::DevicePagedAttention::Decode<Chain, std::integer_sequence<int, 256>>(temp, bytes, a, stream);
}

int main(int argc, char** argv)
{
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) { std::printf("no CUDA device\n"); return 1; }
  const char* json = nullptr;
  for (int i = 1; i + 1 < argc; ++i) { if (std::string(argv[i]) == "--json") { json = argv[i + 1]; } }
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  const int heads = 24, kv_heads = 4, head = 256, block = 16;

  const double copy_gbps = paged_decode::device_copy_gbps(); // read + write
  std::printf("copy %.0f GB/s\n", copy_gbps);
  const paged_decode::L2Flush flush;
  cudaStream_t stream = nullptr;
  CHECK_CUDA(cudaStreamCreate(&stream));

  std::FILE* out = json ? std::fopen(json, "w") : nullptr;
  if (out) { std::fprintf(out, "{\"copy_gbps\": %.1f, \"rows\": [\n", copy_gbps); }
  bool first_row = true;
  std::vector<Shape> shape_list = {{1, 100000}, {64, 4096}, {1, 16384}, {1, 1000}, {256, 1024}};
  for (int i = 1; i + 1 < argc; ++i) // --shape SEQSxLEN (repeatable): only these shapes
  {
    int seqs = 0, len = 0;
    if (std::string(argv[i]) == "--shape" && std::sscanf(argv[i + 1], "%dx%d", &seqs, &len) == 2)
    {
      if (shape_list.size() == 5 && shape_list[0].seqs == 1 && shape_list[0].len == 100000) { shape_list.clear(); }
      shape_list.push_back({seqs, len});
    }
  }
  for (Shape sh : shape_list)
  {
    const int blocks_per_seq = (sh.len + block - 1) / block;
    const std::size_t num_blocks = std::size_t(sh.seqs) * blocks_per_seq;
    const std::size_t cache_elems = num_blocks * kv_heads * head * block;
    __half *k, *v, *q, *o;
    int *tables, *lens;
    CHECK_CUDA(cudaMalloc(&k, cache_elems * 2));
    CHECK_CUDA(cudaMalloc(&v, cache_elems * 2));
    CHECK_CUDA(cudaMalloc(&q, std::size_t(sh.seqs) * heads * head * 2));
    CHECK_CUDA(cudaMalloc(&o, std::size_t(sh.seqs) * heads * head * 2));
    fill_random<<<1024, 256>>>(k, cache_elems, 1);
    fill_random<<<1024, 256>>>(v, cache_elems, 2);
    fill_random<<<64, 256>>>(q, std::size_t(sh.seqs) * heads * head, 3);
    std::vector<int> ids(num_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(7));
    std::vector<int> seq_lens(sh.seqs, sh.len);
    CHECK_CUDA(cudaMalloc(&tables, ids.size() * 4));
    CHECK_CUDA(cudaMalloc(&lens, seq_lens.size() * 4));
    CHECK_CUDA(cudaMemcpy(tables, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(lens, seq_lens.data(), seq_lens.size() * 4, cudaMemcpyHostToDevice));
    pagedattn::DecodeArguments<__half> a;
    a.output = o; a.query = q; a.key_cache = k; a.value_cache = v; a.num_blocks = num_blocks;
    a.block_tables = tables; a.max_blocks_per_seq = blocks_per_seq; a.seq_lens = lens; a.num_seqs = sh.seqs;
    a.max_seq_len = sh.len; a.num_heads = heads; a.num_kv_heads = kv_heads; a.head_size = head; a.block_size = block;
    a.scale = 1.f / 16.f;
    const double bytes = 2.0 * cache_elems * 2 + 2.0 * sh.seqs * heads * head * 2;

    auto time_policy = [&](auto chain, const char* label) {
      using Chain = decltype(chain);
      std::size_t tb = 0;
      CHECK_CUDA(decode_with<Chain>(nullptr, tb, a));
      void* temp;
      CHECK_CUDA(cudaMalloc(&temp, tb));
      auto decode = [&] { CHECK_CUDA(decode_with<Chain>(temp, tb, a, stream)); };
      const double med = paged_decode::median_launch_us(decode, 30, stream, &flush);
      const double hot_us = paged_decode::median_hot_us(decode, 30, stream);
      const double gbps = bytes / (med * 1e-6) / 1e9;
      std::printf("%4dx%-6d %-28s median %8.1f us  hot %8.1f us  %7.0f GB/s  %5.1f%% of copy\n", sh.seqs, sh.len, label, med, hot_us,
                  gbps, 100 * gbps / copy_gbps);
      if (out)
      {
        std::fprintf(out, "%s{\"shape\": \"%dx%d\", \"policy\": \"%s\", \"median_us\": %.2f, \"hot_us\": %.2f, \"gbps\": %.1f, \"pct_copy\": %.2f}\n",
                     first_row ? "" : ",", sh.seqs, sh.len, label, med, hot_us, gbps, 100 * gbps / copy_gbps);
        first_row = false;
      }
      CHECK_CUDA(cudaFree(temp));
    };
    time_policy(pagedattn::DefaultPagedAttentionPolicies{}, "default");
    time_policy(pagedattn::SinglePolicyChain<Candidate<128, 2048, 2, 3>>{}, "w4 p<=2048 s3 b2");
    CHECK_CUDA(cudaFree(k)); CHECK_CUDA(cudaFree(v)); CHECK_CUDA(cudaFree(q)); CHECK_CUDA(cudaFree(o));
    CHECK_CUDA(cudaFree(tables)); CHECK_CUDA(cudaFree(lens));
  }
  if (out) { std::fprintf(out, "]}\n"); std::fclose(out); }
  CHECK_CUDA(cudaStreamDestroy(stream));
  return 0;
}
