#pragma once
// Shared helpers of the pagedattn tests: CUDA error checks, the no-GPU skip, seeded random data,
// poisoned device buffers and error norms.
#include <cuda_runtime.h>

#include <catch2/catch.hpp>

#include "test_seed.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <vector>

namespace test {

/// Return code that CTest maps to "skipped" (SKIP_RETURN_CODE in test/CMakeLists.txt).
inline constexpr int skip_return_code = 4;

#define CUDA_CHECK(expr)                                                                           \
  do {                                                                                             \
    const cudaError_t err_ = (expr);                                                               \
    if (err_ != cudaSuccess) { FAIL(#expr << " failed: " << cudaGetErrorString(err_)); }           \
  } while (0)

/// Check both the launch and the kernel's execution.
#define CUDA_CHECK_LAUNCH()                                                                        \
  do {                                                                                             \
    CUDA_CHECK(cudaGetLastError());                                                                \
    CUDA_CHECK(cudaDeviceSynchronize());                                                           \
  } while (0)

/// GPU tests call this first: without a CUDA device the whole binary exits with the skip code, so
/// CTest reports the test as skipped, never as passed.
inline void require_gpu_or_skip()
{
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0)
  {
    std::printf("SKIPPED: no CUDA device (%s)\n", err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    std::fflush(stdout);
    std::exit(skip_return_code);
  }
}

/// TEST_SEED and TEST_RNG of a GPU test case: without a CUDA device, the test is skipped first.
#define GPU_TEST_SEED(name, offset)                                                                \
  ::test::require_gpu_or_skip();                                                                   \
  TEST_SEED(name, offset)
#define GPU_TEST_RNG(name, offset)                                                                 \
  ::test::require_gpu_or_skip();                                                                   \
  TEST_RNG(name, offset)

/// Uniform random floats in [lo, hi), never exactly zero (zeros hide unwritten outputs).
inline std::vector<float> random_floats(std::mt19937_64& rng, std::size_t n, float lo = -1.f, float hi = 1.f)
{
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v)
  {
    do { x = dist(rng); } while (x == 0.f);
  }
  return v;
}

/// Owning device buffer; contents start poisoned with NaN bytes (0xFF) so that unwritten outputs show.
template <class T>
class DeviceBuffer {
public:
  explicit DeviceBuffer(std::size_t n) : n_(n)
  {
    CUDA_CHECK(cudaMalloc(&ptr_, bytes() ? bytes() : 1));
    poison();
  }
  DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return ptr_; }
  std::size_t size() const { return n_; }
  std::size_t bytes() const { return n_ * sizeof(T); }
  void poison() { CUDA_CHECK(cudaMemset(ptr_, 0xFF, bytes())); }
  void upload(const std::vector<T>& host)
  {
    REQUIRE(host.size() == n_);
    CUDA_CHECK(cudaMemcpy(ptr_, host.data(), bytes(), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const
  {
    std::vector<T> host(n_);
    CUDA_CHECK(cudaMemcpy(host.data(), ptr_, bytes(), cudaMemcpyDeviceToHost));
    return host;
  }

private:
  T* ptr_ = nullptr;
  std::size_t n_;
};

/// ||out - ref|| / ||ref||; NaN or Inf anywhere in out gives +inf so that it never passes.
template <class T>
double relative_l2_error(const std::vector<T>& out, const std::vector<double>& ref)
{
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i)
  {
    const double o = static_cast<double>(out[i]);
    if (!std::isfinite(o)) { return std::numeric_limits<double>::infinity(); }
    num += (o - ref[i]) * (o - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

} // namespace test

namespace test {
/// PAGEDATTN_TEST_REDUCED=1 (set by the sanitizer run) asks the GPU tests for their reduced matrix.
inline bool reduced_matrix()
{
  const char* s = std::getenv("PAGEDATTN_TEST_REDUCED");
  return s && *s && *s != '0';
}
} // namespace test
