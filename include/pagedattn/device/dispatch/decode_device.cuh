#pragma once
// What the dispatch needs to know about the device and about one decode kernel instantiation, asked of
// the CUDA runtime once per device and cached (a Decode call then makes one runtime query,
// cudaGetDevice, and cudaFuncSetAttribute before kernels that opt in to more than 48 KB of shared
// memory): the PTX version of the code the device runs (which selects the host's policy, as CUB does),
// the SM count, cooperative-launch support, the shared-memory limit and each kernel's resident blocks
// per SM.
#include <pagedattn/device/dispatch/kernels/decode_kernels.cuh>
#include <pagedattn/util_error.cuh>

#include <atomic>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

namespace pagedattn {
namespace detail {

struct DeviceInfo {
  bool queried = false;
  int device = 0;
  int ptx_version = 0;             ///< major * 10 + minor of the decode code the device runs (NVIDIA)
  int sm_count = 0;
  bool cooperative_launch = false; ///< never on BI-V100 (not queried there)
  /// Dynamic shared memory a kernel may use: the opt-in limit on NVIDIA, the plain per-block limit on
  /// BI-V100 (CoreX offers no opt-in beyond it). No size is assumed anywhere.
  int max_shared_per_block = 0;
};

/// The current device's DeviceInfo, queried on the first call per device and cached.
inline cudaError_t current_device_info(DeviceInfo& info)
{
  int device = 0;
  PAGEDATTN_RETURN_IF_ERROR(check_cuda(cudaGetDevice(&device), "cudaGetDevice"));
  static std::mutex mutex;
  static std::vector<DeviceInfo> cache; // by device
  const std::lock_guard<std::mutex> lock(mutex);
  if (static_cast<std::size_t>(device) < cache.size() && cache[device].queried)
  {
    info = cache[device];
    return cudaSuccess;
  }
  DeviceInfo fresh;
  fresh.device = device;
  PAGEDATTN_RETURN_IF_ERROR(
      check_cuda(cudaDeviceGetAttribute(&fresh.sm_count, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute(SM count)"));
#if defined(__ILUVATAR__)
  constexpr cudaDeviceAttr shared_limit = cudaDevAttrMaxSharedMemoryPerBlock;
#else
  constexpr cudaDeviceAttr shared_limit = cudaDevAttrMaxSharedMemoryPerBlockOptin;
#endif
  PAGEDATTN_RETURN_IF_ERROR(check_cuda(cudaDeviceGetAttribute(&fresh.max_shared_per_block, shared_limit, device),
                                       "cudaDeviceGetAttribute(shared memory per block)"));
#if !defined(__ILUVATAR__) // BI-V100: one policy, no cooperative launches (the launch never asks for one)
  cudaFuncAttributes probe{};
  PAGEDATTN_RETURN_IF_ERROR(check_cuda(cudaFuncGetAttributes(&probe, ptx_version_probe_kernel<>),
                                       "cudaFuncGetAttributes (is the binary compiled for this GPU's architecture?)"));
  fresh.ptx_version = probe.ptxVersion;
  int cooperative = 0;
  PAGEDATTN_RETURN_IF_ERROR(
      check_cuda(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device), "cudaDeviceGetAttribute(cooperative launch)"));
  fresh.cooperative_launch = cooperative != 0;
#endif
  fresh.queried = true;
  if (cache.size() <= static_cast<std::size_t>(device)) { cache.resize(static_cast<std::size_t>(device) + 1); }
  cache[device] = fresh;
  info = fresh;
  return cudaSuccess;
}

/// Whether `stream` is capturing a CUDA graph (then the decode's grid is persistent: a graph may be replayed
/// with any lengths under its bound).
inline cudaError_t stream_is_capturing(cudaStream_t stream, bool& capturing)
{
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  PAGEDATTN_RETURN_IF_ERROR(check_cuda(cudaStreamIsCapturing(stream, &status), "cudaStreamIsCapturing"));
  capturing = status != cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

/// Shared memory of one thread block of an instantiation (a DecodeTraits): the launch's size and the policies'
/// budget checks.
template <class Traits>
constexpr std::size_t paged_attention_smem_bytes()
{
  return sizeof(typename AgentPagedAttention<Traits>::TempStorage);
}

/// Devices whose per-kernel facts are cached; a device past them is asked every time.
inline constexpr int cached_devices = 64;

/// One instantiation of the decode kernel and its facts. Traits: a DecodeTraits (agent/decode_traits.cuh).
/// PolicyChain: the chain whose device_policy compiles the kernel's body (paged_attention_kernel). Persistent:
/// its grid is the resident blocks, which draw tickets until the items run out; else a block per item (see
/// choose_grid). QueryOffsets: for launches with query offsets (DecodeArguments::query_start_loc); the kernel
/// of launches without them has none of their code.
template <class Traits, class PolicyChain, bool Persistent, bool QueryOffsets = false>
struct DecodeKernel {
  using Agent = AgentPagedAttention<Traits>;
  using AgentPolicy = typename Traits::AgentPolicy;
  using KvLayout = typename Traits::KvLayout;
  using Variant = typename Traits::Variant;
  using Params = PagedAttentionParams<typename Traits::T, typename Traits::KvT>;
  static constexpr int head_dim = Traits::head_dim;
  static constexpr int block_threads = AgentPolicy::block_threads;
  static constexpr std::size_t smem_bytes = paged_attention_smem_bytes<Traits>();
  /// The policy asks for one-wave launches and the agent's storage has room for the slice fold.
  static constexpr bool one_wave_capable = Agent::one_wave_capable && AgentPolicy::one_wave_combine;

  static constexpr bool persistent = Persistent;
  static constexpr bool query_offsets = QueryOffsets;

  static auto function()
  {
    return paged_attention_kernel<Traits, PolicyChain, Persistent, QueryOffsets>;
  }

  /// Make smem_bytes of dynamic shared memory available, or fail naming the policy and the head size when
  /// the device offers less: then nothing is launched. NVIDIA GPUs since sm_70 give every kernel 48 KB and
  /// more on opt-in (set before every launch that needs it, as cheap as the launch's own bookkeeping).
  static cudaError_t reserve_shared_memory(const DeviceInfo& info)
  {
    if (static_cast<std::size_t>(info.max_shared_per_block) < smem_bytes)
    {
      return fail(cudaErrorInvalidConfiguration, std::string("pagedattn::Decode: policy ") + AgentPolicy::name + " needs " +
                                                     std::to_string(smem_bytes) + " bytes of shared memory per block, the device allows " +
                                                     std::to_string(info.max_shared_per_block) + " (head_size " + std::to_string(head_dim) + ")");
    }
#if !defined(__ILUVATAR__)
    if constexpr (smem_bytes > 48 * 1024)
    {
      return check_cuda(cudaFuncSetAttribute(function(), cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_bytes)),
                        "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
    }
#endif
    return cudaSuccess;
  }

  /// Whether launches of this kernel on this device may be cooperative (one wave: the slice fold).
  static bool cooperative_capable(const DeviceInfo& info) { return one_wave_capable && info.cooperative_launch; }

  /// Blocks of this kernel that can be resident on the whole device at once: the persistent grid. The
  /// occupancy is asked once per device.
  static cudaError_t resident_blocks(const DeviceInfo& info, std::size_t& blocks)
  {
    static std::atomic<int> per_sm_cache[cached_devices] = {}; // 0: not yet asked (the kernel fits at least 1)
    int per_sm = info.device < cached_devices ? per_sm_cache[info.device].load(std::memory_order_relaxed) : 0;
    if (per_sm == 0)
    {
      PAGEDATTN_RETURN_IF_ERROR(reserve_shared_memory(info)); // the occupancy counts the opted-in size
      PAGEDATTN_RETURN_IF_ERROR(check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, function(), block_threads, smem_bytes),
                                           "cudaOccupancyMaxActiveBlocksPerMultiprocessor"));
      if (per_sm < 1) { per_sm = 1; }
      if (info.device < cached_devices) { per_sm_cache[info.device].store(per_sm, std::memory_order_relaxed); }
    }
    blocks = static_cast<std::size_t>(per_sm) * static_cast<std::size_t>(info.sm_count);
    return cudaSuccess;
  }
};

} // namespace detail
} // namespace pagedattn
