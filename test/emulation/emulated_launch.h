#pragma once
// The launcher of the emulated CUDA machine (cuda_runtime.h in this directory): a __global__ function's body
// run for a whole grid on the host, every block at once (grid.x * block.x std::threads), each block with its
// own barrier, warps and dynamic shared memory (filled with garbage, as on a GPU). A watchdog
// aborts a launch that has not finished after `timeout` (a hung look-back fails the test instead of CI).
#include <cuda_runtime.h>

#include <chrono>
#include <atomic>
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
  /// Blocks running at once, as a GPU keeps only so many resident; the next block (in blockIdx order)
  /// starts when one ends. 0: every block at once.
  unsigned resident_blocks = 0;
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

  // Blocks start in blockIdx order while fewer than `resident` run; a block's last thread to return frees
  // its slot. The threads of finished blocks are joined as the launch goes on.
  const unsigned resident = config.resident_blocks == 0 || config.resident_blocks > config.grid ? config.grid : config.resident_blocks;
  std::mutex slots_mutex;
  std::condition_variable slot_freed;
  unsigned running = 0;
  std::vector<unsigned> finished_blocks;
  std::vector<std::atomic<unsigned>> threads_left(config.grid);
  std::vector<std::vector<std::thread>> threads(config.grid);
  auto join_finished = [&](std::unique_lock<std::mutex>& lock) {
    std::vector<unsigned> done_now;
    done_now.swap(finished_blocks);
    lock.unlock();
    for (unsigned b : done_now)
    {
      for (auto& thread : threads[b]) { thread.join(); }
      threads[b].clear();
    }
    lock.lock();
  };
  for (unsigned b = 0; b < config.grid; ++b)
  {
    {
      std::unique_lock<std::mutex> lock(slots_mutex);
      slot_freed.wait(lock, [&] { return running < resident; });
      ++running;
      join_finished(lock);
    }
    threads_left[b] = config.block;
    for (unsigned t = 0; t < config.block; ++t)
    {
      threads[b].emplace_back([&, b, t] {
        threadIdx = {t, 0, 0};
        blockIdx = {b, 0, 0};
        blockDim = dim3(config.block);
        gridDim = dim3(config.grid);
        this_block = blocks[b].get();
        this_warp = &blocks[b]->warps[t / warp_size];
        this_lane = static_cast<int>(t % warp_size);
        this_slot_set = 0;
        this_vote_flag = 0;
        chaos_rng.seed(static_cast<unsigned>(config.chaos_seed * 1000003u + b * 4099u + t + 1));
        body();
        if (threads_left[b].fetch_sub(1) == 1)
        {
          std::lock_guard<std::mutex> lock(slots_mutex);
          --running;
          finished_blocks.push_back(b);
          slot_freed.notify_one();
        }
      });
    }
  }
  for (auto& block_threads : threads)
  {
    for (auto& thread : block_threads) { thread.join(); }
  }
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
