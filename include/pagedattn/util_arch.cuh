#pragma once
// The architecture header: the hardware warp width and every shuffle, vote, fence, sleep, asynchronous
// copy and cache-modified memory access pagedattn uses. Inline PTX lives here and in two other headers,
// each guarded so that it compiles out under __ILUVATAR__: warp/warp_mma.cuh (mma.sync, ldmatrix; sm_80+)
// and thread/thread_fp8.cuh (cvt of fp8 pairs to f16x2; sm_89+). Other headers call only intrinsics
// that every CUDA dialect has (__syncthreads_and/_or, __clz, __expf, __hmul2, the fp16/bf16 conversions),
// and grid/grid_barrier.cuh the CUDA runtime's grid barrier (outside __ILUVATAR__). So porting to another
// dialect means editing this file and those guards.
//
//   NVIDIA (sm_70+) : 32-lane warps, PTX cache operators, acquire/release by st.release / ld.acquire /
//                    atom.acq_rel (fences below sm_70).
//   Iluvatar BI-V100 (__ILUVATAR__): 64-lane warps, no inline PTX, no __nanosleep; volatile accesses plus
//                    __threadfence() give the ordering (see docs/architecture.md, "Portability").
#include <cstdint>
#include <type_traits>

#include <pagedattn/config.cuh>

namespace pagedattn {

#if defined(__ILUVATAR__)
/// Threads in a hardware warp.
inline constexpr int warp_threads = 64;
#else
inline constexpr int warp_threads = 32;
#endif

/// A set of lanes of the hardware warp, bit i for lane i (what arch::ballot returns).
using lane_mask_t = std::conditional_t<warp_threads == 64, unsigned long long, unsigned>;
static_assert(sizeof(lane_mask_t) * 8 >= warp_threads, "lane_mask_t holds a bit per lane");

/// log2 of the hardware warp width.
inline constexpr int log2_warp_threads = warp_threads == 64 ? 6 : 5;

/// True for powers of two (logical warp widths, vector widths).
__host__ __device__ constexpr bool is_power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

/// Integer ceiling division.
template <class T>
__host__ __device__ constexpr T ceil_div(T a, T b) { return (a + b - 1) / b; }

/// The head width the tensor-core fold computes over: whole 16-dim mma k-steps. A head size that is not a
/// multiple of 16 (120) is carried in a tile this wide whose dims past the head are zero in K and the
/// queries and never stored.
__host__ __device__ constexpr int tensor_core_head_dim(int head_dim) { return (head_dim + 15) / 16 * 16; }

namespace arch {

/// Lane index inside the hardware warp.
PAGEDATTN_DEVICE int lane_id() { return static_cast<int>(threadIdx.x) & (warp_threads - 1); }
/// Warp index inside a 1-D thread block.
PAGEDATTN_DEVICE int warp_id() { return static_cast<int>(threadIdx.x) / warp_threads; }

// ---- the toolkit's lane masks ------------------------------------------------------------------------
// The *_sync intrinsics take a mask of the toolkit's own type: 32 bits in NVIDIA's and clang's CUDA headers,
// and on a 64-lane SDK whatever it declares. The library never narrows a 64-bit mask into it (that would
// silently drop lanes 32-63): it passes all ones of the toolkit's type, and builds a ballot from
// shuffles where the toolkit's ballot is narrower than the warp (ballot below).
namespace detail {
template <class Result, class Mask, class Predicate>
Mask sync_mask_parameter(Result (*)(Mask, Predicate));
/// The mask type of the toolkit's *_sync intrinsics (deduced from __ballot_sync's declaration).
using sdk_lane_mask_t = decltype(sync_mask_parameter(&__ballot_sync));
/// The type the toolkit's __ballot_sync returns.
using sdk_ballot_t = decltype(__ballot_sync(sdk_lane_mask_t{}, 0));
static_assert(std::is_integral_v<sdk_lane_mask_t> && std::is_integral_v<sdk_ballot_t>, "integral lane masks");
} // namespace detail

/// Every lane, in the toolkit's mask type.
inline constexpr detail::sdk_lane_mask_t full_lane_mask = static_cast<detail::sdk_lane_mask_t>(~detail::sdk_lane_mask_t{0});
/// Whether the toolkit's ballot has a bit for every lane (else ballot() is built from shuffles).
inline constexpr bool native_ballot = sizeof(detail::sdk_ballot_t) * 8 >= warp_threads;

// ---- shuffles (every lane of the hardware warp must call them; `width` splits the warp into logical
//      warps of that many lanes, each shuffling only inside itself) -------------------------------------
template <class T>
PAGEDATTN_DEVICE T shfl_down(T value, int delta, int width = warp_threads)
{
  return __shfl_down_sync(full_lane_mask, value, static_cast<unsigned>(delta), width);
}
template <class T>
PAGEDATTN_DEVICE T shfl_xor(T value, int lane_mask, int width = warp_threads)
{
  return __shfl_xor_sync(full_lane_mask, value, lane_mask, width);
}
template <class T>
PAGEDATTN_DEVICE T shfl_idx(T value, int src_lane, int width = warp_threads)
{
  return __shfl_sync(full_lane_mask, value, src_lane, width);
}

// ---- votes -----------------------------------------------------------------------------------------
PAGEDATTN_DEVICE bool all_lanes(bool predicate) { return __all_sync(full_lane_mask, predicate); }
PAGEDATTN_DEVICE bool any_lane(bool predicate) { return __any_sync(full_lane_mask, predicate); }

namespace detail {
/// A ballot whatever the width of the toolkit's: each lane contributes its bit, and an xor butterfly of
/// shuffles ORs them together (log2(warp_threads) shuffles of a lane_mask_t).
PAGEDATTN_DEVICE lane_mask_t ballot_by_shuffles(bool predicate)
{
  lane_mask_t bits = predicate ? lane_mask_t(1) << lane_id() : lane_mask_t(0);
#pragma unroll
  for (int mask = 1; mask < warp_threads; mask *= 2) { bits |= shfl_xor(bits, mask); }
  return bits;
}
} // namespace detail

/// Bit i set when lane i's predicate holds.
PAGEDATTN_DEVICE lane_mask_t ballot(bool predicate)
{
  if constexpr (native_ballot) { return static_cast<lane_mask_t>(__ballot_sync(full_lane_mask, predicate)); }
  else { return detail::ballot_by_shuffles(predicate); }
}
/// Lowest set lane of a non-zero mask.
PAGEDATTN_DEVICE int lowest_lane(lane_mask_t mask)
{
  if constexpr (sizeof(lane_mask_t) == 8) { return __ffsll(static_cast<long long>(mask)) - 1; }
  else { return __ffs(static_cast<int>(mask)) - 1; }
}
/// Mask of the lanes below `lane`.
PAGEDATTN_DEVICE lane_mask_t lanes_below(int lane) { return (lane_mask_t(1) << lane) - 1; }
PAGEDATTN_DEVICE void sync_warp() { __syncwarp(full_lane_mask); }

// ---- fences and back-off ---------------------------------------------------------------------------
/// Orders this thread's prior global writes before its later ones, as seen by every thread on the GPU.
PAGEDATTN_DEVICE void fence_device() { __threadfence(); }

/// Sleep roughly `ns` nanoseconds while polling, to leave issue slots and memory bandwidth to the
/// blocks being waited on. BI-V100 has no sleep instruction: a block fence keeps the loop from being
/// collapsed by the compiler.
PAGEDATTN_DEVICE void sleep_ns(unsigned ns)
{
#if defined(__ILUVATAR__)
  (void)ns;
  __threadfence_block();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  __nanosleep(ns);
#else
  (void)ns;
  __threadfence_block();
#endif
}

/// Back-off of a poll on other blocks (the look-back): the first retry is immediate, later
/// ones sleep, doubling from 32 ns up to a 512 ns cap. The cap stays short: the tail after the last
/// partition is what the caller waits for.
struct PollBackoff {
  static constexpr unsigned first_sleep_ns = 32;
  static constexpr unsigned max_sleep_ns = 512;
  unsigned sleep = 0;
  PAGEDATTN_DEVICE void wait()
  {
    if (sleep) { sleep_ns(sleep); }
    sleep = sleep ? (sleep * 2 > max_sleep_ns ? max_sleep_ns : sleep * 2) : first_sleep_ns;
  }
};

// ---- cross-block publication: values through L2 (bypassing the non-coherent L1), flags with
//      release/acquire ordering -----------------------------------------------------------------------
/// Store that skips L1 (cache-global), so another block reads it from L2.
PAGEDATTN_DEVICE void store_cg(float* ptr, float value)
{
#if defined(__ILUVATAR__)
  *reinterpret_cast<volatile float*>(ptr) = value;
#else
  __stcg(ptr, value);
#endif
}
PAGEDATTN_DEVICE void store_cg(float4* ptr, float4 value)
{
#if defined(__ILUVATAR__)
  volatile float* p = reinterpret_cast<volatile float*>(ptr);
  p[0] = value.x; p[1] = value.y; p[2] = value.z; p[3] = value.w;
#else
  __stcg(ptr, value);
#endif
}
/// Load that skips L1, so a value another block published is not served from a stale L1 line.
PAGEDATTN_DEVICE float load_cg(const float* ptr)
{
#if defined(__ILUVATAR__)
  return *reinterpret_cast<const volatile float*>(ptr);
#else
  return __ldcg(ptr);
#endif
}
PAGEDATTN_DEVICE float4 load_cg(const float4* ptr)
{
#if defined(__ILUVATAR__)
  const volatile float* p = reinterpret_cast<const volatile float*>(ptr);
  return make_float4(p[0], p[1], p[2], p[3]);
#else
  return __ldcg(ptr);
#endif
}
PAGEDATTN_DEVICE float2 load_cg(const float2* ptr)
{
#if defined(__ILUVATAR__)
  const volatile float* p = reinterpret_cast<const volatile float*>(ptr);
  return make_float2(p[0], p[1]);
#else
  return __ldcg(ptr);
#endif
}

/// Publish a status word: every global write this thread made before is visible to a thread that
/// reads `value` with load_acquire (and, after a __syncthreads, every write the block made before).
PAGEDATTN_DEVICE void store_release(unsigned* ptr, unsigned value)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700 && !defined(__ILUVATAR__)
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(ptr), "r"(value) : "memory");
#else
  __threadfence(); // fence + relaxed volatile store == release
  *reinterpret_cast<volatile unsigned*>(ptr) = value;
#endif
}
/// Read a status word; writes published before it (store_release) are visible to this thread's later
/// loads (and, after a __syncthreads, to the block's).
PAGEDATTN_DEVICE unsigned load_acquire(const unsigned* ptr)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700 && !defined(__ILUVATAR__)
  unsigned value;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(value) : "l"(ptr) : "memory");
  return value;
#else
  const unsigned value = *reinterpret_cast<const volatile unsigned*>(ptr); // volatile load + fence == acquire
  __threadfence();
  return value;
#endif
}
/// Counter increment with acquire-release order (returns the old value): the writes this thread made
/// before (and, after a __syncthreads, the block's) are visible to whoever increments it later, and the
/// writes of everyone who incremented it before are visible to this thread's later loads. One gpu-scope
/// acquire-release operation instead of two sequentially consistent fences.
PAGEDATTN_DEVICE unsigned atomic_add_acq_rel(unsigned* ptr, unsigned value)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700 && !defined(__ILUVATAR__)
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(ptr), "r"(value) : "memory");
  return old;
#else
  __threadfence();
  const unsigned old = atomicAdd(ptr, value);
  __threadfence();
  return old;
#endif
}

// ---- programmatic dependent launch (sm_90; no-ops elsewhere) ------------------------------------------
/// Let the kernel launched after this one in the stream (with programmatic stream serialization) start
/// now; it still waits in wait_for_prior_grids() for this grid to finish.
PAGEDATTN_DEVICE void launch_dependents()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(__ILUVATAR__)
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
/// Wait until the grids this one depends on have completed and their writes are visible (returns at once
/// for a kernel launched without programmatic stream serialization).
PAGEDATTN_DEVICE void wait_for_prior_grids()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(__ILUVATAR__)
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// Nanoseconds of the GPU's global timer (coarse; for measuring protocol latencies only). On BI-V100
/// this is the SM clock counter (cycles, not nanoseconds): timings there are relative only.
PAGEDATTN_DEVICE unsigned long long global_timer_ns()
{
#if defined(__CUDA_ARCH__) && !defined(__ILUVATAR__)
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else // BI-V100; and a host compiler running the device code (test/emulation), which has no PTX
  return clock64();
#endif
}

// ---- asynchronous global -> shared copies (cp.async on sm_80+; a plain copy elsewhere) ----------------
/// Copy 16 bytes from global to shared memory without holding them in registers: the first src_bytes
/// (0..16) come from `src`, the rest of the 16 are zero-filled. src_bytes == 0 reads nothing (`src` must
/// still be a valid address). Completion: copy_async_commit() closes a group, copy_async_wait<N>() waits
/// until at most N of this thread's groups are pending; a __syncthreads() then publishes them block-wide.
PAGEDATTN_DEVICE void copy_async_16(void* dst, const void* src, int src_bytes)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(__ILUVATAR__)
  const unsigned smem = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(src), "r"(src_bytes) : "memory");
#else
  unsigned char* d = static_cast<unsigned char*>(dst);
  const unsigned char* s = static_cast<const unsigned char*>(src);
  for (int i = 0; i < 16; ++i) { d[i] = i < src_bytes ? s[i] : 0; }
#endif
}
/// Close this thread's current group of asynchronous copies.
PAGEDATTN_DEVICE void copy_async_commit()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(__ILUVATAR__)
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
/// Wait until at most `Pending` of this thread's committed groups are still in flight.
template <int Pending>
PAGEDATTN_DEVICE void copy_async_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(__ILUVATAR__)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
#endif
}

// ---- bulk copies with mbarrier completion (cp.async.bulk, sm_90) -----------------------------------------
// One thread moves a whole contiguous run of global memory (a multiple of 16 bytes, 16-byte aligned at both
// ends) into shared memory; the copy engine signals the bytes it wrote on a shared-memory mbarrier
// ("complete_tx"). A waiter that saw the barrier's phase complete sees the bytes. Only code compiled for
// sm_90 may call these (the sm_90 policy's pipeline, KvSlabBulk); elsewhere they do not compile.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(__ILUVATAR__) && defined(__CUDACC_VER_MAJOR__) && __CUDACC_VER_MAJOR__ >= 12
#define PAGEDATTN_HAS_BULK_COPY 1
namespace detail {
PAGEDATTN_DEVICE unsigned shared_address(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
} // namespace detail
/// Make `bar` a barrier whose phase completes after `arrivals` arrivals and all the bytes it expects.
PAGEDATTN_DEVICE void mbarrier_init(std::uint64_t* bar, unsigned arrivals)
{
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(detail::shared_address(bar)), "r"(arrivals) : "memory");
}
/// Publish this thread's mbarrier_init()s to the copy engine (then a __syncthreads to the block).
PAGEDATTN_DEVICE void fence_mbarrier_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
/// End `bar`'s life as a barrier (every phase complete), so that its 8 bytes may hold anything else.
PAGEDATTN_DEVICE void mbarrier_inval(std::uint64_t* bar)
{
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(detail::shared_address(bar)) : "memory");
}
/// One arrival on `bar`, which from now on also waits for `bytes` more bytes of bulk copies.
PAGEDATTN_DEVICE void mbarrier_arrive_expect_tx(std::uint64_t* bar, unsigned bytes)
{
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(detail::shared_address(bar)), "r"(bytes) : "memory");
}
/// One arrival on `bar`.
PAGEDATTN_DEVICE void mbarrier_arrive(std::uint64_t* bar)
{
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(detail::shared_address(bar)) : "memory");
}
/// Whether the phase of `bar` with this parity (0 for its first phase, then 1, 0, ...) has completed; the
/// thread may be suspended for a while before it answers "not yet".
PAGEDATTN_DEVICE bool mbarrier_try_wait(std::uint64_t* bar, unsigned parity)
{
  unsigned done;
  asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
               : "=r"(done)
               : "r"(detail::shared_address(bar)), "r"(parity)
               : "memory");
  return done != 0;
}
/// Wait until the phase of `bar` with this parity has completed.
PAGEDATTN_DEVICE void mbarrier_wait(std::uint64_t* bar, unsigned parity)
{
  while (!mbarrier_try_wait(bar, parity)) {}
}
/// Copy `bytes` (a multiple of 16) from global `src` to shared `dst` (both 16-byte aligned); the bytes
/// count towards `bar`'s expected bytes when they land.
PAGEDATTN_DEVICE void copy_bulk(void* dst, const void* src, unsigned bytes, std::uint64_t* bar)
{
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(detail::shared_address(dst)),
               "l"(src), "r"(bytes), "r"(detail::shared_address(bar))
               : "memory");
}
/// Copy the box at coordinates (c0, c1, c2) of the 3-D tensor that `tensor_map` (a CUtensorMap in
/// parameter, constant or global memory: a __grid_constant__ kernel parameter's address) describes into
/// shared `dst` (aligned as the map's swizzle requires); the box's bytes count towards `bar`'s expected bytes.
PAGEDATTN_DEVICE void copy_tensor_3d(void* dst, const void* tensor_map, int c0, int c1, int c2, std::uint64_t* bar)
{
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(
                   detail::shared_address(dst)),
               "l"(tensor_map), "r"(c0), "r"(c1), "r"(c2), "r"(detail::shared_address(bar))
               : "memory");
}
/// The same for a 5-D tensor: the box at (c0, .., c4).
PAGEDATTN_DEVICE void copy_tensor_5d(void* dst, const void* tensor_map, int c0, int c1, int c2, int c3, int c4, std::uint64_t* bar)
{
  asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5, %6}], [%7];" ::"r"(
                   detail::shared_address(dst)),
               "l"(tensor_map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(detail::shared_address(bar))
               : "memory");
}
/// Order this thread's earlier generic-proxy accesses to shared memory before later bulk copies into it
/// (issued by any thread of the block after a barrier): shared memory reused from plain stores to copies.
PAGEDATTN_DEVICE void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
#endif

/// Atomic ticket / counter: returns the old value.
PAGEDATTN_DEVICE unsigned atomic_fetch_add(unsigned* ptr, unsigned value) { return atomicAdd(ptr, value); }
/// Atomic maximum (timestamps).
PAGEDATTN_DEVICE void atomic_max(unsigned long long* ptr, unsigned long long value) { atomicMax(ptr, value); }

} // namespace arch
} // namespace pagedattn
