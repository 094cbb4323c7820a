#pragma once
// The launch of a decode plan: it executes the plan's decisions and decides nothing, except one runtime
// fallback: a cooperative launch the runtime refuses as too large (another context holds part of the GPU)
// runs as a look-back launch instead. Look-back launches are preceded by their init pass; on sm_90
// (code of PTX version >= 9.0) the decode may start during it (programmatic dependent launch).
#include <pagedattn/device/dispatch/decode_device.cuh>
#include <pagedattn/device/dispatch/decode_plan.cuh>

#include <cstddef>
#include <string>

namespace pagedattn {
namespace detail {

/// The init pass of a look-back launch, in the stream (so graphs capture it): ticket, arrival counters
/// and statuses back to zero.
inline cudaError_t reset_partition_state(void* d_temp_storage, const PartitionCombineLayout& layout, cudaStream_t stream)
{
  const std::size_t count = layout.reset_bytes / sizeof(unsigned);
  const std::size_t blocks = (count + 255) / 256;
  reset_partition_state_kernel<<<static_cast<unsigned>(blocks < 1024 ? blocks : 1024), 256, 0, stream>>>(static_cast<unsigned*>(d_temp_storage),
                                                                                                        count);
  return check_cuda(cudaGetLastError(), "reset_partition_state_kernel launch");
}

template <class Kernel>
cudaError_t launch_decode(const DecodePlan& plan, const DeviceInfo& device, typename Kernel::Params params, void* d_temp_storage,
                          cudaStream_t stream)
{
  PAGEDATTN_RETURN_IF_ERROR(Kernel::reserve_shared_memory(device));
  const unsigned grid = static_cast<unsigned>(plan.grid);
#if defined(__ILUVATAR__) // no cooperative or programmatic dependent launch: <<<...>>> after the init pass
  (void)device;
  if (plan.combine == CombineKind::look_back) { PAGEDATTN_RETURN_IF_ERROR(reset_partition_state(d_temp_storage, plan.layout, stream)); }
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
  bool look_back = plan.combine == CombineKind::look_back;
  if (plan.combine == CombineKind::one_wave)
  {
    // The runtime guarantees that every block is resident at once, and its grid barrier needs no init pass.
    attribute.id = cudaLaunchAttributeCooperative;
    attribute.val.cooperative = 1;
    config.numAttrs = 1;
    const cudaError_t e = cudaLaunchKernelEx(&config, Kernel::function(), params);
    if (e != cudaErrorCooperativeLaunchTooLarge) { return check_cuda(e, "paged_attention_kernel launch (cooperative)"); }
    (void)cudaGetLastError(); // nothing ran: combine by look-back instead
    params.one_wave_combine = false;
    params.use_tickets = plan.layout.max_groups > 1;
    look_back = true;
  }
  config.numAttrs = 0;
  if (look_back)
  {
    PAGEDATTN_RETURN_IF_ERROR(reset_partition_state(d_temp_storage, plan.layout, stream));
    if (device.ptx_version >= 90) // the decode waits for the init pass where it first touches the words
    {
      attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attribute.val.programmaticStreamSerializationAllowed = 1;
      config.numAttrs = 1;
    }
  }
  const cudaError_t e = cudaLaunchKernelEx(&config, Kernel::function(), params);
  if (e == cudaSuccess) { return e; }
  return fail(e, std::string("paged_attention_kernel launch (grid ") + std::to_string(grid) + ", shared memory " +
                     std::to_string(Kernel::smem_bytes) + ", " + (look_back ? "look-back" : "single partition") +
                     (config.numAttrs ? ", programmatic dependent launch" : "") + "): " + cudaGetErrorString(e));
#endif
}

} // namespace detail
} // namespace pagedattn
