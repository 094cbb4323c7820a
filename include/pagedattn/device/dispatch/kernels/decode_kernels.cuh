#pragma once
// The kernels of the paged decode: the decode itself (a persistent grid whose blocks plan the launch from
// the lengths and take its work items, AgentPagedAttention), its init pass, and the probe whose PTX
// version tells the host which policy the device's code was compiled with.
#include <pagedattn/agent/agent_paged_attention.cuh>

#include <cstddef>
#include <type_traits>

namespace pagedattn {
namespace detail {

/// Blocks per SM the decode kernel is compiled for (its launch bound).
template <class Policy, int HeadDim, bool Persistent>
constexpr int decode_launch_bound()
{
  return Persistent && HeadDim <= 128 && Policy::persistent_blocks_per_sm_to_head_128 > 0 ? Policy::persistent_blocks_per_sm_to_head_128
                                                                                            : Policy::min_blocks_per_sm;
}

/// Traits: a DecodeTraits (agent/decode_traits.cuh). Persistent: a grid of the resident blocks that draw tickets
/// until the items run out; else a block per item of the host's bound (AgentPagedAttention::Run). QueryOffsets:
/// the launch has query offsets (DecodeArguments::query_start_loc).
///
/// Traits::AgentPolicy is the policy the host planned with: PolicyChain::invoke picks it from the PTX version of
/// the code the device runs, which is code compiled with PolicyChain::device_policy == that policy. Compiled for any
/// other architecture this instantiation is never launched, so its body is left out there (a trap, should a
/// chain break that contract): each architecture compiles its own policy's kernels only.
template <class Traits, class PolicyChain, bool Persistent, bool QueryOffsets>
__global__ void
__launch_bounds__(Traits::AgentPolicy::block_threads, (decode_launch_bound<typename Traits::AgentPolicy, Traits::head_dim, Persistent>()))
paged_attention_kernel(const PAGEDATTN_GRID_CONSTANT PagedAttentionParams<typename Traits::T, typename Traits::KvT> params,
                       const typename Traits::Variant variant)
{
  if constexpr (std::is_same_v<typename Traits::AgentPolicy, typename PolicyChain::device_policy>)
  {
    using Agent = AgentPagedAttention<Traits>;
    // Dynamic shared memory: the tensor-core pipeline's buffers exceed the 48 KB of static storage. (Aligned
    // to 1024 bytes: the slabs at its start need 128 for their copies and ldmatrix rows, see
    // PartitionFoldTensorCore::TempStorage, and the tensor copies' swizzle 512.) The parameters are a
    // __grid_constant__: the tensor copies take their tensor maps' addresses.
    extern __shared__ __align__(1024) unsigned char paged_attention_smem[];
    Agent(*reinterpret_cast<typename Agent::TempStorage*>(paged_attention_smem), params, variant).template Run<Persistent, QueryOffsets>();
    PAGEDATTN_TRACE_POINT(TracePoint::block_done);
  }
  else
  {
    (void)params;
    (void)variant;
    __trap();
  }
}

/// The init pass of a launch that may combine by look-back: zeroes the ticket, arrival counters and status
/// words. It lets the decode kernel start at once (programmatic dependent launch, sm_90): the decode waits
/// for this grid's completion only where it first touches those words (before its first ticket, or before
/// its arrival).
template <class Word>
__global__ void reset_partition_state_kernel(Word* words, std::size_t count)
{
  arch::launch_dependents();
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count; i += std::size_t(gridDim.x) * blockDim.x) { words[i] = 0; }
}

/// Compiled with the same flags as the decode kernels, so its PTX version (cudaFuncGetAttributes) is that
/// of the decode code the device runs (CUB's EmptyKernel; a template, so that every translation unit may
/// hold it).
template <class = void>
__global__ void ptx_version_probe_kernel() {}

} // namespace detail
} // namespace pagedattn
