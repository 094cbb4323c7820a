// GPU tests of DevicePagedAttention::Decode with fp8 caches (issue 17), against the fp64 reference on the
// same stored bytes dequantized with the same scales (paged_decode::reference_attention<T, KvT>): here the
// e4m3 matrix (every head size and block size, GQA 1, 6, 8 and 16, ALiBi, scales per KV head and shared),
// scales rewritten between graph replays, both formats' extremes, non-finite bytes in a live token
// (docs/api.md says what they give) and bad arguments; test_decode_fp8_more.cu has the rest (one binary,
// two translation units, so that the build compiles them side by side).
#include "device/decode_test_support.cuh"

#include <pagedattn/util_fp8.cuh>

namespace {

using pagedattn::fp8_e4m3;
using pagedattn::fp8_e5m2;
using Default = pagedattn::DefaultPagedAttentionPolicies;
/// The cases beyond the matrix instantiate two head sizes only (the binary compiles in half the time).
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

namespace {

/// Overwrite a one-sequence problem's cache (whole blocks, all live) with the given bytes, cycled; returns
/// the values the fp64 reference sees ([token][kv_head][dim], dequantized with the KV head's scales).
template <class KvT>
void fill_live_cache(test::DeviceDecode<__half, KvT>& dd, const std::vector<std::uint8_t>& key_bytes,
                     const std::vector<std::uint8_t>& value_bytes, std::vector<float>& key_values, std::vector<float>& value_values)
{
  // One sequence of whole blocks: its blocks hold only live tokens.
  const auto& s = dd.prob.shape;
  REQUIRE(dd.prob.num_seqs == 1);
  REQUIRE(s.seq_lens[0] % s.block_size == 0);
  const paged_decode::CacheLayout<KvT> layout{s.num_kv_heads, s.head_size, s.block_size};
  const std::size_t block_elements = layout.block_elements();
  std::vector<KvT> key_block(block_elements), value_block(block_elements);
  key_values.assign(std::size_t(s.seq_lens[0]) * s.num_kv_heads * s.head_size, 0.f);
  value_values = key_values;
  std::size_t n = 0;
  for (int b = 0; b < s.blocks_of(0); ++b)
  {
    for (int kvh = 0; kvh < s.num_kv_heads; ++kvh)
    {
      for (int t = 0; t < s.block_size; ++t)
      {
        for (int d = 0; d < s.head_size; ++d, ++n)
        {
          const KvT k{key_bytes[n % key_bytes.size()]}, v{value_bytes[(n * 7) % value_bytes.size()]};
          key_block[layout.key_offset(0, kvh, d, t)] = k;
          value_block[layout.value_offset(0, kvh, d, t)] = v;
          const std::size_t i = ((std::size_t(b) * s.block_size + t) * s.num_kv_heads + kvh) * s.head_size + d;
          key_values[i] = pagedattn::ElementTraits<KvT>::to_float(k) * float(dd.k_scale_of(kvh));
          value_values[i] = pagedattn::ElementTraits<KvT>::to_float(v) * float(dd.v_scale_of(kvh));
        }
      }
    }
    const std::size_t offset = std::size_t(dd.prob.block_tables[b]) * block_elements;
    CUDA_CHECK(cudaMemcpy(dd.d_key + offset, key_block.data(), block_elements * sizeof(KvT), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dd.d_value + offset, value_block.data(), block_elements * sizeof(KvT), cudaMemcpyHostToDevice));
  }
}

} // namespace

TEST_CASE("decode fp8: the formats' extremes (largest finite, subnormals, zeros) in the cache", "[decode][gpu][fp8]")
{
  test::require_gpu_or_skip();
  // e4m3: +-448, the smallest subnormal 2^-9 and others, zeros; small scales keep the scores moderate.
  const std::vector<std::uint8_t> e4m3_bytes = {0x7e, 0xfe, 0x01, 0x81, 0x07, 0x00, 0x80, 0x38, 0x3f, 0x08};
  const std::vector<std::uint8_t> e5m2_bytes = {0x7b, 0xfb, 0x01, 0x81, 0x03, 0x00, 0x80, 0x3c, 0x04};
  for (int format = 0; format < 2; ++format)
  {
    INFO((format == 0 ? "e4m3" : "e5m2"));
    test::DecodeShape s{{256}, /*num_heads=*/8, /*num_kv_heads=*/2, /*head_size=*/128};
    auto run = [&](auto kv_tag, const std::vector<std::uint8_t>& bytes, float k_scale, float v_scale) {
      using KvT = decltype(kv_tag);
      test::DeviceDecode<__half, KvT> dd(s, test::test_seed() + 2100 + format);
      dd.set_scales({k_scale, k_scale}, {v_scale, v_scale});
      std::vector<float> keys, values;
      fill_live_cache(dd, bytes, bytes, keys, values);
      const auto out = dd.template run<Default, TwoHeadSizes>();
      // The reference over the same dequantized values.
      const int D = s.head_size, group = s.num_heads / s.num_kv_heads, len = s.seq_lens[0];
      for (int h = 0; h < s.num_heads; ++h)
      {
        const int kvh = h / group;
        std::vector<double> score(len), ref(D, 0.0);
        for (int t = 0; t < len; ++t)
        {
          double acc = 0;
          for (int d = 0; d < D; ++d)
          {
            acc += double(__half2float(dd.prob.query[std::size_t(h) * D + d])) * keys[(std::size_t(t) * s.num_kv_heads + kvh) * D + d];
          }
          score[t] = acc * dd.prob.scale;
        }
        const double m = *std::max_element(score.begin(), score.end());
        double sum = 0;
        for (int t = 0; t < len; ++t)
        {
          const double p = std::exp(score[t] - m);
          sum += p;
          for (int d = 0; d < D; ++d) { ref[d] += p * values[(std::size_t(t) * s.num_kv_heads + kvh) * D + d]; }
        }
        std::vector<float> got(D);
        for (int d = 0; d < D; ++d)
        {
          ref[d] /= sum;
          got[d] = __half2float(out[std::size_t(h) * D + d]);
        }
        INFO("head " << h);
        REQUIRE(test::relative_l2_error(got, ref) < test::tolerance<__half>());
      }
    };
    if (format == 0) { run(fp8_e4m3{}, e4m3_bytes, 1.f / 448.f, 1.f / 64.f); }
    else { run(fp8_e5m2{}, e5m2_bytes, 1.f / 57344.f, 1.f / 4096.f); }
  }
}

TEST_CASE("decode fp8: e5m2 infinity and NaN bytes in a live token give the documented non-finite outputs", "[decode][gpu][fp8]")
{
  test::require_gpu_or_skip();
  // Two sequences; only sequence 0's token 5 of KV head 0 holds the non-finite byte. docs/api.md: a NaN key
  // element makes the scores of its KV head's query heads NaN, hence their outputs NaN; an infinite value
  // element, weighted by a positive softmax weight, makes that dimension of their outputs infinite. Other
  // KV heads and other sequences are untouched (checked against the reference).
  const test::DecodeShape s{{64, 48}, /*num_heads=*/8, /*num_kv_heads=*/2, /*head_size=*/128, /*block_size=*/16};
  for (const bool nan_key : {true, false})
  {
    INFO((nan_key ? "NaN key byte" : "infinite value byte"));
    test::DeviceDecode<__half, fp8_e5m2> dd(s, test::test_seed() + 2200);
    const auto clean = dd.run<Default, TwoHeadSizes>();
    const paged_decode::CacheLayout<fp8_e5m2> layout{s.num_kv_heads, s.head_size, s.block_size};
    const int token = 5, dim = 9, kvh = 0;
    const std::size_t block = std::size_t(dd.prob.block_tables[token / s.block_size]);
    const std::uint8_t byte = nan_key ? 0x7e : 0x7c; // e5m2: exponent 31 with mantissa 2 (NaN), 0 (+infinity)
    const std::size_t offset = block * layout.block_elements() +
                               (nan_key ? layout.key_offset(0, kvh, dim, token % s.block_size) : layout.value_offset(0, kvh, dim, token % s.block_size));
    CUDA_CHECK(cudaMemcpy(reinterpret_cast<std::uint8_t*>(nan_key ? static_cast<void*>(dd.d_key) : static_cast<void*>(dd.d_value)) + offset,
                          &byte, 1, cudaMemcpyHostToDevice));
    const auto out = dd.run<Default, TwoHeadSizes>();
    const int group = s.num_heads / s.num_kv_heads;
    for (int q = 0; q < 2; ++q)
    {
      for (int h = 0; h < s.num_heads; ++h)
      {
        for (int d = 0; d < s.head_size; ++d)
        {
          const std::size_t i = (std::size_t(q) * s.num_heads + h) * s.head_size + d;
          const float got = __half2float(out[i]);
          INFO("sequence " << q << " head " << h << " dim " << d);
          if (q == 0 && h / group == kvh)
          {
            if (nan_key) { REQUIRE(std::isnan(got)); }
            else if (d == dim) { REQUIRE(got == INFINITY); }
            else { REQUIRE(std::isfinite(got)); }
          }
          else { REQUIRE(test::bitwise_equal(std::vector<__half>{out[i]}, std::vector<__half>{clean[i]})); }
        }
      }
    }
  }
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
  pagedattn::DecodeArguments<float, fp8_e4m3> fp32_queries{};
  fp32_queries.num_seqs = 0;
  fp32_queries.num_heads = 8;
  fp32_queries.num_kv_heads = 2;
  fp32_queries.head_size = 128;
  fp32_queries.block_size = 16;
  fp32_queries.max_blocks_per_seq = 1;
  fp32_queries.num_blocks = 1;
  fp32_queries.scale = 1.f;
  refused(fp32_queries, "need fp16 or bf16 queries, not fp32");
}
