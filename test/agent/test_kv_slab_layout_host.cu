// The shared-memory layout of the sm_90 bulk-copy stage (KvSlabBulk), on the host: where each bulk
// copy puts a cache block's K and V run agrees with the units the tensor-core tile reads (Layout), every
// unit of a stage is used once (by a copy, or, past a head that is not whole 16-dim k-steps, as K's zeroed
// padding or V's never-stored dims), and the ldmatrix phases have the bank conflicts the header states (none
// for K; for V 1, 2, 4-way at block 8, 16, 32 with plain bulk copies, none with tensor copies, whose V
// lands swizzled as the hardware's 128-byte swizzle places it). Also the caches' tensor-map shapes, and
// that every 16-bit stage (cp.async, bulk, token rows) is linear over a warp's k-steps, as the tile's
// hoisted ldmatrix units assume.
#include <pagedattn/agent/kv_slab.cuh>
#include <pagedattn/agent/kv_slab_bulk.cuh>
#include <pagedattn/agent/kv_slab_rows.cuh>
#include <pagedattn/device/dispatch/decode_tensor_maps.cuh>
#include <pagedattn/device/dispatch/tuning/tuning_paged_attention.cuh>

#include "support/test_support.cuh"

#include <cuda_fp16.h>

#include <set>
#include <vector>

namespace {

/// The most rows of one ldmatrix phase (8 rows of 16 bytes) that share a 16-byte bank group.
int conflict_ways(const std::vector<int>& units)
{
  int groups[8] = {};
  int worst = 0;
  for (int u : units) { worst = std::max(worst, ++groups[u % 8]); }
  return worst;
}

/// Where a tensor copy with this swizzle (0 or 128 bytes) puts the byte it would put at shared offset
/// `offset` unswizzled, the offset counted from a 1024-byte boundary: 16-byte chunk bits 4..6 ^= address
/// bits 7..9 (PTX ISA, tensor copies' swizzle modes).
int hardware_swizzle(int offset, int swizzle_bytes)
{
  return swizzle_bytes == 128 ? offset ^ (((offset >> 7) & 7) << 4) : offset;
}

template <int HeadDim, bool TensorCopies>
void check_layout()
{
  using Slab = pagedattn::KvSlabBulk<__half, HeadDim, 128, TensorCopies>;
  for (int lb = 3; lb <= 5; ++lb)
  {
    CAPTURE(HeadDim, lb, TensorCopies);
    const int swizzle = TensorCopies ? pagedattn::detail::value_tensor_map_shape(HeadDim, 1 << lb, 2, 1, 1).swizzle_bytes : 0;
    const int bs = 1 << lb, blocks = Slab::tile_tokens / bs;
    const typename Slab::Layout layout(lb);
    std::set<int> k_seen, v_seen;
    for (int b = 0; b < blocks; ++b)
    {
      // K run in the cache: [HeadDim / 8 vectors][bs tokens] units; V run: [HeadDim dims][bs / 8] units.
      for (int c = 0; c < Slab::cache_vectors; ++c)
      {
        for (int t = 0; t < bs; ++t)
        {
          const int copied_to = Slab::run_first_unit(b, false, lb) + c * bs + t;
          REQUIRE(layout.k_unit(c, b * bs + t) == copied_to);
          REQUIRE(k_seen.insert(copied_to).second);
        }
      }
      for (int d = 0; d < HeadDim; ++d)
      {
        for (int u = 0; u < bs / 8; ++u)
        {
          // the v array starts 1024-byte aligned (KvSlabBulk's static_assert), so its offsets are the address bits
          const int copied_to = hardware_swizzle((Slab::run_first_unit(b, true, lb) + d * (bs / 8) + u) * 16, swizzle) / 16;
          REQUIRE(layout.v_unit(d, (b * bs) / 8 + u) == copied_to);
          REQUIRE(v_seen.insert(copied_to).second);
        }
      }
    }
    // Past the head (head 120: K's vector 15, V's dims 120 .. 127): places no copy writes.
    for (int t = 0; t < Slab::tile_tokens; ++t)
    {
      for (int c = Slab::cache_vectors; c < Slab::key_vectors; ++c) { REQUIRE(k_seen.insert(layout.k_unit(c, t)).second); }
    }
    for (int d = HeadDim; d < Slab::tile_dim; ++d)
    {
      for (int u = 0; u < Slab::v_units_per_dim; ++u) { REQUIRE(v_seen.insert(layout.v_unit(d, u)).second); }
    }
    CHECK(static_cast<int>(k_seen.size()) == Slab::k_units);
    CHECK(*k_seen.rbegin() == Slab::k_units - 1);
    CHECK(static_cast<int>(v_seen.size()) == Slab::v_units);
    CHECK(*v_seen.rbegin() == Slab::v_units - 1);

    // ldmatrix phases as BlockTileTensorCore issues them: K, 8 consecutive tokens (a multiple of 8 on) of
    // one vector; V, 8 consecutive dims (a multiple of 8 on) of one 8-token unit.
    for (int c = 0; c < Slab::key_vectors; ++c)
    {
      for (int t0 = 0; t0 < Slab::tile_tokens; t0 += 8)
      {
        std::vector<int> rows;
        for (int r = 0; r < 8; ++r) { rows.push_back(layout.k_unit(c, t0 + r)); }
        CHECK(conflict_ways(rows) == 1);
      }
    }
    for (int d0 = 0; d0 < Slab::tile_dim; d0 += 8)
    {
      for (int u = 0; u < Slab::v_units_per_dim; ++u)
      {
        std::vector<int> rows;
        for (int r = 0; r < 8; ++r) { rows.push_back(layout.v_unit(d0 + r, u)); }
        CHECK(conflict_ways(rows) == (TensorCopies ? 1 : bs / 8));
      }
    }
  }
}

} // namespace

TEST_CASE("bulk stage: copies land where the tile reads, every unit once, stated bank conflicts", "[kv_slab][host]")
{
  check_layout<64, false>();
  check_layout<80, false>();
  check_layout<96, false>();
  check_layout<112, false>();
  check_layout<120, false>();
  check_layout<128, false>();
  check_layout<192, false>();
  check_layout<256, false>();
  check_layout<64, true>();
  check_layout<80, true>();
  check_layout<96, true>();
  check_layout<112, true>();
  check_layout<120, true>();
  check_layout<128, true>();
  check_layout<192, true>();
  check_layout<256, true>();
}

TEST_CASE("bulk stage: the caches' tensor maps have one cache block's run of one KV head per box", "[kv_slab][host]")
{
  for (int bytes : {2, 1}) // 16-bit and fp8 caches
  {
    for (int head : {64, 80, 96, 112, 120, 128, 192, 256})
    {
      if (head * bytes % 16 != 0) { continue; } // (120 x fp8: refused by the dispatch)
      for (int bs : {8, 16, 32})
      {
        CAPTURE(bytes, head, bs);
        const std::int64_t blocks = 1000;
        const int kv_heads = 4;
        const auto k = pagedattn::detail::key_tensor_map_shape(head, bs, bytes, blocks, kv_heads);
        const auto v = pagedattn::detail::value_tensor_map_shape(head, bs, bytes, blocks, kv_heads);
        for (const auto* m : {&k, &v})
        {
          CHECK(std::uint64_t(m->box[0]) * m->box[1] == std::uint64_t(head) * bs); // a run: head x bs elements
          CHECK(m->box[2] == 1u);
          CHECK(m->box[0] * bytes == pagedattn::tensor_copy_row_bytes); // rows of 128 bytes
          CHECK(m->dims[0] == m->box[0]); // a box covers whole rows and planes: a run is contiguous
          CHECK(m->dims[1] == m->box[1]);
          CHECK(m->dims[2] == std::uint64_t(blocks) * kv_heads);
          CHECK(m->strides[0] == m->dims[0] * bytes);
          CHECK(m->strides[1] == std::uint64_t(head) * bs * bytes); // run r starts at r * head * bs elements
          CHECK(m->strides[0] % 16 == 0); // the hardware's limits
          CHECK(m->box[0] <= 256u);
          CHECK(m->box[1] <= 256u);
        }
        CHECK(k.swizzle_bytes == 0);
        CHECK(v.swizzle_bytes == (bytes == 2 ? 128 : 0)); // an fp8 V is converted, not read by ldmatrix
        if (bytes == 2) { CHECK(int(v.box[0]) * 2 == v.swizzle_bytes); } // a swizzled box row spans the swizzle
      }
    }
  }
}

TEST_CASE("bulk stage: the dispatch refuses a cache whose runs a tensor copy cannot address", "[kv_slab][host]")
{
#if PAGEDATTN_HAS_TENSOR_MAPS
  pagedattn::PagedAttentionParams<__half> p{};
  p.block_size = 16;
  p.num_kv_heads = 4;
  p.num_blocks = std::int64_t{1} << 29; // 2^31 runs: one past the coordinate's range; checked before any driver call
  using Sm90 = pagedattn::PagedAttentionPolicySm90;
  CHECK(pagedattn::detail::bind_cache_tensor_maps<Sm90, 256>(p, 90) == cudaErrorInvalidValue);
  CHECK(pagedattn::last_error_message().find("num_blocks * num_kv_heads") != std::string::npos);
  // Code older than sm_90 copies by cp.async: no maps, nothing refused.
  CHECK(pagedattn::detail::bind_cache_tensor_maps<Sm90, 256>(p, 80) == cudaSuccess);
#else
  SUCCEED("no tensor maps in this toolkit");
#endif
}

TEST_CASE("bulk stage, fp8: the fold's K units and V rows and words address the cache's bytes", "[kv_slab][fp8][host]")
{
  auto check = [](auto head_dim) {
    constexpr int H = decltype(head_dim)::value;
    using Slab = pagedattn::KvSlabBulk<pagedattn::fp8_e4m3, H, 128, true>;
    static_assert(Slab::key_vectors == H / 16 && Slab::k_units == H * 2, "16 fp8 elements per unit");
    for (int lb = 3; lb <= 5; ++lb)
    {
      CAPTURE(H, lb);
      const int bs = 1 << lb, blocks = Slab::tile_tokens / bs;
      const typename Slab::Layout layout(lb);
      for (int b = 0; b < blocks; ++b)
      {
        CHECK(Slab::run_first_unit(b, false, lb) * 16 == b * H * bs); // runs of H x bs bytes, back to back
        for (int d = 0; d < H; ++d)
        {
          for (int t = 0; t < bs; ++t)
          {
            const int token = b * bs + t;
            // K: the cache's [head/16][bs][16] bytes per run.
            CHECK(layout.k_unit(d / 16, token) * 16 + d % 16 == b * H * bs + ((d / 16) * bs + t) * 16 + d % 16);
            // V: [head][bs] bytes per run.
            const int v_byte = (b * H + d) * bs + t;
            CHECK(layout.v_fp8_byte(d, token) == v_byte);
            if (bs >= 16) { CHECK(layout.v_fp8_unit(d, token / 16) * 16 + token % 16 == v_byte); }
          }
        }
      }
    }
  };
  check(std::integral_constant<int, 64>{});
  check(std::integral_constant<int, 80>{});
  check(std::integral_constant<int, 128>{});
  check(std::integral_constant<int, 256>{});
}

namespace {

/// BlockTileTensorCore (4 warps, linear_units) reads the K unit of its k-step i as k_first[h] + i * k_advance
/// and the V unit as v_first[h] + i * v_advance, each computed at the warp's first step: check that against the
/// layout's own units for every lane, warp, 16-token half h and step. k_unit(vector, token); v_unit(h, m, upper,
/// half, row8): the V unit of PV half h and m-tile m as the tile reads it.
template <int HeadDim, class KUnit, class VUnit>
void check_linear_over_steps(KUnit k_unit, VUnit v_unit)
{
  constexpr int warps = 4, k_steps = pagedattn::tensor_core_head_dim(HeadDim) / 16;
  for (int warp = 0; warp < warps; ++warp)
  {
    for (int lane = 0; lane < 32; ++lane)
    {
      const int row8 = lane & 7, half = (lane >> 3) & 1, upper = lane >> 4;
      for (int h = 0; h < 2; ++h)
      {
        const int k_first = k_unit(2 * warp + upper, 16 * h + 8 * half + row8);
        const int k_advance = k_unit(2 * (warp + warps) + upper, 8 * half + row8) - k_unit(2 * warp + upper, 8 * half + row8);
        const int v_first = v_unit(h, warp, upper, half, row8);
        const int v_advance = v_unit(0, warp + warps, upper, half, row8) - v_unit(0, warp, upper, half, row8);
        for (int i = 0; warp + i * warps < k_steps; ++i)
        {
          const int step = warp + i * warps;
          CAPTURE(HeadDim, warp, lane, h, i);
          REQUIRE(k_unit(2 * step + upper, 16 * h + 8 * half + row8) == k_first + i * k_advance);
          REQUIRE(v_unit(h, step, upper, half, row8) == v_first + i * v_advance);
        }
      }
    }
  }
}

template <int HeadDim>
void check_stages_linear()
{
  // cp.async (sm_80): V dim-major and swizzled per dim, the same for every block size.
  using Plain = pagedattn::KvSlab<__half, HeadDim, 128>;
  check_linear_over_steps<HeadDim>([](int v, int t) { return Plain::k_unit(v, t); },
                                   [](int h, int m, int upper, int half, int row8) { return Plain::v_unit(16 * m + 8 * half + row8, 2 * h + upper); });
  for (int lb = 3; lb <= 5; ++lb)
  {
    CAPTURE(lb);
    auto bulk = [&](auto tensor_copies) {
      using Slab = pagedattn::KvSlabBulk<__half, HeadDim, 128, decltype(tensor_copies)::value>;
      const typename Slab::Layout layout(lb);
      check_linear_over_steps<HeadDim>([&](int v, int t) { return layout.k_unit(v, t); },
                                       [&](int h, int m, int upper, int half, int row8) { return layout.v_unit(16 * m + 8 * half + row8, 2 * h + upper); });
    };
    bulk(std::false_type{});
    bulk(std::true_type{});
    // Token rows (HND, NHD): V read transposed, by token rows of dims 16m ...
    using Rows = pagedattn::KvSlabRows<__half, HeadDim, 128>;
    const typename Rows::Layout rows(lb);
    check_linear_over_steps<HeadDim>([&](int v, int t) { return rows.k_unit(v, t); },
                                     [&](int h, int m, int upper, int half, int row8) { return rows.value_row_unit(16 * h + 8 * upper + row8, 2 * m + half); });
  }
}

} // namespace

TEST_CASE("16-bit stages: a warp's ldmatrix units are linear over its k-steps (the tile's hoisted units)", "[kv_slab][host]")
{
  check_stages_linear<64>();
  check_stages_linear<80>();
  check_stages_linear<96>();
  check_stages_linear<112>();
  check_stages_linear<120>();
  check_stages_linear<128>();
  check_stages_linear<192>();
  check_stages_linear<256>();
}
