// GPU tests of DevicePagedAttention::Decode with fp8 caches, against the fp64 reference on the
// same stored bytes dequantized with the same scales (paged_decode::reference_attention<T, KvT>). One
// binary, two translation units compiled side by side, one per format (each instantiates its own kernels
// once): here e4m3, the matrix (every head size and block size, GQA 1, 6, 8 and 16, ALiBi, scales per KV
// head and shared), scales rewritten between graph replays, its extremes, bad arguments, the Qwen3.6 shapes
// and bf16 queries; test_decode_fp8_more.cu has e5m2.
#include "device/fp8_cache_cases.cuh"

namespace {

using pagedattn::fp8_e4m3;
using pagedattn::fp8_e5m2;
using Default = pagedattn::DefaultPagedAttentionPolicies;
/// The cases beyond the matrix instantiate two head sizes only (of the matrix's kernels).
using TwoHeadSizes = std::integer_sequence<int, 128, 256>;

} // namespace

TEST_CASE("decode fp8: fp16 queries over e4m3 caches, every head size x block size x GQA", "[decode][gpu][fp8]")
{
  GPU_TEST_SEED(seed, 1700);
  test::run_fp8_matrix<__half, fp8_e4m3>(seed, pagedattn::SupportedHeadDims{});
}

TEST_CASE("decode fp8: scales rewritten on the device between replays of one captured graph", "[decode][gpu][fp8][graph]")
{
  test::require_gpu_or_skip();
  const test::DecodeShape s{{3000, 1, 700}, /*num_heads=*/24, /*num_kv_heads=*/4, /*head_size=*/256};
  test::DeviceDecode<__half, fp8_e4m3> dd(s, test::test_seed() + 2000);
  const auto args = dd.arguments();
  std::size_t bytes = 0;
  REQUIRE((pagedattn::DevicePagedAttention::Decode<Default, TwoHeadSizes, pagedattn::VllmCacheLayout>(nullptr, bytes, args)) == cudaSuccess);
  test::DeviceBuffer<char> temp(bytes);
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  REQUIRE((pagedattn::DevicePagedAttention::Decode<Default, TwoHeadSizes, pagedattn::VllmCacheLayout>(temp.get(), bytes, args, stream)) == cudaSuccess);
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const std::vector<std::vector<float>> k_sets = {{0.5f, 0.75f, 1.f, 1.25f}, {2.f, 0.25f, 3.f, 0.125f}, {1.f, 1.f, 1.f, 1.f}};
  const std::vector<std::vector<float>> v_sets = {{1.5f, 1.25f, 1.f, 0.75f}, {0.5f, 4.f, 0.25f, 2.f}, {8.f, 8.f, 8.f, 8.f}};
  std::vector<__half> previous;
  for (std::size_t i = 0; i < k_sets.size(); ++i)
  {
    INFO("scale set " << i);
    dd.set_scales(k_sets[i], v_sets[i]); // the graph reads them at replay
    dd.output.poison();
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const auto out = dd.output.download();
    REQUIRE(dd.worst_error(out) < test::tolerance<__half>());
    REQUIRE(!test::bitwise_equal(out, previous)); // the new scales took effect
    previous = out;
  }
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_CASE("decode fp8: e4m3 extremes (largest finite, subnormals, zeros) in the cache", "[decode][gpu][fp8]")
{
  test::require_gpu_or_skip();
  // +-448, the smallest subnormal 2^-9 and others, zeros; small scales keep the scores moderate.
  test::check_fp8_extremes<fp8_e4m3>({0x7e, 0xfe, 0x01, 0x81, 0x07, 0x00, 0x80, 0x38, 0x3f, 0x08}, 1.f / 448.f, 1.f / 64.f,
                                     test::test_seed() + 2100);
}

TEST_CASE("decode fp8: bad fp8 arguments return cudaErrorInvalidValue naming them", "[decode][gpu][fp8][invalid]")
{
  test::require_gpu_or_skip();
  const test::DecodeShape s{{100}, 8, 2, 128};
  test::DeviceDecode<__half, fp8_e4m3> dd(s, 1);
  std::size_t bytes = 0;
  auto refused = [&](const auto& a, const char* named) {
    CHECK((pagedattn::DevicePagedAttention::Decode<Default, TwoHeadSizes, pagedattn::VllmCacheLayout>(nullptr, bytes, a)) == cudaErrorInvalidValue);
    CHECK(pagedattn::last_error_message().find(named) != std::string::npos);
  };
  auto a = dd.arguments();
  a.k_scale = nullptr;
  refused(a, "k_scale is null");
  a = dd.arguments();
  a.v_scale = nullptr;
  refused(a, "v_scale is null");
  a = dd.arguments();
  a.scale_head_stride = -1;
  refused(a, "scale_head_stride");
}

TEST_CASE("decode fp8: Qwen3.6 shapes over e4m3, a long sequence and a skewed batch", "[decode][gpu][fp8][long]")
{
  GPU_TEST_SEED(seed, 1900);
  test::DecodeShape skewed{{30000, 100, 100, 0, 1, 100}, /*num_heads=*/24, /*num_kv_heads=*/4, /*head_size=*/256};
  test::check_decode<__half, Default, fp8_e4m3, TwoHeadSizes>(skewed, seed);
  if (test::reduced_matrix()) { return; }
  test::DecodeShape longest{{100000}, 24, 4, 256};
  longest.reference_heads = 4;
  test::check_decode<__half, Default, fp8_e4m3, TwoHeadSizes>(longest, seed + 1);
}

#if PAGEDATTN_HAS_BF16
// bf16 queries differ from fp16 only where the queries are loaded and the output stored: one head size.
TEST_CASE("decode fp8: bf16 queries over e4m3 (head 256)", "[decode][gpu][fp8]")
{
  GPU_TEST_SEED(seed, 1800);
  const test::DecodeShape s{{700, 33, 1, 0}, /*num_heads=*/24, /*num_kv_heads=*/4, /*head_size=*/256};
  test::check_decode<__nv_bfloat16, Default, fp8_e4m3, std::integer_sequence<int, 256>>(s, seed);
}
#endif

// fp32 queries and output over fp8 take the CUDA-core fold on every architecture (vLLM's fp32 model with
// kv_cache_dtype "fp8"): block sizes, GQA 1 and 6, ALiBi, a batch with an empty sequence, a loose bound.
TEST_CASE("decode fp8: fp32 queries over e4m3 (head 128)", "[decode][gpu][fp8]")
{
  GPU_TEST_SEED(seed, 3100);
  int combo = 0;
  for (int block_size : {8, 16, 32})
  {
    for (int kv_heads : {8, 4})
    {
      test::DecodeShape s{{1, 700, 0, 4097}, /*num_heads=*/kv_heads == 8 ? 8 : 24, kv_heads, /*head_size=*/128, block_size};
      s.alibi = combo % 2 == 1;
      test::check_decode<float, Default, fp8_e4m3, std::integer_sequence<int, 128>>(s, seed + combo++);
    }
  }
  test::DecodeShape loose{{5000, 33}, 24, 4, 128}; // a bound of many waves: the persistent grid
  loose.max_seq_len_override = 100000;
  test::check_decode<float, Default, fp8_e4m3, std::integer_sequence<int, 128>>(loose, seed + combo);
}

TEST_CASE("decode fp8: logit soft-cap, attention sinks, sliding windows, several new tokens over e4m3", "[decode][gpu][fp8][variants]")
{
  GPU_TEST_SEED(seed, 2900);
  for (int head_size : {128, 256})
  {
    for (const int config : {0, 1, 2, 3}) // no window; a window; a window and four new tokens; each sequence its own
    {
      const int window_left = config > 0 ? 300 : -1, q_len = config >= 2 ? 4 : 1;
      test::DecodeShape s = test::variants_shape(head_size, /*alibi=*/head_size == 128, window_left, q_len);
      if (config == 3) { s.query_rows = {3, 0, 4, 1}; } // (query_start_loc)
      INFO("head " << head_size << " window_left " << window_left << " q_len " << q_len << " per-sequence rows " << !s.query_rows.empty());
      if (config == 3)
      {
        test::check_decode<__half, Default, fp8_e4m3, TwoHeadSizes, pagedattn::VllmCacheLayout, pagedattn::PerSequenceQueryRows>(
            s, seed + head_size + window_left + q_len);
      }
      else { test::check_decode<__half, Default, fp8_e4m3, TwoHeadSizes>(s, seed + head_size + window_left + q_len); }
    }
  }
}
