#pragma once
// Thread level: four fp8 cache elements at a time into pairs of fp16 or bf16, the tensor-core fold's mma
// operands (the formats and their scalar decode: util_fp8.cuh).
//
// Every fp8 value of both formats is exact in fp16 and in bf16, so these are bit-exact to fp8_to_float
// (NaN to a NaN of the byte's sign, e5m2's infinities to infinities). Integer work per pair: the bytes go
// to the top of 16-bit lanes, the exponent and mantissa move into T's fields (T's exponent bias is larger,
// so the lanes read as the value times 2^-(bias difference), normal or subnormal alike), one multiply by
// 2^(bias difference) restores them, and the format's special bytes are patched in.
#include <pagedattn/util_fp8.cuh>
#include <pagedattn/util_type.cuh>

#include <cstdint>
#include <type_traits>

namespace pagedattn {

namespace detail {

/// Per 16-bit lane of `lanes` (each at most 0x7fff): 0xffff where the lane is 0, else 0. No carry
/// crosses a lane: a lane plus 0x7fff is at most 0xfffe.
PAGEDATTN_HOST_DEVICE std::uint32_t zero_lanes(std::uint32_t lanes)
{
  const std::uint32_t zero_bits = ~(lanes + 0x7fff7fffu) & 0x80008000u; // bit 15 of each zero lane
  return (zero_bits >> 15) * 0xffffu;
}

/// 2^exponent as a float (0 <= exponent <= 127), at compile time.
PAGEDATTN_HOST_DEVICE constexpr float power_of_two(int exponent)
{
  float f = 1.f;
  for (int i = 0; i < exponent; ++i) { f *= 2.f; }
  return f;
}

/// Both lanes (T's bits, low lane first) times 2^Exponent, exact for the values it is given here.
template <class T, int Exponent>
PAGEDATTN_HOST_DEVICE std::uint32_t times_power_of_two(std::uint32_t lanes)
{
  using Pair = typename ElementTraits<T>::pair_type;
  static_assert(sizeof(Pair) == sizeof(std::uint32_t), "two 16-bit elements");
  union {
    std::uint32_t u;
    Pair pair;
  } a{lanes}, r{0u};
  constexpr float exact_factor = power_of_two(Exponent);
  const T factor = ElementTraits<T>::from_float(exact_factor);
  r.pair = __hmul2(a.pair, Pair{factor, factor});
  return r.u;
}

} // namespace detail

/// Elements 2 * half_index and 2 * half_index + 1 of four fp8 bytes (element i in byte i of `four`) as a
/// pair of T (fp16 or bf16; the element with the lower index in the low 16 bits).
template <Fp8Format Format, class T>
PAGEDATTN_HOST_DEVICE std::uint32_t fp8x2_to_pair(std::uint32_t four, int half_index)
{
  const std::uint32_t x = four >> (16 * half_index);
  const std::uint32_t p = ((x & 0xffu) << 8) | ((x & 0xff00u) << 16); // each byte at the top of its lane
  const std::uint32_t sign = p & 0x80008000u;
  if constexpr (Format == Fp8Format::e5m2 && std::is_same_v<T, __half>)
  {
    return p; // e5m2 is the top byte of an IEEE half, specials included
  }
  else if constexpr (Format == Fp8Format::e4m3)
  {
    // e4m3's exponent and mantissa (7 bits) at T's field boundary: fp16 keeps 10 mantissa bits (shift 1),
    // bf16 7 (shift 4); the biases differ by 15 - 7 and 127 - 7.
    constexpr bool half = std::is_same_v<T, __half>;
    const std::uint32_t magnitude = half ? (p >> 1) & 0x3f803f80u : (p >> 4) & 0x07f007f0u;
    const std::uint32_t value = detail::times_power_of_two<T, half ? 8 : 120>(sign | magnitude);
    const std::uint32_t nan = detail::zero_lanes((p & 0x7f007f00u) ^ 0x7f007f00u); // S.1111.111
    return value | (nan & 0x7fff7fffu);                                            // all ones: a NaN in both types
  }
  else // e5m2 into bf16: 5 exponent and 2 mantissa bits, biases 15 and 127
  {
    const std::uint32_t value = detail::times_power_of_two<T, 112>(sign | ((p >> 3) & 0x0fe00fe0u));
    const std::uint32_t special = detail::zero_lanes((p & 0x7c007c00u) ^ 0x7c007c00u); // exponent 31
    const std::uint32_t infinity_or_nan = sign | 0x7f807f80u | ((p >> 3) & 0x00600060u); // mantissa 0: infinity
    return (value & ~special) | (infinity_or_nan & special);
  }
}

namespace detail {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 && !defined(__ILUVATAR__)
/// Four fp8 bytes as two fp16 pairs, one cvt instruction per pair (sm_89+).
template <Fp8Format Format>
PAGEDATTN_DEVICE void fp8x4_to_half2s(std::uint32_t four, std::uint32_t& low, std::uint32_t& high)
{
  if constexpr (Format == Fp8Format::e4m3)
  {
    asm("{\n .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %2;\n cvt.rn.f16x2.e4m3x2 %0, lo;\n cvt.rn.f16x2.e4m3x2 %1, hi;\n}"
        : "=r"(low), "=r"(high) : "r"(four));
  }
  else
  {
    asm("{\n .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %2;\n cvt.rn.f16x2.e5m2x2 %0, lo;\n cvt.rn.f16x2.e5m2x2 %1, hi;\n}"
        : "=r"(low), "=r"(high) : "r"(four));
  }
}

/// An fp16 pair as a bf16 pair: each half to fp32, the two to bf16 (exact for the values fp8 holds;
/// cvt.rn.bf16x2.f32 puts its first source in the upper half).
PAGEDATTN_DEVICE std::uint32_t half2_to_bfloat162(std::uint32_t pair)
{
  std::uint32_t r;
  asm("{\n .reg .b16 a, b;\n .reg .f32 fa, fb;\n mov.b32 {a, b}, %1;\n cvt.f32.f16 fa, a;\n cvt.f32.f16 fb, b;\n"
      " cvt.rn.bf16x2.f32 %0, fb, fa;\n}"
      : "=r"(r) : "r"(pair));
  return r;
}
#endif

} // namespace detail

/// Four fp8 bytes (element i in byte i) as two pairs of T: elements 0, 1 in `low`, 2, 3 in `high`. On
/// sm_89+ (NVIDIA) an fp16 pair is one cvt instruction, a bf16 pair four (fp8 to fp16, each half to fp32,
/// the two to bf16); elsewhere fp8x2_to_pair. The same values either way (every fp8 value is exact in fp16,
/// fp32 and bf16; NaN bytes give a NaN).
template <Fp8Format Format, class T>
PAGEDATTN_HOST_DEVICE void fp8x4_to_pairs(std::uint32_t four, std::uint32_t& low, std::uint32_t& high)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890 && !defined(__ILUVATAR__)
  detail::fp8x4_to_half2s<Format>(four, low, high);
  if constexpr (!std::is_same_v<T, __half>)
  {
    low = detail::half2_to_bfloat162(low);
    high = detail::half2_to_bfloat162(high);
  }
#else
  low = fp8x2_to_pair<Format, T>(four, 0);
  high = fp8x2_to_pair<Format, T>(four, 1);
#endif
}

/// Bytes (b0, b1, b2, b3) of `four` as (b0, b2, b1, b3): two 2-byte pairs (rows r and r + 1 of columns c,
/// c + 1) regrouped by column, as fp8x4_to_pairs then converts them (one PRMT).
PAGEDATTN_HOST_DEVICE std::uint32_t swap_middle_bytes(std::uint32_t four)
{
  return (four & 0xff0000ffu) | ((four & 0x0000ff00u) << 8) | ((four & 0x00ff0000u) >> 8);
}

} // namespace pagedattn
