#pragma once
// A stand-in for <cuda_runtime.h> that lets a host C++20 compiler run block-level device code with one
// std::thread per CUDA thread: the qualifiers vanish, threadIdx is thread-local, __syncthreads is a
// std::barrier and atomicMax an atomic_ref. Only what AgentDecodePlan uses (test_decode_plan_emulated_host).
#include <atomic>
#include <barrier>
#include <cstdint>

#define __host__
#define __device__
#define __forceinline__ inline

struct EmulatedDim3 {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local EmulatedDim3 threadIdx;
inline std::barrier<>* emulated_block_barrier = nullptr;

inline void __syncthreads() { emulated_block_barrier->arrive_and_wait(); }

inline int atomicMax(int* address, int value)
{
  std::atomic_ref<int> a(*address);
  int old = a.load();
  while (old < value && !a.compare_exchange_weak(old, value)) {}
  return old;
}
