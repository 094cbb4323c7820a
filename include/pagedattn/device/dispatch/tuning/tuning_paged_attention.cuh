#pragma once
// Tuning policies of the paged decode, one per architecture, each derived from AgentPagedAttentionPolicy
// (which documents every member and its default), and the chain that picks one (CUB's ChainedPolicy idea,
// reduced to what pagedattn needs).
//
// The host and the kernel pick the same policy: the kernel takes the policy of the architecture its code
// was compiled for (__CUDA_ARCH__, or __ILUVATAR__), and the host the one for the PTX version of the code
// the device runs (cudaFuncGetAttributes, as CUB does), not for the device's compute capability.
//
// Partition size: unless DecodeArguments::partition_tokens fixes it, the launch splits the longest
// sequence into partitions that fill whole waves of min_blocks_per_sm blocks per SM: a multiple of 32
// tokens, at most max_partition_tokens and max_partition_blocks cache blocks (device/dispatch/decode_plan.cuh).
//
// To add a policy: derive from AgentPagedAttentionPolicy (or from one below), add a host test of its static
// limits in test/device/test_policy_host.cu, and either add it to DefaultPagedAttentionPolicies or pass
// SinglePolicyChain<YourPolicy> to DevicePagedAttention::Decode.
#include <cstddef>
#include <type_traits>

#include <pagedattn/agent/agent_paged_attention_policy.cuh>

namespace pagedattn {

/// Iluvatar BI-V100: 64-lane warps, CUDA cores only, no inline PTX, and the seeds' 48 KB shared-memory
/// budget (their K and V tiles of 32 x 256 fp16 took 32 KB of it; the CUDA-core fold streams K and V
/// through registers and keeps the queries, softmax weights, the block reduce, the block's partial and
/// the combine's scratch in shared memory: docs/biv100.md lists each instantiation's size).
struct PagedAttentionPolicyBIV100 : AgentPagedAttentionPolicy {
  static constexpr const char* name = "bi_v100";
  static constexpr int block_threads = 4 * warp_threads; ///< 4 warps (256 threads at 64 lanes)
  static constexpr int max_partition_tokens = 512;        ///< the seeds' partition size: the largest used
  static constexpr int max_partition_blocks = 512 / 8;    ///< every block size allows 512
  static constexpr std::size_t smem_budget_bytes = 48 * 1024;
  static constexpr int key_vectors_in_flight = 4;
  static constexpr bool tensor_cores = false;            ///< no inline PTX on BI-V100: CUDA cores only
};

/// NVIDIA Ampere and Ada (sm_80, sm_86, sm_89). Two 32 KB stages (head 256) keep a block under the
/// 99 KB that sm_86/sm_89 allow per block; A100 (164 KB per SM) holds two such blocks.
struct PagedAttentionPolicySm80 : AgentPagedAttentionPolicy {
  static constexpr const char* name = "sm80";
  static constexpr int max_partition_tokens = 4096; ///< (2048 at block size 8: max_partition_blocks)
  static constexpr int max_partition_blocks = 256;  ///< block-table entries staged in shared memory (1 KB)
  static constexpr std::size_t smem_budget_bytes = 99 * 1024;
  static constexpr int min_blocks_per_sm = 2;
  static constexpr int key_vectors_in_flight = 8; ///< CUDA-core tile (fp32)
  static constexpr bool tensor_cores = true;     ///< mma.sync for fp16/bf16 (fp32 stays on CUDA cores)
  static constexpr int stages = 2;
  static constexpr int tile_bytes = 32 * 1024;   ///< whole 32-token slabs: two at head <= 128, one at 256
  static constexpr bool one_wave_combine = true;
};

/// NVIDIA Hopper (sm_90): sm_80's policy with 228 KB of shared memory per SM, and tensor copies. Two 32 KB
/// stages per block. Two blocks share an SM at every head size (Nsight Compute: registers at head 256; at
/// head 128 a block's 77 KB plus the 1 KB the SM reserves per block). min_blocks_per_sm = 2 sets the
/// automatic partition count (one wave of 2 blocks per SM), and the launch bound of 3 (a 170-register
/// cap) measured 17 % slower at 64x4096. (A third block at head 128:
/// bench/NOTES.md, "Partition size: the wave model".) Chosen with bench/bench_policies.cu
/// (bench/NOTES.md, "The K/V pipeline: stages and alignment").
struct PagedAttentionPolicySm90 : PagedAttentionPolicySm80 {
  static constexpr const char* name = "sm90";
  static constexpr std::size_t smem_budget_bytes = 227 * 1024 / 3; ///< meant for three blocks per SM (see above)
  /// At head 128 the plain kernel takes 140 registers (three blocks per SM), the persistent one 191 (two);
  /// bounded to three it takes 168, with 60 bytes of spill stores (ptxas, nvcc 13; the plan's registers
  /// held across the loop, AgentDecodePlan). At head 256 both hold two blocks per SM (231 and 255
  /// registers), and a bound of three would spill 854 bytes.
  static constexpr int persistent_blocks_per_sm_to_head_128 = 3;
  /// The cache's runs move by tensor copies (the Tensor Memory Accelerator) issued by one warp: the probe
  /// bench_paged_read, with a fold's work per tile, streamed 97-98 % of the read bandwidth with bulk
  /// copies and 92-95 % with cp.async by every thread (bench/NOTES.md, "Tensor copies on sm_90").
  /// Tensor copies rather than plain bulk copies: as fast, V lands swizzled (no bank conflicts), and racecheck
  /// tracks them (it reports even a correct plain bulk-copy pipeline's writes as hazards).
  static constexpr KvCopy kv_copy = KvCopy::bulk_tensor;
};

/// A policy chain: Policy for code of PTX version MinPtxVersion (major * 10 + minor) and later, Next (a
/// chain) below it; without Next, Policy for every version. The host and the kernel read the one list:
/// the kernel's code takes device_policy by __CUDA_ARCH__ (host code: the last link's), the host calls
/// invoke() with the PTX version of the kernels the device runs. (CUB's ChainedPolicy, reduced.)
template <int MinPtxVersion, class Policy, class Next = void>
struct ChainedPolicy {
#if defined(__CUDA_ARCH__)
  using device_policy = std::conditional_t<(__CUDA_ARCH__ >= MinPtxVersion * 10), Policy, typename Next::device_policy>;
#else
  using device_policy = typename Next::device_policy;
#endif
  /// Call f(Policy{}) with the policy for ptx_version; returns f's result.
  template <class F>
  static auto invoke(int ptx_version, F&& f)
  {
    if (ptx_version >= MinPtxVersion) { return f(Policy{}); }
    return Next::invoke(ptx_version, static_cast<F&&>(f));
  }
};
/// The chain's last link: Policy for every version.
template <int MinPtxVersion, class Policy>
struct ChainedPolicy<MinPtxVersion, Policy, void> {
  using device_policy = Policy;
  template <class F>
  static auto invoke(int, F&& f) { return f(Policy{}); }
};

/// One policy for every architecture: how a user passes their own (or the BI-V100 policy on NVIDIA).
template <class Policy>
using SinglePolicyChain = ChainedPolicy<0, Policy>;

/// The default chain: BI-V100 under __ILUVATAR__, else sm_90 for code of PTX version >= 9.0 and sm_80 below.
#if defined(__ILUVATAR__)
using DefaultPagedAttentionPolicies = SinglePolicyChain<PagedAttentionPolicyBIV100>;
#else
using DefaultPagedAttentionPolicies = ChainedPolicy<90, PagedAttentionPolicySm90, SinglePolicyChain<PagedAttentionPolicySm80>>;
#endif

} // namespace pagedattn
