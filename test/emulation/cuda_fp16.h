#pragma once
// Stand-in for <cuda_fp16.h> (test/emulation/cuda_runtime.h): __half as GCC's _Float16 (x86-64, g++ >= 12).
struct __half {
  _Float16 v;
};
inline float __half2float(__half h) { return static_cast<float>(h.v); }
inline __half __float2half_rn(float f) { return {static_cast<_Float16>(f)}; }
inline __half __float2half(float f) { return __float2half_rn(f); }
/// Two halves in 32 bits (ElementTraits<__half>::pair_type); the emulated decode has no use for its arithmetic.
struct __half2 {
  __half x, y;
};
