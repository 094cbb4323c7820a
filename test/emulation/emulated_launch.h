#pragma once
// The launcher of the emulated CUDA machine (cuda_runtime.h in this directory): a __global__ function's body
// run for a whole grid on the host, every block at once (grid.x * block.x std::threads), each block with its
// own barrier, warps and dynamic shared memory (filled with garbage, as on a GPU). A watchdog
// aborts a launch that has not finished after `timeout` (a hung look-back fails the test instead of CI).
#include <cuda_runtime.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

namespace emu {

struct LaunchConfig {
  unsigned grid = 1;
  unsigned block = 1;
  std::size_t dynamic_smem_bytes = 0;
  std::chrono::seconds timeout{120};
  unsigned chaos_seed = 0; ///< seeds each thread's perturbation (emu::chaos_permille turns it on)
};

/// Run body() in every thread of the grid (1-D grids and blocks); returns when every thread has returned.
template <class Body>
void launch(const LaunchConfig& config, Body body)
{
  if (config.block == 0 || config.block % warp_size != 0)
  {
    std::fprintf(stderr, "emu::launch: block size %u is not a multiple of %d\n", config.block, warp_size);
    std::abort();
  }
  const unsigned warps_per_block = config.block / warp_size;
  std::vector<std::unique_ptr<Block>> blocks;
  std::vector<std::unique_ptr<Warp[]>> warps;
  std::vector<std::unique_ptr<unsigned char[]>> smem;
  for (unsigned b = 0; b < config.grid; ++b)
  {
    blocks.push_back(std::make_unique<Block>(static_cast<int>(config.block)));
    warps.push_back(std::make_unique<Warp[]>(warps_per_block));
    blocks.back()->warps = warps.back().get();
    // 128-byte aligned (the kernel's declaration asks for it); filled with garbage, as shared memory starts.
    smem.push_back(std::unique_ptr<unsigned char[]>(new (std::align_val_t(128)) unsigned char[config.dynamic_smem_bytes + 128]));
    std::memset(smem.back().get(), 0x5a, config.dynamic_smem_bytes + 128);
    blocks.back()->dynamic_smem = smem.back().get();
  }

  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(mutex);
    if (!done_cv.wait_for(lock, config.timeout, [&] { return done; }))
    {
      std::fprintf(stderr, "emu::launch: grid %u x %u did not finish within %lld s (a hang?)\n", config.grid, config.block,
                   static_cast<long long>(config.timeout.count()));
      std::abort();
    }
  });

  std::vector<std::thread> threads;
  threads.reserve(std::size_t(config.grid) * config.block);
  for (unsigned b = 0; b < config.grid; ++b)
  {
    for (unsigned t = 0; t < config.block; ++t)
    {
      threads.emplace_back([&, b, t] {
        threadIdx = {t, 0, 0};
        blockIdx = {b, 0, 0};
        blockDim = dim3(config.block);
        gridDim = dim3(config.grid);
        this_block = blocks[b].get();
        this_warp = &blocks[b]->warps[t / warp_size];
        this_lane = static_cast<int>(t % warp_size);
        chaos_rng.seed(static_cast<unsigned>(config.chaos_seed * 1000003u + b * 4099u + t + 1));
        body();
      });
    }
  }
  for (auto& thread : threads) { thread.join(); }
  {
    std::lock_guard<std::mutex> lock(mutex);
    done = true;
  }
  done_cv.notify_one();
  watchdog.join();
}

/// kernel(args...) for every thread of the grid: `kernel` is a __global__ function (a plain function here).
template <class Kernel, class... Args>
void launch_kernel(const LaunchConfig& config, Kernel kernel, const Args&... args)
{
  launch(config, [&] { kernel(args...); });
}

} // namespace emu
