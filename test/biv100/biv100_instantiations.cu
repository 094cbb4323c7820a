// Every kernel a BI-V100 build can launch, for the compile checks of check_biv100.sh (never run, never
// linked): DevicePagedAttention::Decode for every element type, fp16 queries over both fp8 caches and fp32
// queries over e4m3 (each at every head size of HeadDims below and every GQA tiling), DeviceCombinePartials
// at those head sizes with both algorithms, and the planning pass of a launch planned on the device.
#include <pagedattn/pagedattn.cuh>

#include <type_traits>

static_assert(pagedattn::warp_threads == 64, "compile with -D__ILUVATAR__: this file checks the BI-V100 path");
static_assert(sizeof(pagedattn::lane_mask_t) * 8 >= pagedattn::warp_threads, "a ballot has a bit per lane");

namespace {

// The head sizes instantiated: every supported one, or (PAGEDATTN_BIV100_SOME_HEADS, the PTX check's choice)
// 80, 120 and 256, which take each of the fold's code paths (lanes left over past the head's last dim, a head of
// whole warps of dims): which instructions the PTX holds does not depend on the head size, and the clang 16
// check instantiates every one.
// Likewise the query rows: the PTX check takes the offsets' kernels (their code is the plan's and the
// scheduler's, the same for every element type) with fp16 only, the clang 16 check with every type.
#ifdef PAGEDATTN_BIV100_SOME_HEADS
using HeadDims = std::integer_sequence<int, 80, 120, 256>;
template <class T, class KvT>
using QueryRowForms = std::conditional_t<std::is_same_v<T, __half> && std::is_same_v<KvT, __half>, pagedattn::SupportedQueryRows,
                                         pagedattn::UniformQueryRows>;
#else
using HeadDims = pagedattn::SupportedHeadDims;
template <class T, class KvT>
using QueryRowForms = pagedattn::SupportedQueryRows;
#endif

template <class T, class KvT>
cudaError_t decode(void* temp, std::size_t& bytes, const pagedattn::DecodeArguments<T, KvT>& args, cudaStream_t stream)
{
  return pagedattn::DevicePagedAttention::Decode<pagedattn::DefaultPagedAttentionPolicies, HeadDims, pagedattn::SupportedCacheLayouts,
                                                 QueryRowForms<T, KvT>>(temp, bytes, args, stream);
}

template <int... HeadDims>
cudaError_t combine_every_head_size(std::integer_sequence<int, HeadDims...>, void* temp, std::size_t& bytes, const float* stats,
                                    const float* values, const int* counts, float* out, cudaStream_t stream)
{
  using pagedattn::detail::PartitionCombineAlgorithm;
  cudaError_t result = cudaSuccess;
  ((result = pagedattn::DeviceCombinePartials::Combine<HeadDims>(temp, bytes, stats, values, counts, out, 1, 2, 1, stream)), ...);
  // The two-kernel comparison algorithm (the debug hooks are test code, built for NVIDIA only).
  ((result = pagedattn::detail::dispatch_combine_partials<HeadDims, 8>(temp, bytes, stats, values, counts, out, 1, 2, 1,
                                                                       PartitionCombineAlgorithm::two_kernel, stream, {})),
   ...);
  return result;
}

} // namespace

/// Referenced, so that every template above is instantiated (its result is never looked at).
cudaError_t biv100_instantiations(void* temp, std::size_t& bytes, cudaStream_t stream)
{
  const cudaError_t results[] = {
    decode(temp, bytes, pagedattn::DecodeArguments<__half>{}, stream),
    decode(temp, bytes, pagedattn::DecodeArguments<float>{}, stream),
    decode(temp, bytes, pagedattn::DecodeArguments<__half, pagedattn::fp8_e4m3>{}, stream),
    decode(temp, bytes, pagedattn::DecodeArguments<__half, pagedattn::fp8_e5m2>{}, stream),
    decode(temp, bytes, pagedattn::DecodeArguments<float, pagedattn::fp8_e4m3>{}, stream),
#if PAGEDATTN_HAS_BF16
    decode(temp, bytes, pagedattn::DecodeArguments<__nv_bfloat16>{}, stream),
#endif
    combine_every_head_size(HeadDims{}, temp, bytes, nullptr, nullptr, nullptr, nullptr, stream),
  };
  return results[0];
}
