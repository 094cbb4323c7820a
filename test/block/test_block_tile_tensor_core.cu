// GPU tests of BlockTileTensorCore alone: one thread block folds a run of tiles, laid out in shared memory by
// the slab types' own layout functions (vLLM's layout, token rows, 16-bit and fp8 elements), for up to 32
// query rows, each with its own window, and a soft-capping scorer; its partial (max, exp sum, unnormalised
// values) is checked against an fp64 reference, and the rows past the tile's stay unwritten.
#include <pagedattn/agent/kv_slab.cuh>
#include <pagedattn/agent/kv_slab_rows.cuh>
#include <pagedattn/block/block_tile_tensor_core.cuh>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "support/test_support.cuh"
#include "support/tile_reference.cuh"

#include <cstring>

namespace {

using pagedattn::warp_threads;
constexpr int warps = 4;
constexpr int block_threads = warps * warp_threads;

using test::WindowCapScorer;
using test::WindowRow;

template <class Tile, class Slab>
struct alignas(128) FoldStorage {
  typename Slab::Storage slab[Tile::slabs];
  typename Tile::TempStorage tile;
};

/// tiles: [num_tiles][slabs] slab images; queries: [rows][HeadDim]; stats: [max_rows][2]; values: [max_rows][HeadDim].
template <class Tile, class Slab, class T, int HeadDim>
__global__ void fold_tiles_kernel(const typename Slab::Storage* tiles, int num_tiles, int end_token, const T* queries, const WindowRow* row_windows,
                                  int rows, WindowCapScorer scorer, float score_scale, float value_scale, int log2_block_size, float* stats,
                                  float* values)
{
  extern __shared__ __align__(128) unsigned char smem[];
  auto& temp = *reinterpret_cast<FoldStorage<Tile, Slab>*>(smem);
  Tile::StoreRows(temp.tile, rows, [&](int r) { return row_windows[r]; });
  Tile tile(temp.tile, scorer, [&](int r) { return queries + r * HeadDim; }, rows, score_scale, value_scale, log2_block_size);
  constexpr int units = static_cast<int>(sizeof(typename Slab::Storage) / sizeof(uint4)) * Tile::slabs;
  for (int i = 0; i < num_tiles; ++i)
  {
    __syncthreads(); // every warp is done with the previous tile
    const uint4* src = reinterpret_cast<const uint4*>(tiles + static_cast<std::size_t>(i) * Tile::slabs);
    uint4* dst = reinterpret_cast<uint4*>(temp.slab);
    for (int u = threadIdx.x; u < units; u += block_threads) { dst[u] = src[u]; }
    __syncthreads();
    const int token0 = i * Tile::tile_tokens;
    if (token0 + Tile::tile_tokens > end_token) { tile.template Consume<true>(temp.slab, token0, end_token); }
    else { tile.template Consume<false>(temp.slab, token0, end_token); }
  }
  __syncthreads();
  tile.StorePartial(stats, values);
}

/// Element e's bytes at byte `offset` of a slab image.
template <class E>
void put(typename std::vector<unsigned char>::iterator image, std::size_t offset, E e)
{
  std::memcpy(&*image + offset, &e, sizeof(E));
}

/// The slab image of tokens [32 j, 32 j + 32) of K and V (zero past end_token), by the slab's layout:
/// KvSlab (vLLM's layout: K units (vector, token), V units (dim, 8 tokens)) or KvSlabRows (token rows).
template <class Slab, class KvT, int HeadDim>
void lay_out_slab(std::vector<unsigned char>& bytes, std::size_t at, const std::vector<KvT>& k, const std::vector<KvT>& v, int first,
                  int end_token, int log2_block_size)
{
  constexpr int epu = 16 / static_cast<int>(sizeof(KvT)); // elements per 16-byte unit
  const auto image = bytes.begin() + static_cast<std::ptrdiff_t>(at);
  const std::size_t v_base = offsetof(typename Slab::Storage, v);
  for (int t = 0; t < 32; ++t)
  {
    const int token = first + t;
    if (token >= end_token) { continue; } // the image is zero there
    for (int d = 0; d < HeadDim; ++d)
    {
      const KvT kd = k[static_cast<std::size_t>(token) * HeadDim + d], vd = v[static_cast<std::size_t>(token) * HeadDim + d];
      if constexpr (Slab::Layout::value_rows)
      {
        const typename Slab::Layout layout(log2_block_size);
        put(image, 16 * static_cast<std::size_t>(layout.k_unit(d / epu, t)) + sizeof(KvT) * (d % epu), kd);
        put(image, v_base + 16 * static_cast<std::size_t>(layout.value_row_unit(t, d / epu)) + sizeof(KvT) * (d % epu), vd);
      }
      else
      {
        put(image, 16 * static_cast<std::size_t>(Slab::k_unit(d / 8, t)) + sizeof(KvT) * (d % 8), kd);
        put(image, v_base + 16 * static_cast<std::size_t>(Slab::v_unit(d, t / 8)) + sizeof(KvT) * (t % 8), vd);
      }
    }
  }
}

template <class T, class KvT, int HeadDim, class Slab, int Slabs, int Rows>
void check(std::mt19937_64& rng, int rows, int end_token, int log2_block_size, float cap)
{
  using Tile = pagedattn::BlockTileTensorCore<T, HeadDim, warps, Slabs, Slab, KvT, Rows, WindowCapScorer>;
  INFO("head " << HeadDim << ", " << pagedattn::ElementTraits<T>::name << " over " << pagedattn::ElementTraits<KvT>::name << ", slabs " << Slabs
               << ", tile rows " << Rows << ", rows " << rows << ", tokens " << end_token << ", block size " << (1 << log2_block_size)
               << ", cap " << cap);
  constexpr bool fp8 = pagedattn::is_fp8<KvT>;
  const int num_tiles = (end_token + Tile::tile_tokens - 1) / Tile::tile_tokens;
  const float scale = 1.f / std::sqrt(static_cast<float>(HeadDim)), k_scale = fp8 ? 0.75f : 1.f, v_scale = fp8 ? 1.5f : 1.f;

  const auto qf = test::random_floats(rng, static_cast<std::size_t>(rows) * HeadDim, -2.f, 2.f);
  const auto kf = test::random_floats(rng, static_cast<std::size_t>(end_token) * HeadDim, -2.f, 2.f);
  const auto vf = test::random_floats(rng, static_cast<std::size_t>(end_token) * HeadDim, -1.f, 1.f);
  std::vector<T> q(qf.size());
  std::vector<KvT> k(kf.size()), v(vf.size());
  for (std::size_t i = 0; i < q.size(); ++i) { q[i] = pagedattn::ElementTraits<T>::from_float(qf[i]); }
  for (std::size_t i = 0; i < k.size(); ++i)
  {
    k[i] = pagedattn::ElementTraits<KvT>::from_float(kf[i]);
    v[i] = pagedattn::ElementTraits<KvT>::from_float(vf[i]);
  }
  const std::vector<WindowRow> windows = test::random_windows(rng, rows, end_token);

  const std::size_t slab_bytes = sizeof(typename Slab::Storage);
  std::vector<unsigned char> images(slab_bytes * Slabs * num_tiles, 0);
  for (int j = 0; j < Slabs * num_tiles; ++j) { lay_out_slab<Slab, KvT, HeadDim>(images, slab_bytes * j, k, v, 32 * j, end_token, log2_block_size); }
  std::vector<typename Slab::Storage> tiles(static_cast<std::size_t>(Slabs) * num_tiles);
  std::memcpy(tiles.data(), images.data(), images.size());

  test::DeviceBuffer<typename Slab::Storage> d_tiles(tiles);
  test::DeviceBuffer<T> d_q(q);
  test::DeviceBuffer<WindowRow> d_windows(windows);
  test::DeviceBuffer<float> d_stats(2 * Rows), d_values(static_cast<std::size_t>(Rows) * HeadDim); // poisoned
  auto kernel = fold_tiles_kernel<Tile, Slab, T, HeadDim>;
  const int smem = static_cast<int>(sizeof(FoldStorage<Tile, Slab>));
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  kernel<<<1, block_threads, smem>>>(d_tiles.get(), num_tiles, end_token, d_q.get(), d_windows.get(), rows, WindowCapScorer{cap},
                                     scale * k_scale, v_scale, log2_block_size, d_stats.get(), d_values.get());
  CUDA_CHECK_LAUNCH();
  const auto stats = d_stats.download();
  const auto values = d_values.download();

  const double output_tolerance = std::is_same_v<T, __half> ? 2e-3 : 1e-2; // P rounded to T for the PV product
  test::check_partial(test::decoded(q), test::decoded(k), test::decoded(v), HeadDim, end_token, windows, static_cast<double>(scale) * k_scale, cap,
                      v_scale, stats, values, rows, Rows, {1e-3, 1e-3, output_tolerance});
}

template <class T, int HeadDim>
using VllmSlab = pagedattn::KvSlab<T, HeadDim, block_threads>;
template <class KvT, int HeadDim>
using RowsSlab = pagedattn::KvSlabRows<KvT, HeadDim, block_threads>;

} // namespace

TEST_CASE("BlockTileTensorCore: vLLM's layout, 16-bit, against fp64", "[block][gpu]")
{
  GPU_TEST_RNG(rng, 0);
  check<__half, __half, 128, VllmSlab<__half, 128>, 2, 8>(rng, 6, 175, 4, 0.f);        // a partial last tile
  check<__half, __half, 128, VllmSlab<__half, 128>, 2, 8>(rng, 8, 128, 3, 30.f);       // whole tiles, soft-capped
  check<__nv_bfloat16, __nv_bfloat16, 256, VllmSlab<__nv_bfloat16, 256>, 1, 32>(rng, 24, 123, 4, 0.f); // 32 rows, 24 of them
  check<__half, __half, 120, VllmSlab<__half, 120>, 2, 8>(rng, 5, 130, 3, 0.f);        // a head padded to whole k-steps
}

TEST_CASE("BlockTileTensorCore: token rows, 16-bit and fp8, against fp64", "[block][gpu]")
{
  GPU_TEST_RNG(rng, 1);
  check<__half, __half, 64, RowsSlab<__half, 64>, 2, 8>(rng, 7, 200, 4, 0.f);          // rows of 128-byte spans
  check<__nv_bfloat16, __nv_bfloat16, 128, RowsSlab<__nv_bfloat16, 128>, 1, 32>(rng, 17, 96, 5, 20.f);
  check<__half, __half, 80, RowsSlab<__half, 80>, 2, 8>(rng, 8, 90, 4, 0.f);           // padded rows, cp.async's layout
  check<__half, pagedattn::fp8_e4m3, 128, RowsSlab<pagedattn::fp8_e4m3, 128>, 2, 8>(rng, 8, 150, 4, 0.f); // fp8 V read transposed
  check<__half, pagedattn::fp8_e5m2, 128, RowsSlab<pagedattn::fp8_e5m2, 128>, 4, 8>(rng, 7, 300, 4, 0.f); // fp8's 128-token tile, partial in its first half
  check<__half, pagedattn::fp8_e4m3, 128, RowsSlab<pagedattn::fp8_e4m3, 128>, 4, 8>(rng, 8, 256, 3, 20.f); // whole 128-token tiles
  check<__half, pagedattn::fp8_e4m3, 128, RowsSlab<pagedattn::fp8_e4m3, 128>, 4, 8>(rng, 5, 220, 4, 0.f); // a partial tile past its half
}
