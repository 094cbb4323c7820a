// Host tests (CI) of the fp8 cache formats' decode (thread/thread_fp8.cuh): every one of the 256 bytes of
// each format against <cuda_fp8.h>'s own conversion (bit for bit; NaN as NaN of the same sign) and against
// the formats' definition evaluated in double, plus the extremes the issue names (largest finite,
// smallest subnormal, zeros, e5m2's infinities).
#include <pagedattn/thread/thread_fp8.cuh>

#include "support/test_support.cuh"

#include <cuda_fp8.h>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <random>
#include <vector>
#include <type_traits>

namespace {

std::uint32_t bits_of(float f)
{
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

/// The value a byte stands for, from the format's definition: (-1)^s * 2^(e - bias) * (1 + m / 2^M),
/// or 2^(1 - bias) * m / 2^M when e == 0; NaN or infinity for the special bytes.
double reference(std::uint8_t byte, int exponent_bits, int mantissa_bits)
{
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const int s = byte >> 7, e = (byte >> mantissa_bits) & ((1 << exponent_bits) - 1), m = byte & ((1 << mantissa_bits) - 1);
  const int max_e = (1 << exponent_bits) - 1;
  if (exponent_bits == 4 && e == max_e && m == (1 << mantissa_bits) - 1) { return std::nan(""); } // e4m3: S.1111.111
  if (exponent_bits == 5 && e == max_e) { return m == 0 ? (s ? -INFINITY : INFINITY) : std::nan(""); }
  const double magnitude = e == 0 ? std::ldexp(double(m), 1 - bias - mantissa_bits)
                                  : std::ldexp(1.0 + double(m) / double(1 << mantissa_bits), e - bias);
  return s ? -magnitude : magnitude;
}

template <class Fp8>
float cuda_fp8_to_float(std::uint8_t byte)
{
  Fp8 x;
  x.__x = byte;
  return static_cast<float>(x);
}

void check_format(pagedattn::Fp8Format format)
{
  const bool e4m3 = format == pagedattn::Fp8Format::e4m3;
  for (int b = 0; b < 256; ++b)
  {
    const auto byte = static_cast<std::uint8_t>(b);
    const float ours = e4m3 ? pagedattn::fp8_to_float<pagedattn::Fp8Format::e4m3>(byte) : pagedattn::fp8_to_float<pagedattn::Fp8Format::e5m2>(byte);
    const float theirs = e4m3 ? cuda_fp8_to_float<__nv_fp8_e4m3>(byte) : cuda_fp8_to_float<__nv_fp8_e5m2>(byte);
    const double exact = reference(byte, e4m3 ? 4 : 5, e4m3 ? 3 : 2);
    INFO((e4m3 ? "e4m3" : "e5m2") << " byte 0x" << std::hex << b << std::dec << ": ours " << ours << ", cuda_fp8.h " << theirs);
    if (std::isnan(exact))
    {
      CHECK(std::isnan(ours));
      CHECK(std::isnan(theirs));
      CHECK(std::signbit(ours) == ((b & 0x80) != 0));
    }
    else
    {
      CHECK(bits_of(ours) == bits_of(theirs));
      CHECK(double(ours) == exact); // every fp8 value is exact in float
      CHECK(std::signbit(ours) == ((b & 0x80) != 0));
    }
  }
}

} // namespace

TEST_CASE("fp8 e4m3: all 256 bytes decode as <cuda_fp8.h> and the format's definition do", "[fp8][host]")
{
  check_format(pagedattn::Fp8Format::e4m3);
}

TEST_CASE("fp8 e5m2: all 256 bytes decode as <cuda_fp8.h> and the format's definition do", "[fp8][host]")
{
  check_format(pagedattn::Fp8Format::e5m2);
}

TEST_CASE("fp8: the extremes of both formats", "[fp8][host]")
{
  using pagedattn::fp8_e4m3_to_float;
  using pagedattn::fp8_e5m2_to_float;
  CHECK(fp8_e4m3_to_float(0x7e) == 448.f);             // largest finite
  CHECK(fp8_e4m3_to_float(0xfe) == -448.f);
  CHECK(fp8_e4m3_to_float(0x01) == std::ldexp(1.f, -9)); // smallest subnormal
  CHECK(fp8_e4m3_to_float(0x08) == std::ldexp(1.f, -6)); // smallest normal
  CHECK(bits_of(fp8_e4m3_to_float(0x00)) == 0u);
  CHECK(bits_of(fp8_e4m3_to_float(0x80)) == 0x80000000u); // -0
  CHECK(std::isnan(fp8_e4m3_to_float(0x7f)));
  CHECK(std::isnan(fp8_e4m3_to_float(0xff)));
  CHECK(fp8_e4m3_to_float(0x78) == 256.f); // exponent 15 is finite in E4M3FN

  CHECK(fp8_e5m2_to_float(0x7b) == 57344.f);              // largest finite
  CHECK(fp8_e5m2_to_float(0x01) == std::ldexp(1.f, -16)); // smallest subnormal
  CHECK(fp8_e5m2_to_float(0x04) == std::ldexp(1.f, -14)); // smallest normal
  CHECK(fp8_e5m2_to_float(0x7c) == INFINITY);
  CHECK(fp8_e5m2_to_float(0xfc) == -INFINITY);
  CHECK(std::isnan(fp8_e5m2_to_float(0x7d)));
  CHECK(std::isnan(fp8_e5m2_to_float(0xff)));
  CHECK(bits_of(fp8_e5m2_to_float(0x80)) == 0x80000000u);
}

namespace {

/// fp8x2_to_pair against the scalar decode for every byte in every position (both lanes, both halves of
/// the word): the same float bits, or a NaN of the same sign. Counts mismatches (one CHECK per format).
template <pagedattn::Fp8Format Format, class T>
int pair_mismatches()
{
  int mismatches = 0;
  for (std::uint32_t b = 0; b < 256; ++b)
  {
    for (std::uint32_t other : {0x00u, 0x3au, 0x7fu, 0x80u, 0xfcu, 0xffu}) // the byte's neighbours in the word
    {
      for (int position = 0; position < 4; ++position)
      {
        std::uint32_t four = 0;
        for (int i = 0; i < 4; ++i) { four |= (i == position ? b : other) << (8 * i); }
        const std::uint32_t pair = pagedattn::fp8x2_to_pair<Format, T>(four, position / 2);
        const std::uint16_t lane = static_cast<std::uint16_t>(pair >> (16 * (position % 2)));
        T element;
        std::memcpy(&element, &lane, sizeof lane);
        const float got = pagedattn::ElementTraits<T>::to_float(element);
        const float want = pagedattn::fp8_to_float<Format>(static_cast<std::uint8_t>(b));
        // A NaN by its bits: the host's conversion to float need not keep a NaN's sign.
        const int mantissa_bits = std::is_same_v<T, __half> ? 10 : 7;
        const std::uint16_t exponent_mask = static_cast<std::uint16_t>(0x7fff & ~((1 << mantissa_bits) - 1));
        const bool lane_is_nan = (lane & exponent_mask) == exponent_mask && (lane & ((1 << mantissa_bits) - 1)) != 0;
        const bool same = std::isnan(want) ? lane_is_nan && (lane >> 15) == (b >> 7) : bits_of(got) == bits_of(want);
        if (!same)
        {
          if (mismatches < 8) { UNSCOPED_INFO("byte 0x" << std::hex << b << " at " << position << " beside 0x" << other << std::dec << ": got " << got << ", want " << want); }
          ++mismatches;
        }
      }
    }
  }
  return mismatches;
}

} // namespace

TEST_CASE("fp8: four at a time into pairs of fp16 and bf16, bit-exact to the scalar decode", "[fp8][host]")
{
  using pagedattn::Fp8Format;
  CHECK(pair_mismatches<Fp8Format::e4m3, __half>() == 0);
  CHECK(pair_mismatches<Fp8Format::e5m2, __half>() == 0);
#if PAGEDATTN_HAS_BF16
  CHECK(pair_mismatches<Fp8Format::e4m3, __nv_bfloat16>() == 0);
  CHECK(pair_mismatches<Fp8Format::e5m2, __nv_bfloat16>() == 0);
#endif
}

namespace {

template <class Fp8>
std::uint8_t cuda_fp8_from_float(float x, __nv_fp8_interpretation_t format)
{
  return static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, format));
}

/// fp8_from_float against <cuda_fp8.h>'s saturating conversion over every fp8 value, the midpoints between
/// neighbours (ties) and a float ulp either side, random floats across the formats' range and beyond,
/// and the specials. Counts mismatches.
template <pagedattn::Fp8Format Format>
int encode_mismatches()
{
  const __nv_fp8_interpretation_t format = Format == pagedattn::Fp8Format::e4m3 ? __NV_E4M3 : __NV_E5M2;
  std::vector<float> xs = {0.f, -0.f, INFINITY, -INFINITY, std::nanf(""), -std::nanf(""), 1e30f, -1e30f, 1e-30f, -1e-30f};
  std::vector<float> finite;
  for (int b = 0; b < 256; ++b)
  {
    const float v = pagedattn::fp8_to_float<Format>(static_cast<std::uint8_t>(b));
    if (std::isfinite(v)) { finite.push_back(v); }
  }
  std::sort(finite.begin(), finite.end());
  for (std::size_t i = 0; i < finite.size(); ++i)
  {
    xs.push_back(finite[i]);
    if (i + 1 < finite.size())
    {
      const float mid = 0.5f * (finite[i] + finite[i + 1]);
      xs.insert(xs.end(), {mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)});
    }
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exponent(-20.f, 17.f);
  for (int i = 0; i < 20000; ++i) { xs.push_back((rng() & 1 ? -1.f : 1.f) * std::exp2(exponent(rng))); }
  int mismatches = 0;
  for (float x : xs)
  {
    const std::uint8_t ours = pagedattn::fp8_from_float<Format>(x), theirs = cuda_fp8_from_float<void>(x, format);
    if (ours != theirs)
    {
      if (mismatches < 8) { UNSCOPED_INFO("x " << x << ": ours 0x" << std::hex << int(ours) << ", cuda_fp8.h 0x" << int(theirs) << std::dec); }
      ++mismatches;
    }
  }
  return mismatches;
}

} // namespace

TEST_CASE("fp8: the saturating encoder (vLLM's quantization) agrees with <cuda_fp8.h> byte for byte", "[fp8][host]")
{
  CHECK(encode_mismatches<pagedattn::Fp8Format::e4m3>() == 0);
  CHECK(encode_mismatches<pagedattn::Fp8Format::e5m2>() == 0);
  // Round trip: every finite byte encodes back to itself (both zeros included).
  for (int b = 0; b < 256; ++b)
  {
    const auto byte = static_cast<std::uint8_t>(b);
    if (std::isfinite(pagedattn::fp8_e4m3_to_float(byte))) { CHECK(pagedattn::fp8_from_float<pagedattn::Fp8Format::e4m3>(pagedattn::fp8_e4m3_to_float(byte)) == byte); }
    if (std::isfinite(pagedattn::fp8_e5m2_to_float(byte))) { CHECK(pagedattn::fp8_from_float<pagedattn::Fp8Format::e5m2>(pagedattn::fp8_e5m2_to_float(byte)) == byte); }
  }
}

TEST_CASE("fp8: swap_middle_bytes regroups two rows' byte pairs by column (fp8 V in token rows)", "[fp8][host]")
{
  CHECK(pagedattn::swap_middle_bytes(0x44332211u) == 0x44223311u);
  CHECK(pagedattn::swap_middle_bytes(0xff0000ffu) == 0xff0000ffu);
  CHECK(pagedattn::swap_middle_bytes(0x00ff0000u) == 0x0000ff00u);
}
