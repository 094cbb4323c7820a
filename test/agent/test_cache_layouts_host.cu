// Host tests (CI) of the cache layouts in token rows (CacheLayout hnd, nhd): the dispatch's
// strides (packed defaults and the caller's), their validation, the tests' and benchmarks' own statement of
// the layouts (examples/support/paged_decode_data.cuh) against the kernel's addressing, and the shared-memory
// layout of KvSlabRows: every unit of a stage used once, and each ldmatrix phase (8 consecutive tokens
// of one 16-byte vector, for K's A operand and V's transposed one) free of bank conflicts at every head size.
#include <pagedattn/agent/kv_slab_rows.cuh>
#include <pagedattn/device/dispatch/decode_plan.cuh>
#include <pagedattn/device/dispatch/decode_tensor_maps.cuh>

#include "support/paged_decode_data.cuh"
#include "support/test_support.cuh"

#include <cuda_fp16.h>

#include <set>
#include <vector>

namespace {

using pagedattn::CacheLayout;

pagedattn::DecodeArguments<__half> arguments(CacheLayout layout)
{
  pagedattn::DecodeArguments<__half> a;
  a.num_kv_heads = 4;
  a.head_size = 256;
  a.block_size = 16;
  a.cache_layout = layout;
  return a;
}

/// The element offset the kernels compute for (block, kv head, token, dim) of a token-row cache.
std::int64_t kernel_offset(const pagedattn::detail::CacheStrides& s, std::int64_t block, int kv_head, int token, int dim)
{
  return block * s.block + kv_head * s.head + token * s.token + dim;
}

/// Where a tensor copy with the 128-byte swizzle puts the 16-byte chunk it would put at shared offset
/// `offset` (from a 1024-byte boundary) unswizzled: chunk bits 4..6 ^= address bits 7..9.
int swizzled(int offset) { return offset ^ (((offset >> 7) & 7) << 4); }

template <class T, int HeadDim>
void check_stage_rows()
{
  using Slab = pagedattn::KvSlabRows<T, HeadDim, 128>;
  for (int lb = 3; lb <= 5; ++lb)
  {
    INFO("head " << HeadDim << " element bytes " << sizeof(T) << " block size " << (1 << lb));
    const typename Slab::Layout layout(lb);
    std::set<int> used;
    for (int t = 0; t < Slab::tile_tokens; ++t)
    {
      for (int c = 0; c < Slab::key_vectors; ++c)
      {
        const int u = layout.unit(t, c);
        CHECK(u >= 0);
        CHECK(u < Slab::k_units);
        CHECK(used.insert(u).second); // once
        CHECK(layout.k_unit(c, t) == u);
        CHECK(layout.value_row_unit(t, c) == u);
        if constexpr (Slab::span_layout)
        {
          // A tensor copy of cache block b of the tile (box {128 bytes, bs, spans}, its run starting at
          // unit b * key_vectors * bs) puts unit c of slot i where the layout says.
          const int bs = 1 << lb, b = t / bs, i = t % bs, slab = c / 8;
          const int offset = (slab * bs + i) * 128 + 16 * (c % 8); // bytes from the run's start, unswizzled
          CHECK(b * Slab::key_vectors * bs + swizzled(offset) / 16 == u);
        }
      }
    }
    // The ldmatrix phases: tokens 8i .. 8i+7 of vector c fall in 8 different 16-byte bank groups.
    for (int i = 0; i < Slab::tile_tokens / 8; ++i)
    {
      for (int c = 0; c < Slab::key_vectors; ++c)
      {
        std::set<int> groups;
        for (int r = 0; r < 8; ++r) { groups.insert(layout.unit(8 * i + r, c) % 8); }
        CHECK(groups.size() == 8u);
      }
    }
  }
  CHECK(Slab::copies * 128 >= Slab::tile_units);
}

} // namespace

TEST_CASE("cache layouts: packed strides of hnd and nhd, the caller's where given", "[layouts][host]")
{
  using pagedattn::detail::cache_strides;
  const auto hnd = cache_strides(arguments(CacheLayout::hnd));
  CHECK(hnd.block == 4 * 16 * 256);
  CHECK(hnd.head == 16 * 256);
  CHECK(hnd.token == 256);
  const auto nhd = cache_strides(arguments(CacheLayout::nhd));
  CHECK(nhd.block == 4 * 16 * 256);
  CHECK(nhd.head == 256);
  CHECK(nhd.token == 4 * 256);
  const auto vllm = cache_strides(arguments(CacheLayout::vllm));
  CHECK(vllm.block == 4 * 16 * 256); // the runs of one block and KV head
  CHECK(vllm.head == 16 * 256);
  auto a = arguments(CacheLayout::nhd);
  a.cache_block_stride = 100000;
  a.cache_token_stride = 2048;
  const auto view = cache_strides(a);
  CHECK(view.block == 100000);
  CHECK(view.head == 256);
  CHECK(view.token == 2048);
}

TEST_CASE("cache layouts: the tests' layouts address every element where the kernels do", "[layouts][host]")
{
  for (CacheLayout layout : {CacheLayout::hnd, CacheLayout::nhd})
  {
    for (int view = 0; view < 2; ++view)
    {
      auto a = arguments(layout);
      a.head_size = 96;
      a.block_size = 8;
      a.num_kv_heads = 3;
      if (view)
      {
        a.cache_token_stride = layout == CacheLayout::hnd ? 112 : 3 * 96 + 16;
        a.cache_head_stride = layout == CacheLayout::hnd ? 8 * 112 + 8 : 104;
        a.cache_block_stride = 1 << 14;
      }
      REQUIRE(pagedattn::detail::validate_cache_layout<pagedattn::SupportedCacheLayouts>(a) == cudaSuccess);
      const auto s = pagedattn::detail::cache_strides(a);
      const paged_decode::CacheLayout<__half> ref{a.num_kv_heads, a.head_size, a.block_size, layout, a.cache_block_stride,
                                                   a.cache_head_stride, a.cache_token_stride};
      std::set<std::uint64_t> seen;
      for (int b : {0, 5})
      {
        for (int h = 0; h < a.num_kv_heads; ++h)
        {
          for (int t = 0; t < a.block_size; ++t)
          {
            for (int d = 0; d < a.head_size; ++d)
            {
              CHECK(ref.key_offset(b, h, d, t) == std::uint64_t(kernel_offset(s, b, h, t, d)));
              CHECK(ref.value_offset(b, h, d, t) == std::uint64_t(kernel_offset(s, b, h, t, d)));
              CHECK(ref.key_offset(b, h, d, t) - b * ref.block_elements() < ref.block_elements()); // inside its block
              CHECK(seen.insert(ref.key_offset(b, h, d, t)).second);                             // no two alike
            }
          }
        }
      }
    }
  }
}

TEST_CASE("cache layouts: bad layouts and strides are named", "[layouts][host]")
{
  using Layouts = pagedattn::SupportedCacheLayouts;
  auto expect = [](const pagedattn::DecodeArguments<__half>& a, const char* named) {
    INFO("argument " << named);
    CHECK(pagedattn::detail::validate_cache_layout<Layouts>(a) == cudaErrorInvalidValue);
    INFO(pagedattn::last_error_message());
    CHECK(pagedattn::last_error_message().find(named) != std::string::npos);
  };
  for (CacheLayout layout : {CacheLayout::vllm, CacheLayout::hnd, CacheLayout::nhd})
  {
    CHECK(pagedattn::detail::validate_cache_layout<Layouts>(arguments(layout)) == cudaSuccess);
  }
  { auto a = arguments(CacheLayout::vllm); a.cache_token_stride = 256; expect(a, "must be 0 with cache_layout vllm"); }
  { auto a = arguments(CacheLayout::hnd); a.cache_token_stride = 260; expect(a, "cache_token_stride"); }  // 520 bytes
  { auto a = arguments(CacheLayout::hnd); a.cache_token_stride = 248; expect(a, "cache_token_stride"); }  // shorter than a row
  { auto a = arguments(CacheLayout::nhd); a.cache_head_stride = -256; expect(a, "cache_head_stride"); }
  { auto a = arguments(CacheLayout::nhd); a.cache_block_stride = 12; expect(a, "cache_block_stride"); }
  { auto a = arguments(CacheLayout::hnd); a.cache_layout = static_cast<CacheLayout>(3); expect(a, "is not a CacheLayout"); }
  {
    const auto a = arguments(CacheLayout::nhd);
    CHECK(pagedattn::detail::validate_cache_layout<pagedattn::VllmCacheLayout>(a) == cudaErrorInvalidValue);
    CHECK(pagedattn::last_error_message().find("cache_layout nhd is not instantiated") != std::string::npos);
  }
  {
    // fp8: 16-byte strides are multiples of 16 elements
    pagedattn::DecodeArguments<__half, pagedattn::fp8_e4m3> a;
    a.num_kv_heads = 4;
    a.head_size = 128;
    a.block_size = 16;
    a.cache_layout = CacheLayout::hnd;
    a.cache_token_stride = 136; // 8 elements past a row: 8 bytes, not 16
    CHECK(pagedattn::detail::validate_cache_layout<Layouts>(a) == cudaErrorInvalidValue);
    CHECK(pagedattn::last_error_message().find("16 elements of fp8_e4m3") != std::string::npos);
    a.cache_token_stride = 144;
    CHECK(pagedattn::detail::validate_cache_layout<Layouts>(a) == cudaSuccess);
  }
}

TEST_CASE("cache layouts: the 5-D tensor maps of token rows (sm_90's tensor copies)", "[layouts][host]")
{
  // NHD, a view: blocks 2 runs apart (FlashInfer's [pages][2][...]), padded head rows
  const auto m = pagedattn::detail::token_rows_tensor_map_shape(256, 16, 2, 1000, 4, 2 * 16 * 4 * 272, 272, 4 * 272);
  CHECK(m.rank == 5);
  CHECK(m.dims[0] == 64);
  CHECK(m.dims[1] == 16);
  CHECK(m.dims[2] == 4);
  CHECK(m.dims[3] == 4);
  CHECK(m.dims[4] == 1000);
  CHECK(m.strides[0] == 2 * 4 * 272); // token
  CHECK(m.strides[1] == 128);         // slab
  CHECK(m.strides[2] == 2 * 272);     // KV head
  CHECK(m.strides[3] == 2 * 2 * 16 * 4 * 272);
  CHECK(m.box[0] * m.box[1] * m.box[2] * 2 == 256u * 16u * 2u); // one run of head x bs elements
  CHECK(m.box[3] == 1u);
  CHECK(m.box[4] == 1u);
  CHECK(m.swizzle_bytes == 128);
  for (int i = 0; i < 4; ++i) { CHECK(m.strides[i] % 16 == 0); }
  CHECK(pagedattn::token_rows_tensor_copies_fit(128, 2));
  CHECK_FALSE(pagedattn::token_rows_tensor_copies_fit(96, 2));
  CHECK(pagedattn::token_rows_tensor_copies_fit(128, 1));
  CHECK_FALSE(pagedattn::token_rows_tensor_copies_fit(64, 1)); // fp8 rows of 64 bytes: cp.async
  const auto f = pagedattn::detail::token_rows_tensor_map_shape(256, 16, 1, 1000, 4, 0, 256, 4 * 256); // fp8 NHD
  CHECK(f.dims[0] == 128);
  CHECK(f.dims[2] == 2);
  CHECK(f.strides[0] == 4 * 256);
  CHECK(f.strides[2] == 256);
}

TEST_CASE("cache layouts: KvSlabRows uses each unit once, where a tensor copy puts it, and reads without bank conflicts",
          "[layouts][host]")
{
  using pagedattn::fp8_e4m3;
  check_stage_rows<__half, 64>();
  check_stage_rows<__half, 80>();
  check_stage_rows<__half, 96>();
  check_stage_rows<__half, 112>();
  check_stage_rows<__half, 128>();
  check_stage_rows<__half, 192>();
  check_stage_rows<__half, 256>();
  check_stage_rows<fp8_e4m3, 64>();
  check_stage_rows<fp8_e4m3, 80>();
  check_stage_rows<fp8_e4m3, 96>();
  check_stage_rows<fp8_e4m3, 112>();
  check_stage_rows<fp8_e4m3, 128>();
  check_stage_rows<fp8_e4m3, 192>();
  check_stage_rows<fp8_e4m3, 256>();
}
