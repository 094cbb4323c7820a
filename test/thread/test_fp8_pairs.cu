// GPU tests of fp8x4_to_pairs as the tensor-core fold runs it (thread/thread_fp8.cuh): on sm_89+ the cvt
// instructions (fp16 directly, bf16 through fp16 and fp32), elsewhere the integer decode. Every byte of
// both formats, in each of a word's four places, into fp16 and bf16 pairs: each element equals the byte's
// fp8_to_float exactly (NaN bytes give a NaN), in the pair and half the word says.
#include <pagedattn/thread/thread_fp8.cuh>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "support/test_support.cuh"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

/// Word w holds bytes w, w + 1, w + 2, w + 3 (mod 256): every byte in every place over the 256 words.
std::uint32_t word(int w)
{
  std::uint32_t four = 0;
  for (int i = 0; i < 4; ++i) { four |= static_cast<std::uint32_t>((w + i) & 0xff) << (8 * i); }
  return four;
}

template <pagedattn::Fp8Format Format, class T>
__global__ void convert_kernel(const std::uint32_t* words, std::uint32_t* pairs)
{
  const int w = threadIdx.x + blockIdx.x * blockDim.x;
  if (w < 256) { pagedattn::fp8x4_to_pairs<Format, T>(words[w], pairs[2 * w], pairs[2 * w + 1]); }
}

template <pagedattn::Fp8Format Format, class T>
void check_every_byte(const char* what)
{
  INFO(what);
  std::vector<std::uint32_t> words(256);
  for (int w = 0; w < 256; ++w) { words[w] = word(w); }
  test::DeviceBuffer<std::uint32_t> d_words(words), d_pairs(2 * 256);
  convert_kernel<Format, T><<<2, 128>>>(d_words.get(), d_pairs.get());
  CUDA_CHECK_LAUNCH();
  const auto pairs = d_pairs.download();
  int wrong = 0;
  for (int w = 0; w < 256; ++w)
  {
    for (int i = 0; i < 4; ++i) // element i: pair i / 2, half i % 2
    {
      const std::uint8_t byte = static_cast<std::uint8_t>((w + i) & 0xff);
      const std::uint16_t bits = static_cast<std::uint16_t>(pairs[2 * w + i / 2] >> (16 * (i % 2)));
      T element;
      std::memcpy(&element, &bits, sizeof element);
      const float got = pagedattn::ElementTraits<T>::to_float(element), want = pagedattn::fp8_to_float<Format>(byte);
      const bool same = std::isnan(want) ? std::isnan(got) : got == want && std::signbit(got) == std::signbit(want);
      if (!same && ++wrong <= 5) { FAIL_CHECK("byte 0x" << std::hex << int(byte) << " in place " << i << ": " << got << " against " << want); }
    }
  }
  CHECK(wrong == 0);
}

} // namespace

TEST_CASE("fp8x4_to_pairs on the GPU: every byte of e4m3 and e5m2 into fp16 and bf16, exactly", "[thread][gpu][fp8]")
{
  test::require_gpu_or_skip();
  check_every_byte<pagedattn::Fp8Format::e4m3, __half>("e4m3 into fp16");
  check_every_byte<pagedattn::Fp8Format::e5m2, __half>("e5m2 into fp16");
  check_every_byte<pagedattn::Fp8Format::e4m3, __nv_bfloat16>("e4m3 into bf16");
  check_every_byte<pagedattn::Fp8Format::e5m2, __nv_bfloat16>("e5m2 into bf16");
}
