#pragma once
// Element types of the query, caches and output (fp16, bf16, fp32; the caches also fp8, util_fp8.cuh),
// their conversions to fp32 and the 16-byte vector that a cache load moves (vLLM's x = 16 bytes / element
// size), and with_one_of (a runtime size to its compile-time instantiation). bf16 only where the toolkit has it
// (PAGEDATTN_HAS_BF16, config.cuh).
#include <pagedattn/config.cuh>
#include <pagedattn/util_fp8.cuh>

#include <cuda_fp16.h>
#if PAGEDATTN_HAS_BF16
#  include <cuda_bf16.h>
#endif

#include <type_traits>
#include <utility>

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

/// An fp8 cache element (the decode only reads them; from_float is vLLM's quantization, for those that fill a cache).
template <Fp8Format Format>
struct ElementTraits<Fp8Storage<Format>> {
  static constexpr const char* name = Format == Fp8Format::e4m3 ? "fp8_e4m3" : "fp8_e5m2";
  static PAGEDATTN_HOST_DEVICE float to_float(Fp8Storage<Format> v) { return fp8_to_float<Format>(v.bits); }
  static PAGEDATTN_HOST_DEVICE Fp8Storage<Format> from_float(float v) { return {fp8_from_float<Format>(v)}; }
};

/// Elements in one 16-byte vector: vLLM's key-cache packing factor x.
template <class T>
inline constexpr int elements_per_vector = 16 / static_cast<int>(sizeof(T));

/// Whether a key of head_dim elements of element_bytes each is whole 16-byte vectors (vLLM's x = 16 /
/// element_bytes elements each), as every fold reads it: head 120 is in 16- and 32-bit caches, not in fp8 ones.
PAGEDATTN_HOST_DEVICE constexpr bool head_is_whole_vectors(int head_dim, int element_bytes) { return head_dim * element_bytes % 16 == 0; }
template <class KvT>
PAGEDATTN_HOST_DEVICE constexpr bool head_is_whole_vectors(int head_dim) { return head_is_whole_vectors(head_dim, static_cast<int>(sizeof(KvT))); }

/// g(std::integral_constant<int, value>{}) where value is one of Values (nothing where it is none): a runtime
/// value (a head size, a kernel's row count) to the compile-time one of its instantiations.
template <int... Values, class G>
void with_one_of(std::integer_sequence<int, Values...>, int value, G&& g)
{
  const auto if_value = [&](auto c) {
    if (value == decltype(c)::value) { g(c); }
  };
  (if_value(std::integral_constant<int, Values>{}), ...);
}

/// Load 16 bytes (must be 16-byte aligned) and widen to fp32.
template <class T>
PAGEDATTN_DEVICE void load_vector_as_float(const T* ptr, float (&out)[elements_per_vector<T>])
{
  const uint4 raw = *reinterpret_cast<const uint4*>(ptr);
  const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < elements_per_vector<T>; ++i) { out[i] = ElementTraits<T>::to_float(e[i]); }
}

/// Load the 8 consecutive elements at ptr (aligned to their size: 8 bytes for fp8, 16 for fp16 and
/// bf16, 32 for fp32) and widen to fp32: an 8-token row of a V cache block.
template <class T>
PAGEDATTN_DEVICE void load_eight_as_float(const T* ptr, float (&out)[8])
{
  if constexpr (sizeof(T) == 1)
  {
    const uint2 raw = *reinterpret_cast<const uint2*>(ptr);
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int i = 0; i < 8; ++i) { out[i] = ElementTraits<T>::to_float(e[i]); }
  }
  else
  {
#pragma unroll
    for (int l = 0; l < 8 / elements_per_vector<T>; ++l)
    {
      float part[elements_per_vector<T>];
      load_vector_as_float(ptr + l * elements_per_vector<T>, part);
#pragma unroll
      for (int e = 0; e < elements_per_vector<T>; ++e) { out[l * elements_per_vector<T> + e] = part[e]; }
    }
  }
}

} // namespace pagedattn
