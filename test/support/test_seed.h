#pragma once
// The tests' random seed (PAGEDATTN_TEST_SEED overrides it) and the macros that name it in every failure.
// Free of CUDA, so that host-only tests (test/agent/test_decode_plan_emulated_host.cpp) use it too.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <random>

namespace test {

/// Seed of a test's random data: PAGEDATTN_TEST_SEED if set, else a fixed default. Tests print it with
/// INFO() so that a failure names the seed that reproduces it.
inline std::uint64_t test_seed(std::uint64_t fallback = 20261129)
{
  if (const char* s = std::getenv("PAGEDATTN_TEST_SEED")) { return std::strtoull(s, nullptr, 10); }
  return fallback;
}

} // namespace test

/// First line of a test case with random data: declares `const std::uint64_t name` = test_seed() + offset
/// and names it in every failure of the test case (a macro: INFO lasts to the end of the scope it stands in).
#define TEST_SEED(name, offset)                                                                    \
  const std::uint64_t name = ::test::test_seed() + (offset);                                       \
  INFO("seed " << name)

/// TEST_SEED, and a std::mt19937_64 `name` seeded with it.
#define TEST_RNG(name, offset)                                                                     \
  TEST_SEED(name##_seed, offset);                                                                  \
  std::mt19937_64 name(name##_seed)

