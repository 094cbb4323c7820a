#pragma once
// The kernels of the paged decode: the planning pass (AgentDecodePlan), the decode itself (a persistent
// grid whose blocks take the planned work items, AgentPagedAttention), and the probe whose PTX version
// tells the host which policy the device's code was compiled with.
#include <pagedattn/agent/agent_decode_plan.cuh>
#include <pagedattn/agent/agent_paged_attention.cuh>

#include <cstddef>

namespace pagedattn {
namespace detail {

template <class T, int HeadDim, int MaxHeads, class PolicyChain>
__global__ void __launch_bounds__(PolicyChain::device_policy::block_threads, PolicyChain::device_policy::min_blocks_per_sm)
paged_attention_kernel(const PagedAttentionParams<T> params)
{
  using Agent = AgentPagedAttention<T, HeadDim, MaxHeads, typename PolicyChain::device_policy>;
  // Dynamic shared memory: the tensor-core pipeline's stages exceed the 48 KB of static storage. (128-byte
  // aligned: the stages at its start need it, see PartitionFoldTensorCore::TempStorage.)
  extern __shared__ __align__(128) unsigned char paged_attention_smem[];
  Agent(*reinterpret_cast<typename Agent::TempStorage*>(paged_attention_smem), params).Run();
  PAGEDATTN_TRACE_POINT(TracePoint::block_done);
}

/// The planning pass of a launch planned on the device: one block (AgentDecodePlan).
template <int BlockThreads>
__global__ void __launch_bounds__(BlockThreads) plan_decode_kernel(const DecodePlanParams params)
{
  arch::launch_dependents(); // the decode may start; it waits for this grid where it first reads the plan
  __shared__ typename AgentDecodePlan<BlockThreads>::TempStorage temp;
  AgentDecodePlan<BlockThreads>(temp, params).Run();
}

/// Compiled with the same flags as the decode kernels, so its PTX version (cudaFuncGetAttributes) is that
/// of the decode code the device runs (CUB's EmptyKernel; a template, so that every translation unit may
/// hold it).
template <class = void>
__global__ void ptx_version_probe_kernel() {}

} // namespace detail
} // namespace pagedattn
