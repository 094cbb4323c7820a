#pragma once
// Tuning policies of the paged decode: plain structs of compile-time constants, one per architecture,
// and the chain that picks one (CUB's ChainedPolicy idea, reduced to what pagedattn needs).
//
// Device code takes the policy of the architecture it is compiled for (__CUDA_ARCH__, or __ILUVATAR__);
// host code takes the one for the device's compute capability. The two always agree: a binary built for
// sm_80 and sm_90 runs the sm_90 code on cc >= 9.0 (the sm_90 PTX is JIT-compiled on newer parts) and
// the sm_80 code below it.
//
// To add a policy: write a struct with the fields below, add a host test of its static limits in
// test/device/test_policy_host.cu, and either add it to DefaultPagedAttentionPolicies or pass
// SinglePolicyChain<YourPolicy> to DevicePagedAttention::Decode.
#include <cstddef>

#include <pagedattn/util_arch.cuh>

namespace pagedattn {

/// Iluvatar BI-V100: 64-lane warps, CUDA cores only, no inline PTX, and the seeds' 48 KB shared-memory
/// budget (their K and V tiles of 32 x 256 fp16 took 32 KB of it; this kernel streams K and V through
/// registers and keeps only scores, partials and the combine's staging in shared memory).
struct PagedAttentionPolicyBIV100 {
  static constexpr const char* name = "bi_v100";
  static constexpr int block_threads = 4 * warp_threads;  ///< 4 warps (256 threads at 64 lanes)
  static constexpr int partition_tokens = 512;             ///< the seeds' partition size, tunable
  static constexpr std::size_t smem_budget_bytes = 48 * 1024;
  static constexpr int min_blocks_per_sm = 1;
  static constexpr int key_chunks_in_flight = 4; ///< 16-byte key loads a lane issues before using them
};

/// NVIDIA Ampere (sm_80, sm_86, sm_89).
struct PagedAttentionPolicySm80 {
  static constexpr const char* name = "sm80";
  static constexpr int block_threads = 4 * warp_threads;
  static constexpr int partition_tokens = 512;
  static constexpr std::size_t smem_budget_bytes = 48 * 1024;
  static constexpr int min_blocks_per_sm = 2;
  static constexpr int key_chunks_in_flight = 8;
};

/// NVIDIA Hopper (sm_90): 132 SMs want more partitions per sequence. Chosen with bench/bench_policies.cu
/// (bench/NOTES.md): 3 blocks of 128 threads per SM beat 2 (more loads in flight) on large batches.
struct PagedAttentionPolicySm90 {
  static constexpr const char* name = "sm90";
  static constexpr int block_threads = 4 * warp_threads;
  static constexpr int partition_tokens = 256;
  static constexpr std::size_t smem_budget_bytes = 48 * 1024;
  static constexpr int min_blocks_per_sm = 3;
  static constexpr int key_chunks_in_flight = 8;
};

/// The default chain: BI-V100 under __ILUVATAR__, else sm_90 for cc >= 9.0 and sm_80 below.
struct DefaultPagedAttentionPolicies {
#if defined(__ILUVATAR__)
  using device_policy = PagedAttentionPolicyBIV100;
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using device_policy = PagedAttentionPolicySm90;
#else
  using device_policy = PagedAttentionPolicySm80;
#endif

  /// Call f(Policy{}) with the policy for compute capability major*10+minor; returns f's result.
  template <class F>
  static auto invoke(int compute_capability, F&& f)
  {
#if defined(__ILUVATAR__)
    (void)compute_capability;
    return f(PagedAttentionPolicyBIV100{});
#else
    if (compute_capability >= 90) { return f(PagedAttentionPolicySm90{}); }
    return f(PagedAttentionPolicySm80{});
#endif
  }
};

/// One policy for every architecture: how a user passes their own (or the BI-V100 policy on NVIDIA).
template <class Policy>
struct SinglePolicyChain {
  using device_policy = Policy;
  template <class F>
  static auto invoke(int, F&& f) { return f(Policy{}); }
};

} // namespace pagedattn
