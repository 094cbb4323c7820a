// Host tests of the Python op's argument translation (python/csrc/vllm_decode_arguments.h): vLLM's
// arguments, described without torch, become DecodeArguments; each bad one is named.
#include "vllm_decode_arguments.h"

#include "support/test_support.cuh"

#include <cuda_fp16.h>

#include <functional>
#include <string>
#include <vector>

namespace {

using pagedattn_python::DType;
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
  static char storage[16];
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
      {"kv_cache_dtype", [](auto& v) { v.kv_cache_dtype = "fp8_e4m3"; }},
      {"k_scale", [](auto& v) { v.k_scale = 0.5; }},
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
      {"max_seq_len", [](auto& v) { v.max_seq_len = -1; }},
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
