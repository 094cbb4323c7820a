// Host test (CI), compiled with -D__ILUVATAR__ (64-lane warps): the shared memory of every BI-V100
// instantiation of the decode kernel against the seeds' 48 KB budget and the vendor vLLM's 32 KB, and the
// table of docs/biv100.md that lists them (regenerate it from this test's output when a size changes).
#include <pagedattn/device/device_paged_attention.cuh>

#include "support/test_support.cuh"

#include <fstream>
#include <sstream>
#include <string>

namespace {

using Policy = pagedattn::PagedAttentionPolicyBIV100;
constexpr std::size_t vllm_budget = 32 * 1024;
constexpr std::size_t seed_budget = 48 * 1024;

template <class T, int HeadDim, int MaxRows>
std::size_t smem_bytes() { return pagedattn::detail::paged_attention_smem_bytes<pagedattn::DecodeTraits<T, HeadDim, MaxRows, Policy>>(); }

/// The bytes of one instantiation: the same for every element type (the CUDA-core fold keeps queries,
/// weights and partials in fp32), which the test checks.
template <int HeadDim, int MaxRows>
std::size_t checked_bytes()
{
  const std::size_t bytes = smem_bytes<__half, HeadDim, MaxRows>();
  CHECK(smem_bytes<float, HeadDim, MaxRows>() == bytes);
#if PAGEDATTN_HAS_BF16
  CHECK(smem_bytes<__nv_bfloat16, HeadDim, MaxRows>() == bytes);
#endif
  CHECK(bytes <= Policy::smem_budget_bytes);
  return bytes;
}

std::string cell(std::size_t bytes)
{
  const char* fits = bytes <= vllm_budget ? "fits 32 KB" : bytes <= seed_budget ? "fits 48 KB" : "over 48 KB";
  return std::to_string(bytes) + " B, " + fits;
}

template <int HeadDim>
std::string row()
{
  return "| " + std::to_string(HeadDim) + " | " + cell(checked_bytes<HeadDim, 1>()) + " | " + cell(checked_bytes<HeadDim, 4>()) + " | " +
         cell(checked_bytes<HeadDim, 8>()) + " |";
}

template <int... HeadDims>
std::vector<std::string> rows(std::integer_sequence<int, HeadDims...>) { return {row<HeadDims>()...}; }

} // namespace

TEST_CASE("BI-V100: every instantiation's shared memory within 48 KB, and docs/biv100.md lists it", "[policy][host][biv100]")
{
  static_assert(pagedattn::warp_threads == 64, "this test is compiled with -D__ILUVATAR__");
  CHECK(Policy::block_threads == 256);
  const std::vector<std::string> table = rows(pagedattn::SupportedHeadDims{});
  std::printf("docs/biv100.md, shared memory per block (BI-V100 policy, 256 threads):\n"
              "| head size | 1 head per block | 4 heads | 8 heads |\n|---|---|---|---|\n");
  for (const std::string& line : table) { std::printf("%s\n", line.c_str()); }
  std::ifstream file(PAGEDATTN_SOURCE_DIR "/docs/biv100.md");
  REQUIRE(file.good());
  std::stringstream docs;
  docs << file.rdbuf();
  for (const std::string& line : table)
  {
    INFO("docs/biv100.md lacks the row: " << line);
    CHECK(docs.str().find(line + "\n") != std::string::npos);
  }
}
