// The shared-memory layout of the sm_90 bulk-copy stage (KvTileStageBulk), on the host: where each bulk
// copy puts a cache block's K and V run agrees with the units the tensor-core tile reads (Layout), every
// unit of a stage is used once, and the ldmatrix phases have the bank conflicts the header states (none
// for K; 1, 2, 4-way for V at block 8, 16, 32).
#include <pagedattn/agent/kv_tile_stage_bulk.cuh>

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

template <int HeadDim>
void check_layout()
{
  using Stage = pagedattn::KvTileStageBulk<__half, HeadDim, 128>;
  for (int lb = 3; lb <= 5; ++lb)
  {
    CAPTURE(HeadDim, lb);
    const int bs = 1 << lb, blocks = Stage::tile_tokens / bs;
    const typename Stage::Layout layout(lb);
    std::set<int> k_seen, v_seen;
    for (int b = 0; b < blocks; ++b)
    {
      // K run in the cache: [HeadDim / 8 vectors][bs tokens] units; V run: [HeadDim dims][bs / 8] units.
      for (int c = 0; c < Stage::key_vectors; ++c)
      {
        for (int t = 0; t < bs; ++t)
        {
          const int copied_to = Stage::run_first_unit(b, false, lb) + c * bs + t;
          REQUIRE(layout.k_unit(c, b * bs + t) == copied_to);
          k_seen.insert(copied_to);
        }
      }
      for (int d = 0; d < HeadDim; ++d)
      {
        for (int u = 0; u < bs / 8; ++u)
        {
          const int copied_to = Stage::run_first_unit(b, true, lb) + d * (bs / 8) + u;
          REQUIRE(layout.v_unit(d, (b * bs) / 8 + u) == copied_to);
          v_seen.insert(copied_to);
        }
      }
    }
    CHECK(static_cast<int>(k_seen.size()) == Stage::k_units);
    CHECK(*k_seen.rbegin() == Stage::k_units - 1);
    CHECK(static_cast<int>(v_seen.size()) == Stage::v_units);
    CHECK(*v_seen.rbegin() == Stage::v_units - 1);

    // ldmatrix phases as BlockTileTensorCore issues them: K, 8 consecutive tokens (a multiple of 8 on) of
    // one vector; V, 8 consecutive dims (a multiple of 8 on) of one 8-token unit.
    for (int c = 0; c < Stage::key_vectors; ++c)
    {
      for (int t0 = 0; t0 < Stage::tile_tokens; t0 += 8)
      {
        std::vector<int> rows;
        for (int r = 0; r < 8; ++r) { rows.push_back(layout.k_unit(c, t0 + r)); }
        CHECK(conflict_ways(rows) == 1);
      }
    }
    for (int d0 = 0; d0 < HeadDim; d0 += 8)
    {
      for (int u = 0; u < Stage::v_units_per_dim; ++u)
      {
        std::vector<int> rows;
        for (int r = 0; r < 8; ++r) { rows.push_back(layout.v_unit(d0 + r, u)); }
        CHECK(conflict_ways(rows) == bs / 8);
      }
    }
  }
}

} // namespace

TEST_CASE("bulk stage: copies land where the tile reads, every unit once, stated bank conflicts", "[kv_tile_stage][host]")
{
  check_layout<64>();
  check_layout<80>();
  check_layout<96>();
  check_layout<112>();
  check_layout<128>();
  check_layout<192>();
  check_layout<256>();
}
