// Host tests (CI) of the fp8 cache formats' decode (thread/thread_fp8.cuh): every one of the 256 bytes of
// each format against <cuda_fp8.h>'s own conversion (bit for bit; NaN as NaN of the same sign) and against
// the formats' definition evaluated in double, plus the extremes the issue names (largest finite,
// smallest subnormal, zeros, e5m2's infinities).
#include <pagedattn/thread/thread_fp8.cuh>

#include "support/test_support.cuh"

#include <cuda_fp8.h>

#include <cmath>
#include <cstring>

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
