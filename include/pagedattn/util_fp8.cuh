#pragma once
// The two fp8 formats of an fp8 KV cache: their storage types and their decode, in software
// from the stored byte. One definition for every path: the tensor-core fold, the CUDA-core fold and
// BI-V100, whose SDK has no <cuda_fp8.h> and no fp8 hardware. vLLM stores a value x as fp8(x / scale) and
// reads it back as float(fp8) * scale; this header is the float(fp8) half of that, bit-exact to
// <cuda_fp8.h>'s conversions (the host test compares all 256 bytes of both formats).
//
//   e4m3 (OCP E4M3FN, vLLM's "fp8" / "fp8_e4m3"): 1 sign, 4 exponent bits (bias 7), 3 mantissa bits;
//        no infinities; S.1111.111 is NaN; largest finite 448, smallest subnormal 2^-9.
//   e5m2 (vLLM's "fp8_e5m2"): 1 sign, 5 exponent bits (bias 15), 2 mantissa bits, the top byte of an
//        IEEE half: exponent 31 is infinity (mantissa 0) or NaN; largest finite 57344, smallest
//        subnormal 2^-16.
// A NaN byte decodes to a NaN of the byte's sign; an e5m2 infinity to an infinity.
#include <pagedattn/config.cuh>

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace pagedattn {

/// The element format of an fp8 cache.
enum class Fp8Format { e4m3, e5m2 };

/// A cache element of an fp8 cache: the stored byte (the cache pointer's element type, KvT).
template <Fp8Format Format>
struct Fp8Storage {
  std::uint8_t bits;
  static constexpr Fp8Format format = Format;
};
using fp8_e4m3 = Fp8Storage<Fp8Format::e4m3>; ///< vLLM's kv_cache_dtype "fp8" and "fp8_e4m3"
using fp8_e5m2 = Fp8Storage<Fp8Format::e5m2>; ///< vLLM's kv_cache_dtype "fp8_e5m2"

/// Whether a cache element type is one of the fp8 formats.
template <class KvT>
inline constexpr bool is_fp8 = false;
template <Fp8Format Format>
inline constexpr bool is_fp8<Fp8Storage<Format>> = true;

namespace detail {

/// The float whose bits are `bits` (a memcpy-free bit cast that compiles on host and device).
PAGEDATTN_HOST_DEVICE float float_from_bits(std::uint32_t bits)
{
  union {
    std::uint32_t u;
    float f;
  } v{bits};
  return v.f;
}

/// Decode a byte of 1 sign, ExponentBits exponent bits (bias 2^(ExponentBits-1) - 1) and MantissaBits
/// mantissa bits; the caller handles the format's special values (all-ones exponent).
template <int ExponentBits, int MantissaBits>
PAGEDATTN_HOST_DEVICE float fp8_finite_to_float(std::uint8_t byte)
{
  constexpr int bias = (1 << (ExponentBits - 1)) - 1;
  const std::uint32_t sign = static_cast<std::uint32_t>(byte >> 7) << 31;
  const int exponent = (byte >> MantissaBits) & ((1 << ExponentBits) - 1);
  const std::uint32_t mantissa = byte & ((1u << MantissaBits) - 1);
  if (exponent == 0) // zero or subnormal: mantissa * 2^(1 - bias - MantissaBits), exact in float
  {
    constexpr float unit = 1.f / static_cast<float>(1u << (bias - 1 + MantissaBits)); // 2^(1 - bias - MantissaBits)
    const float magnitude = static_cast<float>(mantissa) * unit;
    return sign ? -magnitude : magnitude; // (-0 for the byte 0x80)
  }
  return float_from_bits(sign | static_cast<std::uint32_t>(exponent - bias + 127) << 23 | mantissa << (23 - MantissaBits));
}

} // namespace detail

/// float of an e4m3 (E4M3FN) byte.
PAGEDATTN_HOST_DEVICE float fp8_e4m3_to_float(std::uint8_t byte)
{
  if ((byte & 0x7f) == 0x7f) { return detail::float_from_bits((static_cast<std::uint32_t>(byte >> 7) << 31) | 0x7fc00000u); }
  return detail::fp8_finite_to_float<4, 3>(byte);
}

/// float of an e5m2 byte.
PAGEDATTN_HOST_DEVICE float fp8_e5m2_to_float(std::uint8_t byte)
{
  if ((byte & 0x7c) == 0x7c) // exponent 31: infinity (mantissa 0) or NaN
  {
    const std::uint32_t sign = static_cast<std::uint32_t>(byte >> 7) << 31;
    return detail::float_from_bits(sign | ((byte & 0x03) == 0 ? 0x7f800000u : 0x7fc00000u));
  }
  return detail::fp8_finite_to_float<5, 2>(byte);
}

/// float of a byte of the given format.
template <Fp8Format Format>
PAGEDATTN_HOST_DEVICE float fp8_to_float(std::uint8_t byte)
{
  if constexpr (Format == Fp8Format::e4m3) { return fp8_e4m3_to_float(byte); }
  else { return fp8_e5m2_to_float(byte); }
}


/// The byte of the given format nearest to x (ties to even), saturated to the largest finite value
/// (vLLM's quantization, <cuda_fp8.h>'s __NV_SATFINITE): infinities too; any NaN to 0x7f, a NaN of both
/// formats, as <cuda_fp8.h> does. The library never writes a cache: for tests, benchmarks and callers that fill one.
template <Fp8Format Format>
PAGEDATTN_HOST_DEVICE std::uint8_t fp8_from_float(float x)
{
  constexpr int mantissa_bits = Format == Fp8Format::e4m3 ? 3 : 2;
  constexpr int bias = Format == Fp8Format::e4m3 ? 7 : 15;
  constexpr std::uint32_t largest = Format == Fp8Format::e4m3 ? 0x7e : 0x7b; // 448, 57344
  union {
    float f;
    std::uint32_t u;
  } v{x};
  const std::uint32_t sign = (v.u >> 24) & 0x80u;
  const std::uint32_t magnitude_bits = v.u & 0x7fffffffu;
  if (magnitude_bits > 0x7f800000u) { return 0x7f; }
  std::uint32_t code;
  if (magnitude_bits < static_cast<std::uint32_t>(127 + 1 - bias) << 23) // below the smallest normal: a multiple of the subnormal step
  {
    v.u = magnitude_bits;
    code = static_cast<std::uint32_t>(rintf(v.f * detail::float_from_bits(static_cast<std::uint32_t>(127 + bias - 1 + mantissa_bits) << 23)));
  }
  else // round the float's mantissa to mantissa_bits, ties to even; a carry moves into the exponent, as it should
  {
    constexpr int shift = 23 - mantissa_bits;
    const std::uint32_t rounded = (magnitude_bits + (1u << (shift - 1)) - 1u + ((magnitude_bits >> shift) & 1u)) >> shift;
    code = rounded - (static_cast<std::uint32_t>(127 - bias) << mantissa_bits);
  }
  return static_cast<std::uint8_t>(sign | (code > largest ? largest : code));
}
} // namespace pagedattn
