#pragma once
// The launch of a decode plan: the init pass where the plan needs one, then the decode. It executes the
// plan's decisions and decides nothing, except one runtime fallback: a cooperative launch the runtime
// refuses as too large (another context holds part of the GPU) runs as a plain launch instead, whose
// blocks then combine by look-back (after an init pass). On sm_90 (code of PTX version >= 9.0) the decode
// may start during the init pass (programmatic dependent launch, with or without the cooperative
// attribute) and waits for it where it first touches the look-back words.
#include <pagedattn/device/dispatch/decode_device.cuh>
#include <pagedattn/device/dispatch/decode_plan.cuh>
#include <pagedattn/device/dispatch/decode_tensor_maps.cuh>

#include <cstddef>
#include <string>

namespace pagedattn {
namespace detail {

/// The init pass, in the stream (so graphs capture it): ticket, arrival counters and statuses back to zero.
inline cudaError_t reset_partition_state(void* d_temp_storage, const PartitionCombineLayout& layout, cudaStream_t stream)
{
  const std::size_t count = layout.reset_bytes / sizeof(unsigned);
  const std::size_t blocks = (count + 255) / 256;
  reset_partition_state_kernel<<<static_cast<unsigned>(blocks < 1024 ? blocks : 1024), 256, 0, stream>>>(static_cast<unsigned*>(d_temp_storage),
                                                                                                        count);
  return check_cuda(cudaGetLastError(), "reset_partition_state_kernel launch");
}

template <class Kernel>
cudaError_t launch_decode(const DecodePlan& plan, const DeviceInfo& device, typename Kernel::Params params,
                          const typename Kernel::Variant& variant, void* d_temp_storage, cudaStream_t stream)
{
  static_assert(Kernel::AgentPolicy::max_partition_tokens <= AgentDecodePlan<Kernel::block_threads>::max_candidates * 32,
                "the device's plan considers partitions of up to max_candidates * 32 tokens");
  PAGEDATTN_RETURN_IF_ERROR(Kernel::reserve_shared_memory(device));
  PAGEDATTN_RETURN_IF_ERROR((bind_cache_tensor_maps<typename Kernel::AgentPolicy, Kernel::head_dim, typename Kernel::KvLayout>(params, device.ptx_version)));
  if (plan.init_pass) { PAGEDATTN_RETURN_IF_ERROR(reset_partition_state(d_temp_storage, plan.layout, stream)); }
  const unsigned grid = static_cast<unsigned>(plan.grid);
#if defined(__ILUVATAR__) // no cooperative or programmatic dependent launch: <<<...>>> after the init pass
  (void)device;
  params.cooperative = false;
  Kernel::function()<<<grid, Kernel::block_threads, Kernel::smem_bytes, stream>>>(params, variant);
  return check_cuda(cudaGetLastError(), "paged_attention_kernel launch");
#else
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(Kernel::block_threads);
  config.dynamicSmemBytes = Kernel::smem_bytes;
  config.stream = stream;
  cudaLaunchAttribute dependent_attribute{}, cooperative_attribute{};
  // On sm_90 the decode may start during the init pass: it waits for it where it first touches the words.
  const bool dependent = plan.init_pass && device.ptx_version >= 90;
  dependent_attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  dependent_attribute.val.programmaticStreamSerializationAllowed = 1;
  // Every block resident at once (the grid is the resident count): the slice fold's grid barrier is
  // available to a launch whose items all have a block.
  cooperative_attribute.id = cudaLaunchAttributeCooperative;
  cooperative_attribute.val.cooperative = 1;
  auto launch = [&](bool with_dependent, bool with_cooperative) {
    cudaLaunchAttribute attributes[2];
    config.attrs = attributes;
    config.numAttrs = 0;
    if (with_dependent) { attributes[config.numAttrs++] = dependent_attribute; }
    if (with_cooperative) { attributes[config.numAttrs++] = cooperative_attribute; }
    params.cooperative = with_cooperative;
    return cudaLaunchKernelEx(&config, Kernel::function(), params, variant);
  };
  if (plan.cooperative)
  {
    cudaError_t e = launch(dependent, true);
    if (e != cudaSuccess && e != cudaErrorCooperativeLaunchTooLarge && dependent)
    {
      // A runtime that does not take both attributes: the cooperative launch in stream order after the
      // init pass (the same work, without the overlap).
      (void)cudaGetLastError();
      e = launch(false, true);
    }
    if (e != cudaErrorCooperativeLaunchTooLarge) { return check_cuda(e, "paged_attention_kernel launch (cooperative)"); }
    (void)cudaGetLastError(); // nothing ran: a plain launch, whose blocks combine by look-back
    if (!plan.init_pass) { PAGEDATTN_RETURN_IF_ERROR(reset_partition_state(d_temp_storage, plan.layout, stream)); }
    params.words_zeroed = true;
  }
  const cudaError_t e = launch(dependent, false);
  if (e == cudaSuccess) { return e; }
  return fail(e, std::string("paged_attention_kernel launch (grid ") + std::to_string(grid) + ", shared memory " +
                     std::to_string(Kernel::smem_bytes) + (dependent ? ", programmatic dependent launch" : "") +
                     "): " + cudaGetErrorString(e));
#endif
}

} // namespace detail
} // namespace pagedattn
