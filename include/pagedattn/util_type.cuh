#pragma once
// Element types of the query, caches and output (fp16, bf16, fp32), their conversions to fp32 and the
// 16-byte vector that a cache load moves (vLLM's x = 16 bytes / element size). bf16 only where the
// toolkit has it (PAGEDATTN_HAS_BF16, config.cuh).
#include <pagedattn/config.cuh>

#include <cuda_fp16.h>
#if PAGEDATTN_HAS_BF16
#  include <cuda_bf16.h>
#endif

namespace pagedattn {

template <class T>
struct ElementTraits;

template <>
struct ElementTraits<__half> {
  static constexpr const char* name = "fp16";
  using pair_type = __half2; ///< two elements in 32 bits
  static PAGEDATTN_HOST_DEVICE float to_float(__half v) { return __half2float(v); }
  static PAGEDATTN_HOST_DEVICE __half from_float(float v) { return __float2half_rn(v); }
};

#if PAGEDATTN_HAS_BF16
template <>
struct ElementTraits<__nv_bfloat16> {
  static constexpr const char* name = "bf16";
  using pair_type = __nv_bfloat162;
  static PAGEDATTN_HOST_DEVICE float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  static PAGEDATTN_HOST_DEVICE __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
};
#endif

template <>
struct ElementTraits<float> {
  static constexpr const char* name = "fp32";
  static PAGEDATTN_HOST_DEVICE float to_float(float v) { return v; }
  static PAGEDATTN_HOST_DEVICE float from_float(float v) { return v; }
};

/// Elements in one 16-byte vector: vLLM's key-cache packing factor x.
template <class T>
inline constexpr int elements_per_vector = 16 / static_cast<int>(sizeof(T));

/// Load 16 bytes (must be 16-byte aligned) and widen to fp32.
template <class T>
PAGEDATTN_DEVICE void load_vector_as_float(const T* ptr, float (&out)[elements_per_vector<T>])
{
  const uint4 raw = *reinterpret_cast<const uint4*>(ptr);
  const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < elements_per_vector<T>; ++i) { out[i] = ElementTraits<T>::to_float(e[i]); }
}

} // namespace pagedattn
