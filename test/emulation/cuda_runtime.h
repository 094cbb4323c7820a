#pragma once
// A stand-in for <cuda_runtime.h> that runs pagedattn's CUDA-core device code on the host with g++ -std=c++20:
// one std::thread per CUDA thread, every block of a grid at once (the look-back needs resident blocks).
//   - qualifiers vanish; threadIdx / blockIdx / blockDim / gridDim are thread-local;
//   - __syncthreads is the block's std::barrier; warp intrinsics (shuffles, votes, __syncwarp) go through a
//     per-warp exchange buffer with one arrival at the warp's std::barrier (every lane must take part, as
//     the library's full-mask calls require; the mask itself is not checked);
//   - atomics are std::atomic_ref, fences std::atomic_thread_fence, __ldcg/__stcg relaxed atomic accesses;
//   - the decode kernel's `extern __shared__ ... paged_attention_smem[]` is mapped to the block's buffer
//     (see "dynamic shared memory" below); static __shared__ variables are NOT emulated (a kernel that
//     declares one must be run through a wrapper that makes it a block-wide object, see emulated_launch.h).
// __CUDA_ARCH__ stays undefined: util_arch.cuh then takes its portable paths (fence + volatile for
// release/acquire, plain copies for cp.async), with no inline PTX. Runtime API calls are stubs that
// compile and report "no device". The launcher is in emulated_launch.h.
#include <algorithm>
#include <atomic>
#include <climits>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <type_traits>

#define __host__
#define __device__
#define __global__
#define __shared__
#define __constant__
#define __forceinline__ inline
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __restrict__ __restrict

// ---- vector types ----------------------------------------------------------------------------------------
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) int2 { int x, y; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
struct uint3 { unsigned x, y, z; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return {x, y, z}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

// ---- the emulated machine --------------------------------------------------------------------------------
namespace emu {
#if defined(__ILUVATAR__)
inline constexpr int warp_size = 64;
using lane_mask_t = unsigned long long;
#else
inline constexpr int warp_size = 32;
using lane_mask_t = unsigned;
#endif

/// A barrier whose waiters sleep at once, on a futex: many more threads than cores take turns here, and a
/// spinning or yielding waiter (std::barrier's) only takes the core from the threads it waits for; the
/// last to arrive wakes them all, and none has a lock to take on waking (as a condition variable's would).
class SleepingBarrier {
public:
  explicit SleepingBarrier(int threads) : threads_(threads) {}
  void arrive_and_wait()
  {
    const unsigned generation = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == threads_)
    {
      arrived_.store(0, std::memory_order_relaxed); // before the release: no thread arrives again until woken
      generation_.store(generation + 1, std::memory_order_release);
      syscall(SYS_futex, reinterpret_cast<unsigned*>(&generation_), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
      return;
    }
    while (generation_.load(std::memory_order_acquire) == generation)
    {
      syscall(SYS_futex, reinterpret_cast<unsigned*>(&generation_), FUTEX_WAIT_PRIVATE, generation, nullptr, nullptr, 0);
    }
  }

private:
  std::atomic<unsigned> generation_{0};
  std::atomic<int> arrived_{0};
  const int threads_;
};
static_assert(sizeof(std::atomic<unsigned>) == sizeof(unsigned), "the futex word is the atomic's object");

/// The lanes of one warp: a barrier and two sets of 16-byte slots per lane for shuffles and votes, used in
/// turn, so that one arrival at the barrier per exchange suffices: exchange n + 2 rewrites exchange n's set
/// only after every lane has arrived at exchange n + 1, that is, after every lane has read exchange n.
struct Warp {
  SleepingBarrier barrier{warp_size};
  alignas(16) unsigned char slots[2][warp_size][16];
};
/// One thread block: its barrier, its warps, its dynamic shared memory, the slots of __syncthreads_or.
struct Block {
  explicit Block(int threads) : barrier(threads) {}
  SleepingBarrier barrier;
  Warp* warps = nullptr;
  unsigned char* dynamic_smem = nullptr;
  /// The flags of __syncthreads_or, used in turn: call n writes flag n % 3, and its thread 0 clears flag
  /// (n - 1) % 3, which every thread read before arriving at call n's barrier.
  std::atomic<int> vote[3] = {0, 0, 0};
};

/// Schedule perturbation ("chaos"): at a synchronisation point (__syncthreads, fences, atomics, cache-global
/// accesses) a thread sleeps, with probability chaos_permille / 1000, up to chaos_max_us microseconds, and
/// with probability chaos_stall_per_100k / 100000 up to chaos_stall_max_us (a stalled thread stalls its
/// block at the next barrier): blocks and warps interleave in orders a fair OS schedule seldom produces.
inline std::atomic<unsigned> chaos_permille{0};
inline unsigned chaos_max_us = 200;
inline std::atomic<unsigned> chaos_stall_per_100k{0};
inline unsigned chaos_stall_max_us = 20000;
inline thread_local std::minstd_rand chaos_rng{1};
inline void perturb()
{
  const unsigned permille = chaos_permille.load(std::memory_order_relaxed);
  const unsigned stall = chaos_stall_per_100k.load(std::memory_order_relaxed);
  if (stall && chaos_rng() % 100000 < stall)
  {
    std::this_thread::sleep_for(std::chrono::microseconds(chaos_rng() % (chaos_stall_max_us + 1)));
  }
  else if (permille && chaos_rng() % 1000 < permille) { std::this_thread::sleep_for(std::chrono::microseconds(chaos_rng() % (chaos_max_us + 1))); }
}
/// Extra delays of cache-global stores (__stcg: the values a block publishes to others), with probability
/// chaos_store_permille / 1000, up to chaos_store_max_us: a thread whose stores lag behind its block's
/// release of them shows as stale values read by another block.
inline std::atomic<unsigned> chaos_store_permille{0};
inline unsigned chaos_store_max_us = 2000;
inline void perturb_store()
{
  const unsigned permille = chaos_store_permille.load(std::memory_order_relaxed);
  if (permille && chaos_rng() % 1000 < permille)
  {
    std::this_thread::sleep_for(std::chrono::microseconds(chaos_rng() % (chaos_store_max_us + 1)));
  }
  else { perturb(); }
}
/// A test's hook after every atomicAdd on an unsigned (the address and the old value), e.g. to stall the
/// block that drew a given ticket. Set it only between launches.
inline void (*after_atomic_add)(const unsigned* address, unsigned old) = nullptr;
/// Calls of __threadfence_block: without __CUDA_ARCH__ the look-back's back-off sleeps with one
/// (util_arch.cuh sleep_ns), so this counts the polls that found an earlier group not yet published.
inline std::atomic<unsigned long long> fence_block_calls{0};

inline thread_local Block* this_block = nullptr;
inline thread_local Warp* this_warp = nullptr;
inline thread_local int this_lane = 0;
/// Which of its warp's two slot sets the calling lane's next exchange uses (every lane of a warp takes part
/// in every exchange, so the lanes agree on it).
inline thread_local int this_slot_set = 0;
/// Which of its block's three flags the calling thread's next __syncthreads_or uses.
inline thread_local int this_vote_flag = 0;

/// The calling lane's slots of its warp's next exchange (and the set to read them from); flips the set.
inline unsigned char (&next_slots())[warp_size][16]
{
  const int set = this_slot_set;
  this_slot_set = 1 - set;
  return this_warp->slots[set];
}

/// Every lane stores `value`, then reads lane `src`'s (its own when src is out of range).
template <class T>
T exchange(const T& value, int src)
{
  static_assert(sizeof(T) <= 16 && std::is_trivially_copyable_v<T>, "shuffle of up to 16 bytes");
  unsigned char(&slots)[warp_size][16] = next_slots();
  std::memcpy(slots[this_lane], &value, sizeof(T));
  this_warp->barrier.arrive_and_wait();
  T out;
  std::memcpy(&out, slots[(src >= 0 && src < warp_size) ? src : this_lane], sizeof(T));
  return out;
}
/// Every lane's predicate, as a lane mask.
inline lane_mask_t vote(bool predicate)
{
  unsigned char(&slots)[warp_size][16] = next_slots();
  slots[this_lane][0] = predicate ? 1 : 0;
  this_warp->barrier.arrive_and_wait();
  lane_mask_t bits = 0;
  for (int l = 0; l < warp_size; ++l) { bits |= lane_mask_t(slots[l][0]) << l; }
  return bits;
}
} // namespace emu

inline thread_local uint3 threadIdx{0, 0, 0};
inline thread_local uint3 blockIdx{0, 0, 0};
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;
inline constexpr int warpSize = emu::warp_size;

// ---- dynamic shared memory ---------------------------------------------------------------------------------
// decode_kernels.cuh declares `extern __shared__ __align__(128) unsigned char paged_attention_smem[];` inside
// pagedattn::detail::paged_attention_kernel. With the macro below that line declares a function (in the
// enclosing namespace, pagedattn::detail) returning a pointer to an array, and each use of the name calls it:
// the calling thread's block buffer.
#define paged_attention_smem (*emulated_dynamic_smem_array())
namespace pagedattn { namespace detail {
inline unsigned char (*emulated_dynamic_smem_array())[] { return reinterpret_cast<unsigned char (*)[]>(emu::this_block->dynamic_smem); }
} } // namespace pagedattn::detail

// ---- synchronisation ---------------------------------------------------------------------------------------
inline void __syncthreads()
{
  emu::perturb();
  emu::this_block->barrier.arrive_and_wait();
}
inline int __syncthreads_or(int predicate)
{
  emu::Block& b = *emu::this_block;
  const int flag = emu::this_vote_flag;
  emu::this_vote_flag = (flag + 1) % 3;
  if (predicate) { b.vote[flag].store(1, std::memory_order_relaxed); }
  b.barrier.arrive_and_wait();
  const int result = b.vote[flag].load(std::memory_order_relaxed);
  if (threadIdx.x == 0) { b.vote[(flag + 2) % 3].store(0, std::memory_order_relaxed); }
  return result;
}
inline int __syncthreads_and(int predicate) { return !__syncthreads_or(!predicate); }
inline void __syncwarp(emu::lane_mask_t = ~emu::lane_mask_t{0}) { emu::this_warp->barrier.arrive_and_wait(); }
inline void __threadfence()
{
  emu::perturb();
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
inline void __threadfence_block()
{
  emu::fence_block_calls.fetch_add(1, std::memory_order_relaxed);
  emu::perturb();
  std::atomic_thread_fence(std::memory_order_seq_cst);
  std::this_thread::yield(); // it is a poll's back-off (sleep_ns): let the awaited threads run
}
inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __nanosleep(unsigned ns) { std::this_thread::sleep_for(std::chrono::nanoseconds(ns)); }
[[noreturn]] inline void __trap()
{
  std::fprintf(stderr, "emulated __trap() in thread %u of block %u\n", threadIdx.x, blockIdx.x);
  std::abort();
}
inline long long clock64() { return std::chrono::steady_clock::now().time_since_epoch().count(); }
inline unsigned long long __cvta_generic_to_shared(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// ---- warp intrinsics ---------------------------------------------------------------------------------------
template <class T>
T __shfl_sync(emu::lane_mask_t, T var, int src_lane, int width = warpSize)
{
  const int base = emu::this_lane & ~(width - 1);
  return emu::exchange(var, base + (src_lane & (width - 1)));
}
template <class T>
T __shfl_up_sync(emu::lane_mask_t, T var, unsigned delta, int width = warpSize)
{
  const int in_group = emu::this_lane & (width - 1);
  return emu::exchange(var, in_group >= int(delta) ? emu::this_lane - int(delta) : emu::this_lane);
}
template <class T>
T __shfl_down_sync(emu::lane_mask_t, T var, unsigned delta, int width = warpSize)
{
  const int in_group = emu::this_lane & (width - 1);
  return emu::exchange(var, in_group + int(delta) < width ? emu::this_lane + int(delta) : emu::this_lane);
}
template <class T>
T __shfl_xor_sync(emu::lane_mask_t, T var, int lane_mask, int width = warpSize)
{
  const int src = emu::this_lane ^ lane_mask;
  const int group_end = (emu::this_lane & ~(width - 1)) + width;
  return emu::exchange(var, src < group_end ? src : emu::this_lane); // a later group's lane: own value
}
inline emu::lane_mask_t __ballot_sync(emu::lane_mask_t, int predicate) { return emu::vote(predicate != 0); }
inline int __all_sync(emu::lane_mask_t, int predicate) { return emu::vote(predicate != 0) == ~emu::lane_mask_t{0}; }
inline int __any_sync(emu::lane_mask_t, int predicate) { return emu::vote(predicate != 0) != 0; }
inline emu::lane_mask_t __activemask() { return ~emu::lane_mask_t{0}; }

// ---- atomics -------------------------------------------------------------------------------------------------
template <class T>
inline T emulated_atomic_max(T* address, T value)
{
  emu::perturb();
  std::atomic_ref<T> a(*address);
  T old = a.load();
  while (old < value && !a.compare_exchange_weak(old, value)) {}
  return old;
}
template <class T>
inline T emulated_atomic_min(T* address, T value)
{
  emu::perturb();
  std::atomic_ref<T> a(*address);
  T old = a.load();
  while (value < old && !a.compare_exchange_weak(old, value)) {}
  return old;
}
#define PAGEDATTN_EMU_INTEGER_ATOMICS(T)                                                                    \
  inline T atomicAdd(T* p, T v) { emu::perturb(); return std::atomic_ref<T>(*p).fetch_add(v); }                           \
  inline T atomicSub(T* p, T v) { return std::atomic_ref<T>(*p).fetch_sub(v); }                           \
  inline T atomicOr(T* p, T v) { return std::atomic_ref<T>(*p).fetch_or(v); }                             \
  inline T atomicAnd(T* p, T v) { return std::atomic_ref<T>(*p).fetch_and(v); }                           \
  inline T atomicExch(T* p, T v) { emu::perturb(); return std::atomic_ref<T>(*p).exchange(v); }                           \
  inline T atomicMax(T* p, T v) { return emulated_atomic_max(p, v); }                                     \
  inline T atomicMin(T* p, T v) { return emulated_atomic_min(p, v); }                                     \
  inline T atomicCAS(T* p, T compare, T v)                                                                \
  {                                                                                                       \
    emu::perturb();                                                                                       \
    std::atomic_ref<T>(*p).compare_exchange_strong(compare, v);                                           \
    return compare;                                                                                       \
  }
PAGEDATTN_EMU_INTEGER_ATOMICS(int)
PAGEDATTN_EMU_INTEGER_ATOMICS(long long)
PAGEDATTN_EMU_INTEGER_ATOMICS(unsigned long long)
#undef PAGEDATTN_EMU_INTEGER_ATOMICS
inline unsigned atomicAdd(unsigned* p, unsigned v)
{
  emu::perturb();
  const unsigned old = std::atomic_ref<unsigned>(*p).fetch_add(v);
  if (emu::after_atomic_add) { emu::after_atomic_add(p, old); }
  return old;
}
inline unsigned atomicSub(unsigned* p, unsigned v) { return std::atomic_ref<unsigned>(*p).fetch_sub(v); }
inline unsigned atomicOr(unsigned* p, unsigned v) { return std::atomic_ref<unsigned>(*p).fetch_or(v); }
inline unsigned atomicAnd(unsigned* p, unsigned v) { return std::atomic_ref<unsigned>(*p).fetch_and(v); }
inline unsigned atomicExch(unsigned* p, unsigned v) { emu::perturb(); return std::atomic_ref<unsigned>(*p).exchange(v); }
inline unsigned atomicMax(unsigned* p, unsigned v) { return emulated_atomic_max(p, v); }
inline unsigned atomicMin(unsigned* p, unsigned v) { return emulated_atomic_min(p, v); }
inline unsigned atomicCAS(unsigned* p, unsigned compare, unsigned v)
{
  emu::perturb();
  std::atomic_ref<unsigned>(*p).compare_exchange_strong(compare, v);
  return compare;
}
inline float atomicAdd(float* p, float v) { return std::atomic_ref<float>(*p).fetch_add(v); }
inline float atomicExch(float* p, float v) { return std::atomic_ref<float>(*p).exchange(v); }

// ---- cache-operator loads and stores (relaxed atomics: another block may be writing the line) ----------------
namespace emu {
inline float load_relaxed(const float* p) { perturb(); return std::atomic_ref<float>(*const_cast<float*>(p)).load(std::memory_order_relaxed); }
inline void store_relaxed(float* p, float v) { perturb_store(); std::atomic_ref<float>(*p).store(v, std::memory_order_relaxed); }
} // namespace emu
inline float __ldcg(const float* p) { return emu::load_relaxed(p); }
inline float2 __ldcg(const float2* p) { return {emu::load_relaxed(&p->x), emu::load_relaxed(&p->y)}; }
inline float4 __ldcg(const float4* p)
{
  return {emu::load_relaxed(&p->x), emu::load_relaxed(&p->y), emu::load_relaxed(&p->z), emu::load_relaxed(&p->w)};
}
inline void __stcg(float* p, float v) { emu::store_relaxed(p, v); }
inline void __stcg(float2* p, float2 v) { emu::store_relaxed(&p->x, v.x); emu::store_relaxed(&p->y, v.y); }
inline void __stcg(float4* p, float4 v)
{
  emu::store_relaxed(&p->x, v.x); emu::store_relaxed(&p->y, v.y); emu::store_relaxed(&p->z, v.z); emu::store_relaxed(&p->w, v.w);
}
template <class T> T __ldg(const T* p) { return *p; }
template <class T> T __ldca(const T* p) { return __ldcg(p); }
template <class T> T __ldcs(const T* p) { return __ldcg(p); }
template <class T> void __stcs(T* p, T v) { __stcg(p, v); }
template <class T> void __stwt(T* p, T v) { __stcg(p, v); }

// ---- math and bit intrinsics ---------------------------------------------------------------------------------
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __powf(float x, float y) { return std::pow(x, y); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float a) { return 1.f / a; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __saturatef(float x) { return x < 0.f ? 0.f : x > 1.f ? 1.f : x; }
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline int __float_as_int(float x) { return std::bit_cast<int>(x); }
inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline unsigned __brev(unsigned x)
{
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) { r |= ((x >> i) & 1u) << (31 - i); }
  return r;
}
// CUDA's unqualified min/max overloads (the device code calls them unqualified).
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }

// ---- the runtime API: stubs that compile (no device here) ----------------------------------------------------
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorNoDevice = 100,
  cudaErrorNotSupported = 801,
  cudaErrorCooperativeLaunchTooLarge = 720,
};
using cudaError = cudaError_t;
struct CUstream_st;
using cudaStream_t = CUstream_st*;
struct CUevent_st;
using cudaEvent_t = CUevent_st*;
enum cudaDeviceAttr {
  cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrCooperativeLaunch = 95,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
struct cudaFuncAttributes {
  std::size_t sharedSizeBytes = 0, constSizeBytes = 0, localSizeBytes = 0;
  int maxThreadsPerBlock = 0, numRegs = 0, ptxVersion = 0, binaryVersion = 0;
};
enum cudaLaunchAttributeID {
  cudaLaunchAttributeCooperative = 2,
  cudaLaunchAttributeProgrammaticStreamSerialization = 5,
};
union cudaLaunchAttributeValue {
  int cooperative;
  int programmaticStreamSerializationAllowed;
};
struct cudaLaunchAttribute {
  cudaLaunchAttributeID id;
  cudaLaunchAttributeValue val;
};
struct cudaLaunchConfig_t {
  dim3 gridDim, blockDim;
  std::size_t dynamicSmemBytes = 0;
  cudaStream_t stream = nullptr;
  cudaLaunchAttribute* attrs = nullptr;
  unsigned numAttrs = 0;
};
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice, cudaMemcpyDefault };

inline const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "emulated CUDA error (no device)"; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaPeekAtLastError() { return cudaSuccess; }
inline cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
inline cudaError_t cudaGetDeviceCount(int* n) { *n = 0; return cudaErrorNoDevice; }
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr, int) { *v = 0; return cudaErrorNoDevice; }
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
enum cudaStreamCaptureStatus { cudaStreamCaptureStatusNone = 0, cudaStreamCaptureStatusActive = 1, cudaStreamCaptureStatusInvalidated = 2 };
inline cudaError_t cudaStreamIsCapturing(cudaStream_t, cudaStreamCaptureStatus* status) // the emulation captures no graphs
{
  *status = cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
inline cudaError_t cudaMalloc(void** p, std::size_t n) { *p = std::aligned_alloc(256, (n + 255) / 256 * 256); return *p ? cudaSuccess : cudaErrorMemoryAllocation; }
template <class T> cudaError_t cudaMalloc(T** p, std::size_t n) { return cudaMalloc(reinterpret_cast<void**>(p), n); }
inline cudaError_t cudaFree(void* p) { std::free(p); return cudaSuccess; }
inline cudaError_t cudaMemset(void* p, int v, std::size_t n) { std::memset(p, v, n); return cudaSuccess; }
inline cudaError_t cudaMemsetAsync(void* p, int v, std::size_t n, cudaStream_t = nullptr) { std::memset(p, v, n); return cudaSuccess; }
inline cudaError_t cudaMemcpy(void* d, const void* s, std::size_t n, cudaMemcpyKind) { std::memcpy(d, s, n); return cudaSuccess; }
inline cudaError_t cudaMemcpyAsync(void* d, const void* s, std::size_t n, cudaMemcpyKind, cudaStream_t = nullptr) { std::memcpy(d, s, n); return cudaSuccess; }
template <class F> cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, F) { *a = {}; return cudaErrorNoDevice; }
template <class F> cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) { return cudaErrorNoDevice; }
template <class F> cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* n, F, int, std::size_t) { *n = 0; return cudaErrorNoDevice; }
template <class F, class... Args> cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t*, F, Args...) { return cudaErrorNoDevice; }
