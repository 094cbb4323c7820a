#pragma once
// The caches as tensor maps, for the sm_90 decode's tensor copies (KvCopy::bulk_tensor): the driver's encoder,
// and bind_cache_tensor_maps, which encodes K's and V's maps in the shapes the launch's layout type gives
// (agent/kv_cache_layout.cuh: vLLM's 3-D maps of whole runs, a 16-bit V swizzled by 128 bytes; token rows'
// 5-D maps of the caches' strides, swizzled by 128 bytes). Host code; the maps travel in
// PagedAttentionParams. The maps hold the caches' addresses: a CUDA graph replays them as captured (vLLM
// keeps its cache tensors).
#include <pagedattn/agent/agent_paged_attention_params.cuh>
#include <pagedattn/agent/agent_paged_attention_policy.cuh>
#include <pagedattn/agent/kv_cache_layout.cuh>
#include <pagedattn/util_error.cuh>

#include <cstdint>
#include <string>

#if PAGEDATTN_HAS_TENSOR_MAPS
#include <cudaTypedefs.h>
#endif

namespace pagedattn {
namespace detail {

#if PAGEDATTN_HAS_TENSOR_MAPS
/// The driver's cuTensorMapEncodeTiled, looked up once through the runtime (no link to libcuda); null
/// where the driver has none.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder()
{
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
    {
      fn = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

inline cudaError_t encode_cache_tensor_map(CUtensorMap& map, const void* cache, int element_bytes, const CacheTensorMapShape& shape,
                                           const char* name)
{
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (!encode) { return fail(cudaErrorNotSupported, "pagedattn::Decode: the driver has no cuTensorMapEncodeTiled (the sm_90 tensor copies need it)"); }
  const cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  const CUtensorMapSwizzle swizzle = shape.swizzle_bytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE;
  const CUtensorMapDataType type = element_bytes == 1 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_UINT16;
  const CUresult result = encode(&map, type, static_cast<cuuint32_t>(shape.rank), const_cast<void*>(cache), shape.dims, shape.strides, shape.box,
                                 element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS)
  {
    return fail(cudaErrorInvalidValue, std::string("pagedattn::Decode: ") + name + " cannot be described as a tensor map (cuTensorMapEncodeTiled error " +
                                           std::to_string(static_cast<int>(result)) + ")");
  }
  return cudaSuccess;
}
#endif

/// Fill p.key_map and p.value_map when the launch's code moves K and V by tensor copies (KvLayout::kv_copy,
/// which the kernel asks too), in the shapes of KvLayout. launch_decode calls it, so every launch of the
/// decode kernel has them.
template <class Policy, int HeadDim, class KvLayout = VllmKvLayout, class T, class KvT>
cudaError_t bind_cache_tensor_maps(PagedAttentionParams<T, KvT>& p, int ptx_version)
{
#if PAGEDATTN_HAS_TENSOR_MAPS
  constexpr int bytes = static_cast<int>(sizeof(KvT));
  if constexpr (uses_tensor_cores<T, Policy, KvT> && KvLayout::kv_copy(Policy::kv_copy, true, HeadDim, bytes) == KvCopy::bulk_tensor)
  {
    if (KvLayout::kv_copy(Policy::kv_copy, ptx_version >= 90, HeadDim, bytes) != KvCopy::bulk_tensor) { return cudaSuccess; }
    const std::int64_t coordinates = KvLayout::map_coordinates(p);
    if (coordinates > 0x7fffffffLL) // a copy's coordinates are 32-bit signed integers
    {
      return fail(cudaErrorInvalidValue, std::string("pagedattn::Decode: ") + KvLayout::map_coordinates_name + " (" + std::to_string(coordinates) +
                                             ") exceeds 2^31 - 1, the sm_90 tensor copies' coordinate range");
    }
    PAGEDATTN_RETURN_IF_ERROR(encode_cache_tensor_map(p.key_map, p.key_cache, bytes, KvLayout::key_map_shape(p, HeadDim, bytes), KvLayout::key_map_name));
    PAGEDATTN_RETURN_IF_ERROR(
        encode_cache_tensor_map(p.value_map, p.value_cache, bytes, KvLayout::value_map_shape(p, HeadDim, bytes), KvLayout::value_map_name));
  }
#else
  (void)p;
  (void)ptx_version;
#endif
  return cudaSuccess;
}

} // namespace detail
} // namespace pagedattn
