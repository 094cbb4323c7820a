// How fast can a thread block stream vLLM's paged K/V cache into shared memory, by each copy mechanism,
// with no attention math? Asked before tensor copies (bench/NOTES.md, "Tensor copies on sm_90"):
// pagedattn read the large batches at ~93 % of a plain read stream, TensorRT-LLM's XQA at ~100 %, and a third cp.async
// stage made pagedattn slower, not faster. This probe separates the copy mechanism from the fold:
//
//   cp.async  128 threads make 16-byte copies (pagedattn's KvSlab today), one commit group per
//             stage, wait_group + a block barrier per tile;
//   bulk      one thread issues one cp.async.bulk per 8 KB run (one KV head of one cache block, K or V),
//             completion on an mbarrier per stage (expect_tx); the block waits on the mbarrier's phase
//             and passes a barrier before the stage is refilled (sm_90 only);
//   bulk+ws   the same copies from a producer warp of its own (warp specialisation, as TensorRT-LLM's
//             XQA does): each stage has a "full" mbarrier (the copies landed) and an "empty" one (every
//             consumer warp is done with it), and no block barrier at all, so a stage is refilled as soon
//             as the consumers release it (sm_90 only; 4 consumer warps + 1 producer warp).
//
// Each block streams the tiles of one (sequence, KV head, partition) as the decode does: 32 tokens per
// tile (K and V of two cache blocks of 16 tokens at head 256, fp16: 32 KB), S stages, S - 1 in flight;
// "consuming" a tile reads every 16-byte word of it from shared memory (XOR) and then spins for
// --work cycles (the fold's time per tile; 0 measures the copies alone). The block table is a random
// permutation of the cache's blocks. Timed as bench_decode times (L2 flushed by reading before each
// launch, median of 30 launches) beside the read bandwidth of a plain kernel in the same run.
//
//   bench_paged_read [--work CYCLES]...      (fp16, 4 KV heads, head 256, block 16; sm_90 for the bulk rows)
//
// Every wait is bounded: a stage that never lands traps (a launch error) instead of hanging the device.
#include <pagedattn/util_arch.cuh>

#include "../examples/support/paged_decode_problem.cuh"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int head_dim = 256, kv_heads = 4, block_tokens = 16;
constexpr int run_bytes = head_dim * block_tokens * 2;        ///< one KV head of one cache block, K or V: 8 KB
constexpr int tile_tokens = 32;
constexpr int runs_per_tile = 2 * (tile_tokens / block_tokens); ///< K and V of each cache block: 4
constexpr int tile_bytes = runs_per_tile * run_bytes;           ///< 32 KB
constexpr int threads = 128;
[[maybe_unused]] constexpr long long max_spins = 1ll << 26; ///< a bounded wait: ~0.5 s of polling, then a trap

namespace arch = pagedattn::arch; // the library's copies and mbarriers (util_arch.cuh)

enum class Mode { cp_async, bulk, bulk_ws };

struct Shape {
  int seqs, len, partition_tokens;
};


__device__ __forceinline__ void spin(long long cycles)
{
  if (cycles <= 0) { return; }
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {}
}

/// The global address of run r (0, 1: K of the tile's cache blocks 0, 1; 2, 3: their V) of tile i.
__device__ __forceinline__ const char* run_source(const char* k_cache, const char* v_cache, const int* table, int kv_head, int first_token,
                                                  int i, int r)
{
  const int block = table[(first_token + i * tile_tokens) / block_tokens + (r & 1)];
  const char* cache = r < 2 ? k_cache : v_cache;
  return cache + (static_cast<std::int64_t>(block) * kv_heads + kv_head) * run_bytes;
}

#if defined(PAGEDATTN_HAS_BULK_COPY)
/// Waits until `bar` has completed the phase of the given parity; traps after max_spins polls.
__device__ __forceinline__ void mbarrier_wait_bounded(std::uint64_t* bar, unsigned parity)
{
  long long spins = 0;
  while (!arch::mbarrier_try_wait(bar, parity))
  {
    if (++spins > max_spins) { __trap(); }
  }
}
#endif

/// Threads of a block: 128 consumers, and in bulk_ws mode one producer warp more.
template <Mode M>
constexpr int block_threads_of() { return M == Mode::bulk_ws ? threads + 32 : threads; }

template <Mode M, int Stages>
__global__ void __launch_bounds__(block_threads_of<M>()) paged_read_kernel(const char* k_cache, const char* v_cache, const int* block_tables,
                                                               int max_blocks_per_seq, int partitions, int partition_tokens, long long work,
                                                               unsigned* sink)
{
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* stage = smem; // [Stages][tile_bytes]
  const int item = blockIdx.x, seq = item / (kv_heads * partitions), kv_head = item / partitions % kv_heads;
  const int first_token = item % partitions * partition_tokens;
  const int* table = block_tables + static_cast<std::int64_t>(seq) * max_blocks_per_seq;
  const int tiles = partition_tokens / tile_tokens;
  uint4 acc = make_uint4(0, 0, 0, 0);
  auto consume = [&](int s) { // by the 128 consumer threads
    const uint4* words = reinterpret_cast<const uint4*>(stage + s * tile_bytes);
    for (int w = threadIdx.x; w < tile_bytes / 16; w += threads)
    {
      const uint4 v = words[w];
      acc = make_uint4(acc.x ^ v.x, acc.y ^ v.y, acc.z ^ v.z, acc.w ^ v.w);
    }
    spin(work);
  };

  if constexpr (M == Mode::cp_async)
  {
    auto load = [&](int i) {
      if (i < tiles)
      {
        unsigned char* dst = stage + (i % Stages) * tile_bytes;
        for (int r = 0; r < runs_per_tile; ++r)
        {
          const char* src = run_source(k_cache, v_cache, table, kv_head, first_token, i, r);
          for (int u = threadIdx.x; u < run_bytes / 16; u += threads) { arch::copy_async_16(dst + r * run_bytes + 16 * u, src + 16 * u, 16); }
        }
      }
      arch::copy_async_commit();
    };
    for (int i = 0; i < Stages - 1; ++i) { load(i); }
    for (int i = 0; i < tiles; ++i)
    {
      arch::copy_async_wait<Stages - 2>();
      __syncthreads(); // tile i visible; every thread done with tile i - 1, whose buffer is refilled next
      load(i + Stages - 1);
      consume(i % Stages);
    }
    arch::copy_async_wait<0>();
  }
  else if constexpr (M == Mode::bulk_ws)
  {
#if defined(PAGEDATTN_HAS_BULK_COPY)
    __shared__ std::uint64_t full[Stages], empty[Stages];
    constexpr int consumer_warps = threads / 32;
    if (threadIdx.x == 0)
    {
      for (int s = 0; s < Stages; ++s)
      {
        arch::mbarrier_init(&full[s], 1);
        arch::mbarrier_init(&empty[s], consumer_warps);
      }
      arch::fence_mbarrier_init();
    }
    __syncthreads(); // (the only block barrier: the barriers are initialised)
    if (threadIdx.x >= threads) // the producer warp: its lane 0 issues every copy
    {
      if (threadIdx.x == threads)
      {
        for (int i = 0; i < tiles; ++i)
        {
          const int s = i % Stages;
          if (i >= Stages) { mbarrier_wait_bounded(&empty[s], static_cast<unsigned>(i / Stages - 1) & 1u); } // consumers released it
          arch::mbarrier_arrive_expect_tx(&full[s], tile_bytes);
          unsigned char* dst = stage + s * tile_bytes;
          for (int r = 0; r < runs_per_tile; ++r)
          {
            arch::copy_bulk(dst + r * run_bytes, run_source(k_cache, v_cache, table, kv_head, first_token, i, r), run_bytes, &full[s]);
          }
        }
      }
    }
    else
    {
      for (int i = 0; i < tiles; ++i)
      {
        const int s = i % Stages;
        mbarrier_wait_bounded(&full[s], static_cast<unsigned>(i / Stages) & 1u);
        consume(s);
        __syncwarp();
        if (threadIdx.x % 32 == 0) { arch::mbarrier_arrive(&empty[s]); } // this warp is done with stage s
      }
    }
#else
    __trap(); // (the host runs the bulk rows only on sm_90)
#endif
  }
  else
  {
#if defined(PAGEDATTN_HAS_BULK_COPY)
    __shared__ std::uint64_t full[Stages];
    if (threadIdx.x == 0)
    {
      for (int s = 0; s < Stages; ++s) { arch::mbarrier_init(&full[s], 1); }
      arch::fence_mbarrier_init();
    }
    __syncthreads();
    auto load = [&](int i) { // thread 0 alone
      if (i < tiles)
      {
        std::uint64_t* bar = &full[i % Stages];
        arch::mbarrier_arrive_expect_tx(bar, tile_bytes);
        unsigned char* dst = stage + (i % Stages) * tile_bytes;
        for (int r = 0; r < runs_per_tile; ++r)
        {
          arch::copy_bulk(dst + r * run_bytes, run_source(k_cache, v_cache, table, kv_head, first_token, i, r), run_bytes, bar);
        }
      }
    };
    if (threadIdx.x == 0)
    {
      for (int i = 0; i < Stages - 1; ++i) { load(i); }
    }
    for (int i = 0; i < tiles; ++i)
    {
      // Stage i % Stages completes its phase (i / Stages) once its bytes have landed.
      mbarrier_wait_bounded(&full[i % Stages], static_cast<unsigned>(i / Stages) & 1u);
      __syncthreads(); // every thread done with tile i - 1, whose buffer is refilled next
      if (threadIdx.x == 0) { load(i + Stages - 1); }
      consume(i % Stages);
    }
#else
    __trap(); // (the host runs the bulk rows only on sm_90)
#endif
  }
  if ((acc.x ^ acc.y ^ acc.z ^ acc.w) == 0x9e3779b9u) { *sink = 1; }
}

struct Result {
  double us, gbps;
  int blocks_per_sm;
};

template <Mode M, int Stages>
Result run(const Shape& sh, const char* k, const char* v, const int* table, int max_blocks_per_seq, long long work,
           const paged_decode::L2Flush& flush, cudaStream_t stream, unsigned* sink)
{
  const int partitions = sh.len / sh.partition_tokens;
  const int grid = sh.seqs * kv_heads * partitions;
  const std::size_t smem = std::size_t(Stages) * tile_bytes;
  auto kernel = paged_read_kernel<M, Stages>;
  PAGEDATTN_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  int blocks_per_sm = 0;
  PAGEDATTN_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel, block_threads_of<M>(), smem));
  auto launch = [&] {
    kernel<<<grid, block_threads_of<M>(), smem, stream>>>(k, v, table, max_blocks_per_seq, partitions, sh.partition_tokens, work, sink);
    PAGEDATTN_CHECK(cudaGetLastError());
  };
  launch();
  PAGEDATTN_CHECK(cudaStreamSynchronize(stream));
  const double us = paged_decode::median_launch_us(launch, 30, stream, &flush);
  const double bytes = double(sh.seqs) * sh.len * kv_heads * (2.0 * head_dim * 2);
  return {us, bytes / (us * 1e3), blocks_per_sm};
}

} // namespace

int main(int argc, char** argv)
{
  std::vector<long long> works;
  for (int i = 1; i < argc; ++i)
  {
    if (std::string(argv[i]) == "--work" && i + 1 < argc) { works.push_back(std::atoll(argv[++i])); }
    else
    {
      std::fprintf(stderr, "usage: %s [--work CYCLES]...\n", argv[0]);
      return 2;
    }
  }
  if (works.empty()) { works = {0, 2000}; }
  if (!paged_decode::have_cuda_device())
  {
    std::fprintf(stderr, "no CUDA device: bench_paged_read needs an NVIDIA GPU\n");
    return 1;
  }
  cudaDeviceProp prop{};
  PAGEDATTN_CHECK(cudaGetDeviceProperties(&prop, 0));
  const bool bulk = prop.major >= 9;
  const double read_gbps = paged_decode::device_read_gbps();
  std::printf("%s (%d SMs): read %.0f GB/s; fp16, %d KV heads, head %d, block %d, 32 KB tiles\n", prop.name, prop.multiProcessorCount,
              read_gbps, kv_heads, head_dim, block_tokens);

  const Shape shapes[] = {{64, 4096, 4096}, {256, 1024, 1024}, {1, 100000 / 1536 * 1536, 1536}};
  std::size_t cache_blocks = 0;
  for (const Shape& sh : shapes) { cache_blocks = std::max(cache_blocks, std::size_t(sh.seqs) * sh.len / block_tokens); }
  const std::size_t cache_bytes = cache_blocks * kv_heads * run_bytes;
  paged_decode::DeviceArray<char> k(cache_bytes), v(cache_bytes);
  PAGEDATTN_CHECK(cudaMemset(k.get(), 1, cache_bytes));
  PAGEDATTN_CHECK(cudaMemset(v.get(), 2, cache_bytes));
  paged_decode::DeviceArray<unsigned> sink(1);
  const paged_decode::L2Flush flush;
  cudaStream_t stream = nullptr;
  PAGEDATTN_CHECK(cudaStreamCreate(&stream));

  std::printf("%-10s %6s %-9s %6s %6s %9s %9s %7s\n", "shape", "work", "copy", "stages", "blk/SM", "median_us", "GB/s", "%read");
  for (const Shape& sh : shapes)
  {
    const int blocks_per_seq = sh.len / block_tokens;
    std::vector<int> ids(cache_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(20261201));
    ids.resize(std::size_t(sh.seqs) * blocks_per_seq); // distinct blocks, in random order
    paged_decode::DeviceArray<int> table(ids.size());
    PAGEDATTN_CHECK(cudaMemcpy(table.get(), ids.data(), ids.size() * sizeof(int), cudaMemcpyHostToDevice));
    for (long long work : works)
    {
      auto row = [&](const char* copy, int stages, const Result& r) {
        std::printf("%-10s %6lld %-9s %6d %6d %9.1f %9.1f %6.1f%%\n", (std::to_string(sh.seqs) + "x" + std::to_string(sh.len)).c_str(), work,
                    copy, stages, r.blocks_per_sm, r.us, r.gbps, 100.0 * r.gbps / read_gbps);
        std::fflush(stdout);
      };
      const char* kp = k.get();
      const char* vp = v.get();
      row("cp.async", 2, run<Mode::cp_async, 2>(sh, kp, vp, table.get(), blocks_per_seq, work, flush, stream, sink.get()));
      row("cp.async", 3, run<Mode::cp_async, 3>(sh, kp, vp, table.get(), blocks_per_seq, work, flush, stream, sink.get()));
      row("cp.async", 4, run<Mode::cp_async, 4>(sh, kp, vp, table.get(), blocks_per_seq, work, flush, stream, sink.get()));
      if (bulk)
      {
        row("bulk", 2, run<Mode::bulk, 2>(sh, kp, vp, table.get(), blocks_per_seq, work, flush, stream, sink.get()));
        row("bulk", 3, run<Mode::bulk, 3>(sh, kp, vp, table.get(), blocks_per_seq, work, flush, stream, sink.get()));
        row("bulk", 4, run<Mode::bulk, 4>(sh, kp, vp, table.get(), blocks_per_seq, work, flush, stream, sink.get()));
        row("bulk", 6, run<Mode::bulk, 6>(sh, kp, vp, table.get(), blocks_per_seq, work, flush, stream, sink.get()));
        row("bulk+ws", 2, run<Mode::bulk_ws, 2>(sh, kp, vp, table.get(), blocks_per_seq, work, flush, stream, sink.get()));
        row("bulk+ws", 3, run<Mode::bulk_ws, 3>(sh, kp, vp, table.get(), blocks_per_seq, work, flush, stream, sink.get()));
        row("bulk+ws", 4, run<Mode::bulk_ws, 4>(sh, kp, vp, table.get(), blocks_per_seq, work, flush, stream, sink.get()));
        row("bulk+ws", 6, run<Mode::bulk_ws, 6>(sh, kp, vp, table.get(), blocks_per_seq, work, flush, stream, sink.get()));
      }
    }
  }
  PAGEDATTN_CHECK(cudaStreamDestroy(stream));
  return 0;
}
