// Does compute-sanitizer's racecheck order plain bulk copies (cp.async.bulk) by their mbarrier completion?
// A correct two-buffer pipeline, the one PartitionFoldTensorCore runs (block barrier, issue tile i+1 into
// the other buffer, wait for tile i's phase, read tile i), with the mbarriers initialised again per item as
// its Run does, in two modes: 0, one thread issues each tile's copy; 1, eight lanes of warp 0 copy 1 KB each
// (as KvSlabBulk issues a run per lane). Each mode checks the sum of what it read against the host's.
//
//   racecheck_bulk_probe            both modes, plainly (PASS / FAIL per mode)
//   compute-sanitizer --tool racecheck racecheck_bulk_probe 0
//
// On the H200 with compute-sanitizer of CUDA 13, both modes pass and racecheck reports ~33,000
// write-write hazards on each: it does not track plain bulk copies' completion. The sm_90 decode therefore
// uses tensor copies (KvCopy::bulk_tensor), whose racecheck runs report no hazard
// (bench/NOTES.md, "Tensor copies on sm_90").
// Not run by bench/run_gpu_suite.sh; sm_90 only (elsewhere it says so and exits).
#include <pagedattn/util_arch.cuh>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr int tile_units = 512; // 16-byte units: 8 KB per tile
constexpr int blocks = 8, tiles = 16, items = 2, threads = 128;

__global__ void pipeline(const uint4* src, int mode, unsigned long long* sum)
{
#if defined(PAGEDATTN_HAS_BULK_COPY)
  using namespace pagedattn;
  __shared__ alignas(128) uint4 buffer[2][tile_units];
  __shared__ std::uint64_t landed[2];
  unsigned long long acc = 0;
  for (int item = 0; item < items; ++item)
  {
    if (threadIdx.x == 0)
    {
      arch::mbarrier_init(&landed[0], 1);
      arch::mbarrier_init(&landed[1], 1);
      arch::fence_mbarrier_init();
    }
    __syncthreads();
    auto load = [&](int i) {
      if (i >= tiles) { return; }
      const uint4* tile = src + (static_cast<long long>(blockIdx.x) * tiles + i) * tile_units;
      if (threadIdx.x == 0) { arch::mbarrier_arrive_expect_tx(&landed[i % 2], tile_units * 16); }
      if (mode == 0)
      {
        if (threadIdx.x == 0) { arch::copy_bulk(&buffer[i % 2][0], tile, tile_units * 16, &landed[i % 2]); }
      }
      else
      {
        __syncwarp();
        if (threadIdx.x < 8) { arch::copy_bulk(&buffer[i % 2][threadIdx.x * 64], tile + threadIdx.x * 64, 1024, &landed[i % 2]); }
      }
    };
    load(0);
    for (int i = 0; i < tiles; ++i)
    {
      __syncthreads(); // every thread has read tile i - 1: its buffer may be refilled
      load(i + 1);
      arch::mbarrier_wait(&landed[i % 2], (i / 2) & 1);
      for (int u = threadIdx.x; u < tile_units; u += blockDim.x) { acc += buffer[i % 2][u].x; }
    }
    __syncthreads();
    if (threadIdx.x == 0)
    {
      arch::mbarrier_inval(&landed[0]);
      arch::mbarrier_inval(&landed[1]);
    }
    __syncthreads();
  }
  atomicAdd(sum, acc);
#else
  (void)src;
  (void)mode;
  (void)sum;
#endif
}

void check(cudaError_t e, const char* what)
{
  if (e != cudaSuccess)
  {
    std::fprintf(stderr, "racecheck_bulk_probe: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

} // namespace

int main(int argc, char** argv)
{
  int device = 0, major = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute");
  if (major < 9)
  {
    std::printf("racecheck_bulk_probe: needs sm_90 (bulk copies); this device is sm_%d\n", major * 10);
    return 0;
  }
  const std::size_t units = static_cast<std::size_t>(blocks) * tiles * tile_units;
  std::vector<uint4> host(units);
  unsigned long long expected = 0;
  for (std::size_t u = 0; u < units; ++u)
  {
    const unsigned x = static_cast<unsigned>(u * 2654435761u) >> 8;
    host[u] = uint4{x, 0, 0, 0};
    expected += x;
  }
  expected *= items;
  uint4* src = nullptr;
  unsigned long long* sum = nullptr;
  check(cudaMalloc(&src, units * sizeof(uint4)), "cudaMalloc");
  check(cudaMalloc(&sum, sizeof(*sum)), "cudaMalloc");
  check(cudaMemcpy(src, host.data(), units * sizeof(uint4), cudaMemcpyHostToDevice), "cudaMemcpy");
  int failures = 0;
  for (int mode = 0; mode < 2; ++mode)
  {
    if (argc > 1 && std::atoi(argv[1]) != mode) { continue; }
    check(cudaMemset(sum, 0, sizeof(*sum)), "cudaMemset");
    pipeline<<<blocks, threads>>>(src, mode, sum);
    check(cudaGetLastError(), "pipeline launch");
    unsigned long long got = 0;
    check(cudaMemcpy(&got, sum, sizeof(got), cudaMemcpyDeviceToHost), "cudaMemcpy");
    std::printf("mode %d: %s (sum %llu, expected %llu)\n", mode, got == expected ? "PASS" : "FAIL", got, expected);
    failures += got != expected;
  }
  check(cudaFree(src), "cudaFree");
  check(cudaFree(sum), "cudaFree");
  return failures ? 1 : 0;
}
