#pragma once
// The launch of a decode plan: the planning pass, then the decode. It executes the plan's decisions and
// decides nothing, except one runtime fallback: a cooperative launch the runtime refuses as too large
// (another context holds part of the GPU) runs as a plain launch instead, whose blocks then combine by
// look-back. On sm_90 (code of PTX version >= 9.0) a plain decode launch may start during the planning
// pass (programmatic dependent launch) and waits for it where it first reads the plan.
#include <pagedattn/device/dispatch/decode_device.cuh>
#include <pagedattn/device/dispatch/decode_plan.cuh>

#include <cstddef>
#include <string>

namespace pagedattn {
namespace detail {

/// The planning pass, in the stream (so graphs capture it): one block.
template <class Policy>
cudaError_t launch_planning_pass(const DecodePlanParams& params, cudaStream_t stream)
{
  static_assert(Policy::max_partition_tokens <= AgentDecodePlan<Policy::plan_block_threads>::max_candidates * 32,
                "the planning pass considers partitions of up to max_candidates * 32 tokens");
  plan_decode_kernel<Policy::plan_block_threads><<<1, Policy::plan_block_threads, 0, stream>>>(params);
  return check_cuda(cudaGetLastError(), "plan_decode_kernel launch");
}

template <class Kernel>
cudaError_t launch_decode(const DecodePlan& plan, const DeviceInfo& device, const DecodePlanParams& plan_params,
                          typename Kernel::Params params, cudaStream_t stream)
{
  using Policy = typename Kernel::AgentPolicy;
  PAGEDATTN_RETURN_IF_ERROR(Kernel::reserve_shared_memory(device));
  PAGEDATTN_RETURN_IF_ERROR(launch_planning_pass<Policy>(plan_params, stream));
  const unsigned grid = static_cast<unsigned>(plan.grid);
#if defined(__ILUVATAR__) // no cooperative or programmatic dependent launch: <<<...>>> after the planning pass
  (void)device;
  params.cooperative = false;
  Kernel::function()<<<grid, Kernel::block_threads, Kernel::smem_bytes, stream>>>(params);
  return check_cuda(cudaGetLastError(), "paged_attention_kernel launch");
#else
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(Kernel::block_threads);
  config.dynamicSmemBytes = Kernel::smem_bytes;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  config.attrs = &attribute;
  params.cooperative = plan.cooperative;
  if (plan.cooperative)
  {
    // Every block resident at once (the grid is the resident count): the slice fold's grid barrier is
    // available to a launch whose items all have a block. The launch follows the planning pass in stream order.
    attribute.id = cudaLaunchAttributeCooperative;
    attribute.val.cooperative = 1;
    config.numAttrs = 1;
    const cudaError_t e = cudaLaunchKernelEx(&config, Kernel::function(), params);
    if (e != cudaErrorCooperativeLaunchTooLarge) { return check_cuda(e, "paged_attention_kernel launch (cooperative)"); }
    (void)cudaGetLastError(); // nothing ran: a plain launch, whose blocks combine by look-back
    params.cooperative = false;
  }
  config.numAttrs = 0;
  if (device.ptx_version >= 90) // the decode waits for the planning pass where it first reads the plan
  {
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    config.numAttrs = 1;
  }
  const cudaError_t e = cudaLaunchKernelEx(&config, Kernel::function(), params);
  if (e == cudaSuccess) { return e; }
  return fail(e, std::string("paged_attention_kernel launch (grid ") + std::to_string(grid) + ", shared memory " +
                     std::to_string(Kernel::smem_bytes) + (config.numAttrs ? ", programmatic dependent launch" : "") +
                     "): " + cudaGetErrorString(e));
#endif
}

} // namespace detail
} // namespace pagedattn
