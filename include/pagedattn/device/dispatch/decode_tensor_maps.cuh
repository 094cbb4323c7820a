#pragma once
// The caches as tensor maps, for the sm_90 decode's tensor copies (KvCopy::bulk_tensor, KvTileStageBulk):
// one 3-D map per cache whose box is one cache block's run of one KV head, so that a copy's coordinates are
// (0, 0, block_id * num_kv_heads + kv_head). Host code; the maps travel in PagedAttentionParams.
//
// A run (vLLM's K [head / x][bs][x] or V [head][bs] of one block and KV head) is head x bs contiguous
// elements; both maps see it as rows of 128 bytes (r = 64 elements of 16 bits, 128 of fp8): dims
// {r, head · bs / r, blocks · kv_heads}, box {r, head · bs / r, 1}. K is not swizzled; a 16-bit V is, by
// 128 bytes (KvTileStageBulk::Layout::v_unit); an fp8 V is not (its ldmatrix rows, a dim's 16 tokens,
// are 16 bytes apart at bs 16: conflict-free as they lie).
// Caches in token rows (hnd, nhd; KvTileStageRows) get 5-D maps of their strides instead, whose box is
// also one cache block's run of one KV head (token_rows_tensor_map_shape), swizzled by 128 bytes.
// The maps hold the caches' addresses: a CUDA graph replays them as captured (vLLM keeps its cache tensors).
#include <pagedattn/agent/agent_paged_attention.cuh>
#include <pagedattn/agent/agent_paged_attention_params.cuh>
#include <pagedattn/agent/kv_tile_stage_bulk.cuh>
#include <pagedattn/agent/kv_tile_stage_rows.cuh>
#include <pagedattn/agent/partition_fold_tensor_core.cuh>
#include <pagedattn/util_error.cuh>

#include <cstdint>
#include <string>

#if PAGEDATTN_HAS_TENSOR_MAPS
#include <cudaTypedefs.h>
#endif

namespace pagedattn {
namespace detail {

/// One cache's tensor map, before encoding (host-testable).
struct CacheTensorMapShape {
  std::uint64_t dims[5];    ///< elements, innermost first (rank of them)
  std::uint64_t strides[4]; ///< bytes between consecutive indices of dims 1 .. rank - 1
  std::uint32_t box[5];     ///< elements copied per dimension (one cache block's run)
  int swizzle_bytes;        ///< 0 (none) or 128
  int rank = 3;
};

/// A cache block's run of one KV head (head x bs elements of element_bytes, contiguous in both caches) as
/// rows of 128 bytes: a copy's box rows are as wide as the copy engine moves well (rows of 32 bytes, V's
/// own at fp16, made the copies ~4 % slower:
/// bench/NOTES.md, "Tensor copies on sm_90").
inline CacheTensorMapShape run_tensor_map_shape(int head_size, int block_size, int element_bytes, std::int64_t num_blocks,
                                                int num_kv_heads, int swizzle_bytes)
{
  const std::uint64_t runs = static_cast<std::uint64_t>(num_blocks) * static_cast<std::uint64_t>(num_kv_heads);
  const std::uint32_t row = tensor_copy_row_bytes / element_bytes; // elements
  const std::uint32_t rows = static_cast<std::uint32_t>(head_size * block_size) / row;
  const std::uint64_t run_bytes = static_cast<std::uint64_t>(element_bytes) * head_size * block_size;
  return {{row, rows, runs}, {static_cast<std::uint64_t>(tensor_copy_row_bytes), run_bytes}, {row, rows, 1u}, swizzle_bytes, 3};
}

/// A cache in token rows (rows of whole 128-byte slabs: KvTileStageRows) as a 5-D map {r dims, block_size
/// tokens, head_size / r slabs, num_kv_heads, num_blocks} (r = 128 bytes of elements: 64 of 16 bits, 128 of
/// fp8) with the cache's strides, whose box {r, block_size, head_size / r, 1, 1} is one cache block's run of
/// one KV head, landing as the stage's [slab][token][128 bytes] with the 128-byte swizzle. Strides in
/// elements (PagedAttentionParams).
inline CacheTensorMapShape token_rows_tensor_map_shape(int head_size, int block_size, int element_bytes, std::int64_t num_blocks,
                                                       int num_kv_heads, std::int64_t block_stride, std::int64_t head_stride,
                                                       std::int64_t token_stride)
{
  const std::uint64_t slab = static_cast<std::uint64_t>(tensor_copy_row_bytes / element_bytes); // elements
  const std::uint32_t slabs = static_cast<std::uint32_t>(static_cast<std::uint64_t>(head_size) / slab);
  const std::uint64_t bytes = static_cast<std::uint64_t>(element_bytes);
  CacheTensorMapShape shape{};
  const std::uint64_t dims[5] = {slab, static_cast<std::uint64_t>(block_size), slabs, static_cast<std::uint64_t>(num_kv_heads),
                                 static_cast<std::uint64_t>(num_blocks)};
  const std::uint64_t strides[4] = {bytes * static_cast<std::uint64_t>(token_stride), static_cast<std::uint64_t>(tensor_copy_row_bytes),
                                    bytes * static_cast<std::uint64_t>(head_stride), bytes * static_cast<std::uint64_t>(block_stride)};
  const std::uint32_t box[5] = {static_cast<std::uint32_t>(slab), static_cast<std::uint32_t>(block_size), slabs, 1u, 1u};
  for (int i = 0; i < 5; ++i) { shape.dims[i] = dims[i]; shape.box[i] = box[i]; }
  for (int i = 0; i < 4; ++i) { shape.strides[i] = strides[i]; }
  shape.swizzle_bytes = tensor_copy_row_bytes;
  shape.rank = 5;
  return shape;
}

/// K: as it lies (its shared layout is conflict-free).
inline CacheTensorMapShape key_tensor_map_shape(int head_size, int block_size, int element_bytes, std::int64_t num_blocks, int num_kv_heads)
{
  return run_tensor_map_shape(head_size, block_size, element_bytes, num_blocks, num_kv_heads, 0);
}

/// V: 16-bit caches swizzled by 128 bytes (KvTileStageBulk::Layout::v_unit), so that the fold's ldmatrix
/// phases are conflict-free; fp8 caches as they lie (BlockTileTensorCore reads them as they lie).
inline CacheTensorMapShape value_tensor_map_shape(int head_size, int block_size, int element_bytes, std::int64_t num_blocks, int num_kv_heads)
{
  return run_tensor_map_shape(head_size, block_size, element_bytes, num_blocks, num_kv_heads, element_bytes == 2 ? 128 : 0);
}

#if PAGEDATTN_HAS_TENSOR_MAPS
/// The driver's cuTensorMapEncodeTiled, looked up once through the runtime (no link to libcuda); null
/// where the driver has none.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder()
{
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
    {
      fn = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

inline cudaError_t encode_cache_tensor_map(CUtensorMap& map, const void* cache, int element_bytes, const CacheTensorMapShape& shape,
                                           const char* name)
{
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (!encode) { return fail(cudaErrorNotSupported, "pagedattn::Decode: the driver has no cuTensorMapEncodeTiled (the sm_90 tensor copies need it)"); }
  const cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  const CUtensorMapSwizzle swizzle = shape.swizzle_bytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE;
  const CUtensorMapDataType type = element_bytes == 1 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_UINT16;
  const CUresult result = encode(&map, type, static_cast<cuuint32_t>(shape.rank), const_cast<void*>(cache), shape.dims, shape.strides, shape.box,
                                 element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS)
  {
    return fail(cudaErrorInvalidValue, std::string("pagedattn::Decode: ") + name + " cannot be described as a tensor map (cuTensorMapEncodeTiled error " +
                                           std::to_string(static_cast<int>(result)) + ")");
  }
  return cudaSuccess;
}
#endif

/// Fill p.key_map and p.value_map when the launch's code moves K and V by tensor copies (tensor_core_kv_copy,
/// which the kernel asks too). launch_decode calls it, so every launch of the decode kernel has them.
template <class Policy, int HeadDim, bool TokenRows = false, class T, class KvT>
cudaError_t bind_cache_tensor_maps(PagedAttentionParams<T, KvT>& p, int ptx_version)
{
#if PAGEDATTN_HAS_TENSOR_MAPS
  constexpr int bytes = static_cast<int>(sizeof(KvT));
  if constexpr (uses_tensor_cores<T, Policy, KvT> && tensor_core_kv_copy(Policy::kv_copy, true, TokenRows, HeadDim, bytes) == KvCopy::bulk_tensor)
  {
    if (tensor_core_kv_copy(Policy::kv_copy, ptx_version >= 90, TokenRows, HeadDim, bytes) != KvCopy::bulk_tensor) { return cudaSuccess; }
    if constexpr (TokenRows)
    {
      const CacheTensorMapShape shape = token_rows_tensor_map_shape(HeadDim, p.block_size, bytes, p.num_blocks, p.num_kv_heads,
                                                                    p.cache_block_stride, p.cache_head_stride, p.cache_token_stride);
      if (p.num_blocks > 0x7fffffffLL)
      {
        return fail(cudaErrorInvalidValue, "pagedattn::Decode: num_blocks (" + std::to_string(p.num_blocks) +
                                               ") exceeds 2^31 - 1, the sm_90 tensor copies' coordinate range");
      }
      PAGEDATTN_RETURN_IF_ERROR(encode_cache_tensor_map(p.key_map, p.key_cache, bytes, shape, "key_cache (token rows)"));
      PAGEDATTN_RETURN_IF_ERROR(encode_cache_tensor_map(p.value_map, p.value_cache, bytes, shape, "value_cache (token rows)"));
    }
    else
    {
      const std::int64_t runs = p.num_blocks * p.num_kv_heads;
      if (runs > 0x7fffffffLL) // a copy's run coordinate is a 32-bit signed integer
      {
        return fail(cudaErrorInvalidValue, "pagedattn::Decode: num_blocks * num_kv_heads (" + std::to_string(runs) +
                                               ") exceeds 2^31 - 1, the sm_90 tensor copies' coordinate range");
      }
      PAGEDATTN_RETURN_IF_ERROR(encode_cache_tensor_map(p.key_map, p.key_cache, bytes,
                                                        key_tensor_map_shape(HeadDim, p.block_size, bytes, p.num_blocks, p.num_kv_heads), "key_cache"));
      PAGEDATTN_RETURN_IF_ERROR(encode_cache_tensor_map(p.value_map, p.value_cache, bytes,
                                                        value_tensor_map_shape(HeadDim, p.block_size, bytes, p.num_blocks, p.num_kv_heads),
                                                        "value_cache"));
    }
  }
#else
  (void)p;
  (void)ptx_version;
#endif
  return cudaSuccess;
}

} // namespace detail
} // namespace pagedattn
