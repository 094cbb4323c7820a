// GPU tests of WarpTileCudaCore alone: the warps of one block fold a run of tokens of one KV head straight
// from a paged cache (vLLM's layout and token rows; fp32, 16-bit and fp8 elements; a permuted block
// table), for up to 8 query rows, each with its own window, through a soft-capping scorer; the warps'
// partials are merged by BlockReducePartials and checked against an fp64 reference.
#include <pagedattn/agent/kv_cache_layout.cuh>
#include <pagedattn/block/block_reduce_partials.cuh>
#include <pagedattn/warp/warp_tile_cuda_core.cuh>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "support/test_support.cuh"
#include "support/tile_reference.cuh"

#include <algorithm>
#include <numeric>

namespace {

using pagedattn::warp_threads;
constexpr int warps = 2;
constexpr int block_threads = warps * warp_threads;
constexpr int kv_heads = 2, kv_head = 1; // the tile reads the second KV head's runs

using test::WindowCapScorer;
using test::WindowRow;

/// queries: [rows][HeadDim]; block_table: the sequence's cache blocks; stats: [MaxRows][2]; values: [MaxRows][HeadDim].
template <class Tile, class T, class KvT, int HeadDim, int MaxRows>
__global__ void fold_warp_tiles_kernel(pagedattn::PagedCacheView<KvT> cache, const int* block_table, int end_token, const T* queries,
                                       const WindowRow* row_windows, int rows, WindowCapScorer scorer, float score_scale, float value_scale,
                                       float* stats, float* values)
{
  using Reduce = pagedattn::BlockReducePartials<HeadDim, block_threads>;
  __shared__ typename Tile::SharedStorage shared;
  __shared__ union {
    typename Tile::LoopStorage loop;
    typename Reduce::TempStorage reduce;
  } phase;
  Tile::LoadQueries(shared, rows, [&](int g) { return queries + g * HeadDim; }, score_scale, [&](int g) { return row_windows[g]; }, block_threads);
  __syncthreads();
  Tile tile(shared, phase.loop, cache, scorer, value_scale, rows);
  const int lane = pagedattn::arch::lane_id(), warp = pagedattn::arch::warp_id();
  for (int token0 = warp * Tile::tile_tokens; token0 < end_token; token0 += warps * Tile::tile_tokens)
  {
    const int pos = token0 + lane;
    tile.Consume(pagedattn::WarpTileContext{kv_head, token0, end_token, pos < end_token ? block_table[pos / cache.block_size] : 0});
  }
  __syncthreads();
  Reduce reduce(phase.reduce);
  for (int g = 0; g < rows; ++g)
  {
    const typename Reduce::Stats s = tile.ReduceHead(reduce, g);
    for (int d = threadIdx.x; d < HeadDim; d += block_threads) { values[g * HeadDim + d] = reduce.weighted_v(d); }
    if (threadIdx.x == 0)
    {
      stats[2 * g] = s.max_score;
      stats[2 * g + 1] = s.exp_sum;
    }
    __syncthreads();
  }
}

template <class T, class KvT, int HeadDim, class KvLayout, int MaxRows>
void check(std::mt19937_64& rng, int rows, int end_token, int block_size, float cap)
{
  using Tile = pagedattn::WarpTileCudaCore<T, HeadDim, MaxRows, warps, 4, KvT, KvLayout, WindowCapScorer>;
  constexpr bool token_rows = KvLayout::value_rows;
  INFO("head " << HeadDim << ", " << pagedattn::ElementTraits<T>::name << " over " << pagedattn::ElementTraits<KvT>::name << ", "
               << (token_rows ? "token rows" : "vLLM's layout") << ", rows " << rows << " of " << MaxRows << ", tokens " << end_token
               << ", block size " << block_size << ", cap " << cap);
  constexpr bool fp8 = pagedattn::is_fp8<KvT>;
  constexpr int x = pagedattn::elements_per_vector<KvT>;
  const float scale = 1.f / std::sqrt(static_cast<float>(HeadDim)), k_scale = fp8 ? 0.75f : 1.f, v_scale = fp8 ? 1.5f : 1.f;

  // The sequence's blocks, permuted among twice as many cache blocks.
  const int blocks = (end_token + block_size - 1) / block_size, num_blocks = 2 * blocks;
  std::vector<int> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  const std::vector<int> table(ids.begin(), ids.begin() + blocks);

  const auto qf = test::random_floats(rng, static_cast<std::size_t>(rows) * HeadDim, -2.f, 2.f);
  const auto kf = test::random_floats(rng, static_cast<std::size_t>(end_token) * HeadDim, -2.f, 2.f);
  const auto vf = test::random_floats(rng, static_cast<std::size_t>(end_token) * HeadDim, -1.f, 1.f);
  std::vector<T> q(qf.size());
  for (std::size_t i = 0; i < q.size(); ++i) { q[i] = pagedattn::ElementTraits<T>::from_float(qf[i]); }
  std::vector<KvT> k(kf.size()), v(vf.size());
  for (std::size_t i = 0; i < k.size(); ++i)
  {
    k[i] = pagedattn::ElementTraits<KvT>::from_float(kf[i]);
    v[i] = pagedattn::ElementTraits<KvT>::from_float(vf[i]);
  }
  // The caches, every element of the other KV head and of the other blocks random too.
  const std::int64_t run = static_cast<std::int64_t>(HeadDim) * block_size; // one block's elements of one KV head
  const auto noise = test::random_floats(rng, static_cast<std::size_t>(num_blocks) * kv_heads * run, -3.f, 3.f);
  std::vector<KvT> key_cache(noise.size()), value_cache(noise.size());
  for (std::size_t i = 0; i < noise.size(); ++i) { key_cache[i] = value_cache[i] = pagedattn::ElementTraits<KvT>::from_float(noise[i]); }
  // Token rows: HND ([block][head][token][dim]); vLLM's: K [block][head][dim / x][token][x], V [block][head][dim][token].
  pagedattn::PagedCacheView<KvT> view{nullptr, nullptr, kv_heads * run, run, token_rows ? HeadDim : 0, block_size};
  for (int t = 0; t < end_token; ++t)
  {
    const std::int64_t base = table[t / block_size] * view.cache_block_stride + kv_head * view.cache_head_stride;
    const int slot = t % block_size;
    for (int d = 0; d < HeadDim; ++d)
    {
      const std::size_t e = static_cast<std::size_t>(t) * HeadDim + d;
      if (token_rows)
      {
        key_cache[base + slot * HeadDim + d] = k[e];
        value_cache[base + slot * HeadDim + d] = v[e];
      }
      else
      {
        key_cache[base + (d / x) * block_size * x + slot * x + d % x] = k[e];
        value_cache[base + static_cast<std::int64_t>(d) * block_size + slot] = v[e];
      }
    }
  }
  const std::vector<WindowRow> windows = test::random_windows(rng, rows, end_token);

  test::DeviceBuffer<KvT> d_k(key_cache), d_v(value_cache);
  test::DeviceBuffer<int> d_table(table);
  test::DeviceBuffer<T> d_q(q);
  test::DeviceBuffer<WindowRow> d_windows(windows);
  test::DeviceBuffer<float> d_stats(2 * MaxRows), d_values(static_cast<std::size_t>(MaxRows) * HeadDim); // poisoned
  view.key_cache = d_k.get();
  view.value_cache = d_v.get();
  fold_warp_tiles_kernel<Tile, T, KvT, HeadDim, MaxRows><<<1, block_threads>>>(view, d_table.get(), end_token, d_q.get(), d_windows.get(), rows,
                                                                               WindowCapScorer{cap}, scale * k_scale, v_scale, d_stats.get(),
                                                                               d_values.get());
  CUDA_CHECK_LAUNCH();
  const auto stats = d_stats.download();
  const auto values = d_values.download();

  // fp32 arithmetic on the decoded elements
  test::check_partial(test::decoded(q), test::decoded(k), test::decoded(v), HeadDim, end_token, windows, static_cast<double>(scale) * k_scale, cap,
                      v_scale, stats, values, rows, MaxRows, {1e-4, 1e-4, 1e-5});
}

using pagedattn::TokenRowsKvLayout;
using pagedattn::VllmKvLayout;

} // namespace

TEST_CASE("WarpTileCudaCore: vLLM's layout against fp64", "[warp][gpu]")
{
  GPU_TEST_RNG(rng, 0);
  check<float, float, 64, VllmKvLayout, 4>(rng, 3, 150, 16, 0.f);
  check<__half, __half, 128, VllmKvLayout, 8>(rng, 8, 97, 8, 30.f);
  check<__nv_bfloat16, __nv_bfloat16, 80, VllmKvLayout, 4>(rng, 4, 70, 32, 0.f);
  check<__half, pagedattn::fp8_e4m3, 128, VllmKvLayout, 4>(rng, 4, 130, 16, 0.f);
}

TEST_CASE("WarpTileCudaCore: token rows against fp64", "[warp][gpu]")
{
  GPU_TEST_RNG(rng, 1);
  check<float, float, 128, TokenRowsKvLayout, 4>(rng, 2, 101, 16, 0.f);
  check<__half, __half, 80, TokenRowsKvLayout, 8>(rng, 5, 64, 8, 20.f); // lanes past the head's last dim
  check<__half, pagedattn::fp8_e5m2, 256, TokenRowsKvLayout, 4>(rng, 4, 77, 16, 0.f);
}
