// Host tests of the Python op's argument translation (python/csrc/vllm_decode_arguments.h): vLLM's
// arguments, described without torch, become DecodeArguments; each bad one is named.
#include "vllm_decode_arguments.h"

#include "support/test_support.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace {

using pagedattn_python::DType;
using pagedattn_python::KvCacheDtype;
using pagedattn_python::TensorInfo;
using pagedattn_python::VllmPagedAttentionArgs;

TensorInfo tensor(DType dtype, std::vector<std::int64_t> sizes, std::vector<std::int64_t> strides = {}, int device = 0)
{
  TensorInfo t;
  t.defined = true;
  t.cuda = true;
  t.device = device;
  t.dtype = dtype;
  t.dim = static_cast<int>(sizes.size());
  std::int64_t dense = 1;
  for (int i = t.dim - 1; i >= 0; --i)
  {
    t.size[i] = sizes[i];
    t.stride[i] = strides.empty() ? dense : strides[i];
    dense *= sizes[i];
  }
  alignas(16) static char storage[16];
  t.data = storage;
  return t;
}

/// 3 sequences, 24 query heads, 4 KV heads, head 128, block 16, 100 cache blocks of fp16 (x = 8).
VllmPagedAttentionArgs valid()
{
  VllmPagedAttentionArgs v;
  v.query = tensor(DType::f16, {3, 24, 128});
  v.out = tensor(DType::f16, {3, 24, 128});
  v.key_cache = tensor(DType::f16, {100, 4, 16, 16, 8});
  v.value_cache = tensor(DType::f16, {100, 4, 128, 16});
  v.block_tables = tensor(DType::i32, {3, 40});
  v.seq_lens = tensor(DType::i32, {3});
  v.num_kv_heads = 4;
  v.scale = 0.088;
  v.block_size = 16;
  v.max_seq_len = 640;
  return v;
}

/// valid() with an fp8 cache as vLLM 0.6.3 passes it: kv_cache_dtype, the caches of `cache` dtype (uint8, or
/// a torch float8 dtype) in the fp8 layout (x = 16), k_scale 0.5 and v_scale 2.0; `query` dtype queries.
VllmPagedAttentionArgs valid_fp8(const char* kv_cache_dtype = "fp8", DType cache = DType::u8, DType query = DType::f16,
                                 int head_size = 128)
{
  VllmPagedAttentionArgs v = valid();
  v.query = tensor(query, {3, 24, head_size});
  v.out = tensor(query, {3, 24, head_size});
  v.key_cache = tensor(cache, {100, 4, head_size / 16, 16, 16});
  v.value_cache = tensor(cache, {100, 4, head_size, 16});
  v.kv_cache_dtype = kv_cache_dtype;
  v.k_scale = 0.5;
  v.v_scale = 2.0;
  return v;
}

} // namespace

TEST_CASE("python op arguments: vLLM's arguments become DecodeArguments, strided views included", "[python][host]")
{
  VllmPagedAttentionArgs v = valid();
  // The query as a view of a fused qkv tensor [3, (24 + 2 * 4) * 128]: rows 4096 elements apart.
  v.query = tensor(DType::f16, {3, 24, 128}, {4096, 128, 1});
  pagedattn::DecodeArguments<__half> a;
  REQUIRE(pagedattn_python::to_decode_arguments(v, a).empty());
  CHECK(a.num_seqs == 3);
  CHECK(a.num_heads == 24);
  CHECK(a.num_kv_heads == 4);
  CHECK(a.head_size == 128);
  CHECK(a.block_size == 16);
  CHECK(a.num_blocks == 100);
  CHECK(a.max_blocks_per_seq == 40);
  CHECK(a.max_seq_len == 640);
  CHECK(a.query_seq_stride == 4096);
  CHECK(a.query_head_stride == 128);
  CHECK(a.output_seq_stride == 24 * 128);
  CHECK(a.output_head_stride == 128);
  CHECK(a.scale == Approx(0.088f));
  CHECK(a.alibi_slopes == nullptr);
  v.alibi_slopes = tensor(DType::f32, {24});
  REQUIRE(pagedattn_python::to_decode_arguments(v, a).empty());
  CHECK(a.alibi_slopes != nullptr);
  // pagedattn.decode's variants: the soft-cap and the sinks pass through.
  CHECK(a.logit_softcap == 0.f);
  CHECK(a.sinks == nullptr);
  v.logits_soft_cap = 30.0;
  v.sinks = tensor(DType::f32, {24});
  REQUIRE(pagedattn_python::to_decode_arguments(v, a).empty());
  CHECK(a.logit_softcap == 30.f);
  CHECK(a.sinks != nullptr);
  CHECK(a.window_left == -1);
  v.window_left = 4095;
  REQUIRE(pagedattn_python::to_decode_arguments(v, a).empty());
  CHECK(a.window_left == 4095);
  // q_len new tokens per sequence: the query and out have num_seqs * q_len rows, the sequences stay 3.
  CHECK(a.q_len == 1);
  v.q_len = 4;
  v.query = tensor(DType::f16, {12, 24, 128}, {4096, 128, 1});
  v.out = tensor(DType::f16, {12, 24, 128});
  REQUIRE(pagedattn_python::to_decode_arguments(v, a).empty());
  CHECK(a.q_len == 4);
  CHECK(a.num_seqs == 3);
  CHECK(a.window_left == 4095);
  CHECK(a.query_seq_stride == 4096);
  CHECK(a.output_seq_stride == 24 * 128);
  v.q_len = pagedattn::max_q_len;
  v.query = tensor(DType::f16, {3 * pagedattn::max_q_len, 24, 128});
  v.out = tensor(DType::f16, {3 * pagedattn::max_q_len, 24, 128});
  REQUIRE(pagedattn_python::to_decode_arguments(v, a).empty());
  CHECK(a.q_len == pagedattn::max_q_len);
  CHECK(a.num_seqs == 3);
  // query_start_loc: any number of rows (7 here), the sequences its entries less one, q_len their most.
  v.q_len = 4;
  v.query = tensor(DType::f16, {7, 24, 128});
  v.out = tensor(DType::f16, {7, 24, 128});
  v.query_start_loc = tensor(DType::i32, {4});
  REQUIRE(pagedattn_python::to_decode_arguments(v, a).empty());
  CHECK(a.num_seqs == 3);
  CHECK(a.num_query_rows == 7);
  CHECK(a.query_start_loc != nullptr);
  CHECK(a.q_len == 4);
  v.query_start_loc = TensorInfo{};
  v.out = tensor(DType::f16, {3, 24, 128});
  v.q_len = 1;
  v.query = tensor(DType::f16, {3, 24, 128}, {4096, 128, 1});
  v.logits_soft_cap = 0.0;
  v.sinks = TensorInfo{};
  v.window_left = -1;
  // out as a permuted view ([num_heads, num_seqs, head_size] storage, transposed) and with padded rows: no
  // two rows share an element, so both are accepted.
  v.out = tensor(DType::f16, {3, 24, 128}, {128, 3 * 128, 1});
  CHECK(pagedattn_python::check(v).empty());
  v.out = tensor(DType::f16, {3, 24, 128}, {24 * 256, 256, 1});
  CHECK(pagedattn_python::check(v).empty());
  v.out = tensor(DType::f16, {3, 24, 128});
  // vLLM's defaults for the options pagedattn does not have pass; blocksparse_vert_stride 1 is not block-sparse.
  v.blocksparse_vert_stride = 1;
  v.tp_rank = 3;
  CHECK(pagedattn_python::check(v).empty());
}

TEST_CASE("python op arguments: each bad argument is named", "[python][host]")
{
  struct Case {
    const char* name;
    std::function<void(VllmPagedAttentionArgs&)> spoil;
  };
  const std::vector<Case> cases = {
      {"kv_cache_dtype", [](auto& v) { v.kv_cache_dtype = "int8"; }},
      {"k_scale", [](auto& v) { v.k_scale = 0.5; }}, // "auto": the scales must be 1
      {"k_scale", [](auto& v) { v.v_scale = 2.0; }}, // (one message names both)
      {"key_cache", [](auto& v) { v.key_cache.dtype = DType::u8; }}, // an fp8 cache with "auto"
      {"blocksparse", [](auto& v) { v.blocksparse_vert_stride = 8; }},
      {"query", [](auto& v) { v.query.cuda = false; }},
      {"query", [](auto& v) { v.query.dtype = DType::i32; }},
      {"query", [](auto& v) { v.query.stride[2] = 2; }},
      {"query", [](auto& v) { v.query.stride[0] = 0; }},
      {"out", [](auto& v) { v.out.defined = false; }},
      {"out", [](auto& v) { v.out.device = 1; }},
      {"out", [](auto& v) { v.out.dtype = DType::bf16; }},
      {"out", [](auto& v) { v.out.size[1] = 8; }},
      {"out", [](auto& v) { v.out.stride[1] = 64; }},
      {"out", [](auto& v) { v.out.stride[0] = 23 * 128; }}, // the last head of a sequence meets the next sequence
      {"num_kv_heads", [](auto& v) { v.num_kv_heads = 5; }},
      {"key_cache", [](auto& v) { v.key_cache.dim = 4; }},
      {"key_cache", [](auto& v) { v.key_cache.dtype = DType::f32; }},
      {"key_cache", [](auto& v) { v.key_cache.size[4] = 4; }},
      {"key_cache", [](auto& v) { v.key_cache.size[2] = 8; }},
      {"key_cache", [](auto& v) { v.key_cache.stride[0] *= 2; }},
      {"block_size", [](auto& v) { v.block_size = 32; }},
      {"value_cache", [](auto& v) { v.value_cache.size[2] = 64; }},
      {"value_cache", [](auto& v) { v.value_cache.stride[3] = 2; }},
      {"block_tables", [](auto& v) { v.block_tables.dtype = DType::other; }},
      {"block_tables", [](auto& v) { v.block_tables.size[0] = 2; }},
      {"block_tables", [](auto& v) { v.block_tables.stride[0] = 41; }},
      {"seq_lens", [](auto& v) { v.seq_lens.size[0] = 4; }},
      {"seq_lens", [](auto& v) { v.seq_lens.dtype = DType::other; }},
      {"alibi_slopes", [](auto& v) { v.alibi_slopes = tensor(DType::f32, {23}); }},
      {"alibi_slopes", [](auto& v) { v.alibi_slopes = tensor(DType::f16, {24}); }},
      {"sinks", [](auto& v) { v.sinks = tensor(DType::f32, {23}); }},
      {"sinks", [](auto& v) { v.sinks = tensor(DType::bf16, {24}); }},
      {"sinks", [](auto& v) { v.sinks = tensor(DType::f32, {24}, {2}); }},
      {"logits_soft_cap", [](auto& v) { v.logits_soft_cap = -1.0; }},
      {"logits_soft_cap", [](auto& v) { v.logits_soft_cap = 1e39; }}, // infinite as a float32
      {"logits_soft_cap", [](auto& v) { v.logits_soft_cap = std::nan(""); }},
      {"window_left", [](auto& v) { v.window_left = -2; }},
      {"window_left", [](auto& v) { v.window_left = std::int64_t(1) << 31; }},
      {"q_len", [](auto& v) { v.q_len = 0; }},
      {"q_len", [](auto& v) { v.q_len = 9; }},
      {"q_len", [](auto& v) { v.q_len = -1; }},
      {"q_len", [](auto& v) { v.q_len = std::int64_t(1) << 32; }},
      {"query", [](auto& v) { v.q_len = 2; }}, // 3 rows: not 2 per sequence
      {"query", [](auto& v) { v.q_len = 4; v.query.size[0] = v.out.size[0] = 8; }}, // 2 sequences of 4, block_tables 3
      {"block_tables", [](auto& v) { v.q_len = 4; v.query.size[0] = v.out.size[0] = 8; }}, // (the same message)
      {"query", [](auto& v) { v.q_len = 4; v.query.size[0] = v.out.size[0] = 12; v.seq_lens.size[0] = 4; }}, // seq_lens 4
      {"out", [](auto& v) { v.q_len = 4; v.query.size[0] = 12; }}, // out [3, ...]: one row per sequence
      {"max_seq_len", [](auto& v) { v.max_seq_len = -1; }},
      {"query_start_loc", [](auto& v) { v.query_start_loc = tensor(DType::i32, {5}); }}, // 4 sequences, block_tables 3
      {"query_start_loc", [](auto& v) { v.query_start_loc = tensor(DType::other, {4}); }},
      {"query_start_loc", [](auto& v) { v.query_start_loc = tensor(DType::i32, {0}); }},
      {"query_start_loc", [](auto& v) { v.query_start_loc = tensor(DType::i32, {2, 2}); }},
  };
  for (const Case& c : cases)
  {
    VllmPagedAttentionArgs v = valid();
    c.spoil(v);
    const std::string message = pagedattn_python::check(v);
    INFO("case " << (&c - cases.data()) << " (" << c.name << "): \"" << message << "\"");
    CHECK(message.find(c.name) != std::string::npos);
  }
}

TEST_CASE("python op arguments: pytest's 13 bad inputs of pagedattn.decode and tensors of other ranks are named",
          "[python][host]")
{
  // python/tests/test_ops.py bad_cases(): 2 sequences, 8/2 heads, head 128, block 16, fp16, described as
  // the torch binding describes them. pagedattn.decode() takes num_kv_heads and block_size from key_cache.
  auto decode_args = []() {
    VllmPagedAttentionArgs v;
    v.query = tensor(DType::f16, {2, 8, 128});
    v.out = tensor(DType::f16, {2, 8, 128});
    v.key_cache = tensor(DType::f16, {6, 2, 16, 16, 8});
    v.value_cache = tensor(DType::f16, {6, 2, 128, 16});
    v.block_tables = tensor(DType::i32, {2, 3});
    v.seq_lens = tensor(DType::i32, {2});
    v.scale = 0.088;
    v.max_seq_len = 40;
    return v;
  };
  auto cpu = [](TensorInfo t) {
    t.cuda = false;
    t.device = -1;
    return t;
  };
  struct Case {
    const char* name;
    std::function<void(VllmPagedAttentionArgs&)> spoil;
  };
  const std::vector<Case> cases = {
      {"query", [&](auto& v) { v.query = cpu(v.query); }},
      {"query", [](auto& v) { v.query.dtype = DType::other; v.out.dtype = DType::other; }}, // float64 (out like the query)
      {"out", [](auto& v) { v.out = tensor(DType::f16, {1, 1, 1}); }},
      {"out", [](auto& v) { v.out.dtype = DType::f32; }},
      {"key_cache", [](auto& v) { v.key_cache = tensor(DType::f16, {6, 2, 128, 16}); }}, // reshaped to 4-D
      {"key_cache", [](auto& v) { v.key_cache.dtype = DType::f32; }},
      {"value_cache", [](auto& v) { v.value_cache = tensor(DType::f16, {6, 2, 64, 16}, {4096, 2048, 16, 1}); }}, // [:, :, :64]
      {"block_tables", [](auto& v) { v.block_tables.dtype = DType::other; }},
      {"block_tables", [](auto& v) { v.block_tables = tensor(DType::i32, {1, 3}); }},
      {"seq_lens", [](auto& v) { v.seq_lens.dtype = DType::other; }},
      {"seq_lens", [](auto& v) { v.seq_lens = tensor(DType::i32, {1}); }},
      {"alibi_slopes", [](auto& v) { v.alibi_slopes = tensor(DType::f32, {3}); }},
      {"max_seq_len", [](auto& v) { v.max_seq_len = 10000000; }}, // past 3 blocks * 16: named here, not by the library
      // Beyond pytest's list: the key_cache forms that decode() must name before it reads any size.
      {"key_cache", [](auto& v) { v.key_cache = tensor(DType::f16, {6}); }},
      {"key_cache", [](auto& v) { v.key_cache = tensor(DType::f16, {}); }},
      {"key_cache", [](auto& v) { v.key_cache.defined = false; }},
      {"key_cache", [&](auto& v) { v.key_cache = cpu(v.key_cache); }},
      {"key_cache", [](auto& v) { v.key_cache.dim = 9; }}, // more dimensions than a TensorInfo stores
      {"query", [](auto& v) { v.query.dim = 12; }},
      {"query", [](auto& v) { v.query = tensor(DType::f16, {2, 8}); }},
      {"out", [](auto& v) { v.out.dim = -1; }},
      {"value_cache", [](auto& v) { v.value_cache.dim = 9; }},
      {"block_tables", [](auto& v) { v.block_tables = tensor(DType::i32, {6}); }},
      {"seq_lens", [](auto& v) { v.seq_lens = tensor(DType::i32, {2, 1}); }},
      {"alibi_slopes", [](auto& v) { v.alibi_slopes = tensor(DType::f32, {8, 1}); }},
      {"seq_lens", [](auto& v) { v.seq_lens.device = 3; }},
  };
  {
    VllmPagedAttentionArgs v = decode_args();
    REQUIRE(pagedattn_python::take_layout_from_key_cache(v).empty());
    CHECK(v.num_kv_heads == 2);
    CHECK(v.block_size == 16);
    pagedattn::DecodeArguments<__half> a;
    REQUIRE(pagedattn_python::to_decode_arguments(v, a).empty());
  }
  for (const Case& c : cases)
  {
    VllmPagedAttentionArgs v = decode_args();
    c.spoil(v);
    std::string message = pagedattn_python::take_layout_from_key_cache(v); // what torch_ops.cu's decode() does
    if (message.empty()) { message = pagedattn_python::check(v); }
    INFO("case " << (&c - cases.data()) << " (" << c.name << "): \"" << message << "\"");
    CHECK(message.find(c.name) != std::string::npos);
    pagedattn::DecodeArguments<__half> a;
    CHECK(!pagedattn_python::to_decode_arguments(v, a).empty());
  }
}

TEST_CASE("python op arguments: vLLM's fp8 caches become DecodeArguments<T, fp8_e4m3 / fp8_e5m2>", "[python][host][fp8]")
{
  // The caller's device float[2] {k_scale, v_scale}: torch_ops.cu writes it on the launch's stream.
  static float device_scales[2];
  struct Case {
    const char* kv_cache_dtype;
    DType cache, query;
    int head_size;
  };
  // vLLM 0.6's uint8 caches and the torch float8 dtypes, "fp8" as e4m3, every query type, heads 128 and 256.
  const std::vector<Case> cases = {
      {"fp8", DType::u8, DType::f16, 128},          {"fp8_e4m3", DType::u8, DType::bf16, 256},
      {"fp8_e5m2", DType::u8, DType::f16, 256},     {"fp8_e5m2", DType::u8, DType::bf16, 128},
      {"fp8", DType::f8_e4m3, DType::bf16, 128},    {"fp8_e4m3", DType::f8_e4m3, DType::f16, 256},
      {"fp8_e5m2", DType::f8_e5m2, DType::f16, 128}, {"fp8", DType::u8, DType::f32, 128},
      {"fp8_e5m2", DType::f8_e5m2, DType::f32, 256},
  };
  for (const Case& c : cases)
  {
    INFO("kv_cache_dtype " << c.kv_cache_dtype << ", cache " << pagedattn_python::dtype_name(c.cache) << ", query "
                           << pagedattn_python::dtype_name(c.query) << ", head " << c.head_size);
    const VllmPagedAttentionArgs v = valid_fp8(c.kv_cache_dtype, c.cache, c.query, c.head_size);
    REQUIRE(pagedattn_python::check(v).empty());
    auto expect_translation = [&](auto a) {
      REQUIRE(pagedattn_python::to_decode_arguments(v, a, device_scales).empty());
      CHECK(a.k_scale == device_scales);
      CHECK(a.v_scale == device_scales + 1);
      CHECK(a.scale_head_stride == 0);
      CHECK(static_cast<const void*>(a.key_cache) == v.key_cache.data);
      CHECK(static_cast<const void*>(a.value_cache) == v.value_cache.data);
      CHECK(a.head_size == c.head_size);
      CHECK(a.num_kv_heads == 4);
      CHECK(a.block_size == 16);
      CHECK(a.num_blocks == 100);
      CHECK(a.scale == Approx(0.088f));
    };
    const KvCacheDtype kv = pagedattn_python::kv_cache_dtype_of(c.kv_cache_dtype);
    if (c.query == DType::f16 && kv == KvCacheDtype::fp8_e4m3) { expect_translation(pagedattn::DecodeArguments<__half, pagedattn::fp8_e4m3>{}); }
    if (c.query == DType::f16 && kv == KvCacheDtype::fp8_e5m2) { expect_translation(pagedattn::DecodeArguments<__half, pagedattn::fp8_e5m2>{}); }
    if (c.query == DType::bf16 && kv == KvCacheDtype::fp8_e4m3)
    {
      expect_translation(pagedattn::DecodeArguments<__nv_bfloat16, pagedattn::fp8_e4m3>{});
    }
    if (c.query == DType::bf16 && kv == KvCacheDtype::fp8_e5m2)
    {
      expect_translation(pagedattn::DecodeArguments<__nv_bfloat16, pagedattn::fp8_e5m2>{});
    }
    if (c.query == DType::f32 && kv == KvCacheDtype::fp8_e4m3) { expect_translation(pagedattn::DecodeArguments<float, pagedattn::fp8_e4m3>{}); }
    if (c.query == DType::f32 && kv == KvCacheDtype::fp8_e5m2) { expect_translation(pagedattn::DecodeArguments<float, pagedattn::fp8_e5m2>{}); }
  }
  CHECK(pagedattn_python::kv_cache_dtype_of("fp8") == KvCacheDtype::fp8_e4m3);
  CHECK(pagedattn_python::kv_cache_dtype_of("fp8_e4m3") == KvCacheDtype::fp8_e4m3);
  CHECK(pagedattn_python::kv_cache_dtype_of("fp8_e5m2") == KvCacheDtype::fp8_e5m2);
  CHECK(pagedattn_python::kv_cache_dtype_of("auto") == KvCacheDtype::auto_);
  CHECK(pagedattn_python::kv_cache_dtype_of("fp8_e4m3fn") == KvCacheDtype::unknown);

  // "auto" leaves the scale pointers null, whatever the caller passes (the library refuses them there).
  pagedattn::DecodeArguments<__half> a;
  REQUIRE(pagedattn_python::to_decode_arguments(valid(), a, device_scales).empty());
  CHECK(a.k_scale == nullptr);
  CHECK(a.v_scale == nullptr);
  // Scales of any finite positive float32 pass, not only powers of two.
  VllmPagedAttentionArgs v = valid_fp8();
  v.k_scale = 3.0e-7;
  v.v_scale = 1.0e30;
  CHECK(pagedattn_python::check(v).empty());
}

TEST_CASE("python op arguments: each bad argument of an fp8 call is named", "[python][host][fp8]")
{
  struct Case {
    const char* name;
    std::function<void(VllmPagedAttentionArgs&)> spoil;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<Case> cases = {
      {"kv_cache_dtype", [](auto& v) { v.kv_cache_dtype = "fp8_e4m3fn"; }}, // torch's name, not vLLM's
      {"kv_cache_dtype", [](auto& v) { v.kv_cache_dtype = "FP8"; }},
      {"kv_cache_dtype", [](auto& v) { v.kv_cache_dtype = ""; }},
      {"k_scale", [](auto& v) { v.k_scale = 0.0; }},
      {"k_scale", [](auto& v) { v.k_scale = -0.5; }},
      {"k_scale", [=](auto& v) { v.k_scale = nan; }},
      {"k_scale", [=](auto& v) { v.k_scale = inf; }},
      {"k_scale", [](auto& v) { v.k_scale = 1e-60; }}, // 0 as a float32
      {"k_scale", [](auto& v) { v.k_scale = 1e60; }},  // infinity as a float32
      {"v_scale", [](auto& v) { v.v_scale = 0.0; }},
      {"v_scale", [=](auto& v) { v.v_scale = nan; }},
      {"v_scale", [=](auto& v) { v.v_scale = -inf; }},
      {"key_cache must be uint8 or float8_e4m3fn", [](auto& v) { v.key_cache.dtype = DType::f16; }},
      {"key_cache must be uint8 or float8_e4m3fn", [](auto& v) { v.key_cache.dtype = DType::f8_e5m2; }}, // the other format
      {"key_cache must be uint8 or float8_e5m2", [](auto& v) { v.kv_cache_dtype = "fp8_e5m2"; v.key_cache.dtype = DType::f8_e4m3; }},
      {"key_cache", [](auto& v) { v.key_cache.dtype = DType::i32; }},
      {"value_cache must be uint8 or float8_e4m3fn", [](auto& v) { v.value_cache.dtype = DType::bf16; }},
      {"value_cache must be uint8 or float8_e5m2", [](auto& v) { v.kv_cache_dtype = "fp8_e5m2"; v.key_cache.dtype = DType::f8_e5m2; v.value_cache.dtype = DType::f8_e4m3; }},
      // The 16-bit layout (x = 8, head_size / 8 rows) with one-byte elements: x must be 16.
      {"key_cache's last dimension x must hold 16 bytes (16 elements), got 8", [](auto& v) { v.key_cache = tensor(DType::u8, {100, 4, 16, 16, 8}); }},
      {"key_cache", [](auto& v) { v.key_cache = tensor(DType::u8, {100, 4, 4, 16, 16}); }}, // head 64 of rows for a query of 128
      {"value_cache", [](auto& v) { v.value_cache = tensor(DType::u8, {100, 4, 64, 16}); }},
      {"blocksparse", [](auto& v) { v.blocksparse_vert_stride = 8; }},
      // Head 120 in vLLM's fp8 layout (head_size // 16 = 7 rows of 16): the head size is named, not the shape.
      {"head_size 120 is not supported with a 1-byte cache element", [](auto& v) {
         v.query = tensor(DType::f16, {3, 24, 120});
         v.out = tensor(DType::f16, {3, 24, 120});
         v.key_cache = tensor(DType::u8, {100, 4, 7, 16, 16});
         v.value_cache = tensor(DType::u8, {100, 4, 120, 16});
       }},
  };
  for (const Case& c : cases)
  {
    VllmPagedAttentionArgs v = valid_fp8();
    c.spoil(v);
    const std::string message = pagedattn_python::check(v);
    INFO("case " << (&c - cases.data()) << " (" << c.name << "): \"" << message << "\"");
    CHECK(message.find(c.name) != std::string::npos);
    static float device_scales[2];
    pagedattn::DecodeArguments<__half, pagedattn::fp8_e4m3> a;
    CHECK(!pagedattn_python::to_decode_arguments(v, a, device_scales).empty());
  }
}

TEST_CASE("python op arguments: the translation refuses a caller's mismatched cache type or missing device scales",
          "[python][host][fp8]")
{
  static float device_scales[2];
  const VllmPagedAttentionArgs v = valid_fp8("fp8_e5m2");
  pagedattn::DecodeArguments<__half, pagedattn::fp8_e5m2> right;
  CHECK(pagedattn_python::to_decode_arguments(v, right, device_scales).empty());
  CHECK(pagedattn_python::to_decode_arguments(v, right).find("k_scale and v_scale") != std::string::npos); // no device float[2]
  pagedattn::DecodeArguments<__half, pagedattn::fp8_e4m3> other_format;
  CHECK(pagedattn_python::to_decode_arguments(v, other_format, device_scales).find("kv_cache_dtype") != std::string::npos);
  pagedattn::DecodeArguments<__half> sixteen_bit;
  CHECK(pagedattn_python::to_decode_arguments(v, sixteen_bit, device_scales).find("kv_cache_dtype") != std::string::npos);
  pagedattn::DecodeArguments<__half, pagedattn::fp8_e4m3> fp8_for_auto;
  CHECK(pagedattn_python::to_decode_arguments(valid(), fp8_for_auto, device_scales).find("kv_cache_dtype") != std::string::npos);
}
