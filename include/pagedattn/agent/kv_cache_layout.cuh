#pragma once
// How a paged KV cache lies in memory, one type per layout: everything the decode reads of it. A layout type
// says
//   - where the CUDA-core fold finds a key's 16-byte vectors and whether V lies in token rows (value_rows);
//   - which copies move a tensor-core tile (kv_copy: the one choice, read by the kernel and by the host that
//     makes the tensor maps) and the slab each copy fills (Slab: one type per copy mechanism, every one with
//     the same Load, Layout and Storage);
//   - the tensor maps' shapes of its caches for the sm_90 tensor copies (host code).
// The layouts:
//   VllmKvLayout       vLLM's: K [blocks][kv_heads][head / x][bs][x], V [blocks][kv_heads][head][bs]
//                      (x = 16 / sizeof(element)); a block's run of one KV head is contiguous.
//   TokenRowsKvLayout  a token's head_size elements contiguous, with the caller's block, head and token
//                      strides (CacheLayout hnd and nhd share it: they differ in strides only).
// The dispatch maps DecodeArguments::cache_layout to one of them (device/dispatch/dispatch_paged_attention.cuh).
#include <pagedattn/agent/agent_paged_attention_params.cuh>
#include <pagedattn/agent/agent_paged_attention_policy.cuh>
#include <pagedattn/agent/kv_slab.cuh>
#include <pagedattn/agent/kv_slab_bulk.cuh>
#include <pagedattn/agent/kv_slab_rows.cuh>
#include <pagedattn/util_fp8.cuh>

#include <cstdint>
#include <type_traits>

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

/// A cache block's run of one KV head in vLLM's layout (K [head / x][bs][x] or V [head][bs]: head x bs
/// contiguous elements of element_bytes) as rows of 128 bytes (r = 64 elements of 16 bits, 128 of fp8):
/// dims {r, head · bs / r, blocks · kv_heads}, box {r, head · bs / r, 1}. A copy's box rows are as wide as
/// the copy engine moves well (rows of 32 bytes, V's own at fp16, made the copies ~4 % slower:
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

/// A cache in token rows (rows of whole 128-byte spans: KvSlabRows) as a 5-D map {r dims, block_size
/// tokens, head_size / r spans, num_kv_heads, num_blocks} (r = 128 bytes of elements: 64 of 16 bits, 128 of
/// fp8) with the cache's strides, whose box {r, block_size, head_size / r, 1, 1} is one cache block's run of
/// one KV head, landing as the slab's [span][token][128 bytes] with the 128-byte swizzle. Strides in
/// elements (PagedAttentionParams).
inline CacheTensorMapShape token_rows_tensor_map_shape(int head_size, int block_size, int element_bytes, std::int64_t num_blocks,
                                                       int num_kv_heads, std::int64_t block_stride, std::int64_t head_stride,
                                                       std::int64_t token_stride)
{
  const std::uint64_t span = static_cast<std::uint64_t>(tensor_copy_row_bytes / element_bytes); // elements
  const std::uint32_t spans = static_cast<std::uint32_t>(static_cast<std::uint64_t>(head_size) / span);
  const std::uint64_t bytes = static_cast<std::uint64_t>(element_bytes);
  CacheTensorMapShape shape{};
  const std::uint64_t dims[5] = {span, static_cast<std::uint64_t>(block_size), spans, static_cast<std::uint64_t>(num_kv_heads),
                                 static_cast<std::uint64_t>(num_blocks)};
  const std::uint64_t strides[4] = {bytes * static_cast<std::uint64_t>(token_stride), static_cast<std::uint64_t>(tensor_copy_row_bytes),
                                    bytes * static_cast<std::uint64_t>(head_stride), bytes * static_cast<std::uint64_t>(block_stride)};
  const std::uint32_t box[5] = {static_cast<std::uint32_t>(span), static_cast<std::uint32_t>(block_size), spans, 1u, 1u};
  for (int i = 0; i < 5; ++i) { shape.dims[i] = dims[i]; shape.box[i] = box[i]; }
  for (int i = 0; i < 4; ++i) { shape.strides[i] = strides[i]; }
  shape.swizzle_bytes = tensor_copy_row_bytes;
  shape.rank = 5;
  return shape;
}

/// vLLM's K: as it lies (its shared layout is conflict-free).
inline CacheTensorMapShape key_tensor_map_shape(int head_size, int block_size, int element_bytes, std::int64_t num_blocks, int num_kv_heads)
{
  return run_tensor_map_shape(head_size, block_size, element_bytes, num_blocks, num_kv_heads, 0);
}

/// vLLM's V: 16-bit caches swizzled by 128 bytes (KvSlabBulk::Layout::v_unit), so that the fold's ldmatrix
/// phases are conflict-free; fp8 caches as they lie (BlockTileTensorCore reads them as they lie).
inline CacheTensorMapShape value_tensor_map_shape(int head_size, int block_size, int element_bytes, std::int64_t num_blocks, int num_kv_heads)
{
  return run_tensor_map_shape(head_size, block_size, element_bytes, num_blocks, num_kv_heads, element_bytes == 2 ? 128 : 0);
}

/// The policy's copies where the code has bulk copies (bulk_copies_compiled: code for sm_90+), tensor copies
/// only where the toolkit also has tensor maps; elsewhere (older code, a fat binary's host pass) cp.async.
constexpr KvCopy compiled_kv_copy(KvCopy policy_copy, bool bulk_copies_compiled)
{
  if (!bulk_copies_compiled) { return KvCopy::cp_async; }
  return policy_copy == KvCopy::bulk_tensor && !PAGEDATTN_HAS_TENSOR_MAPS ? KvCopy::bulk : policy_copy;
}

} // namespace detail

/// vLLM's paged layout (CacheLayout vllm).
struct VllmKvLayout {
  /// V lies dim-major, [head][bs] per block and KV head: the CUDA-core fold reads 8 tokens of a dim per load.
  static constexpr bool value_rows = false;

  /// CUDA-core fold, keys of X elements per 16-byte vector: from a token's first vector to the next token's, and to its own next vector.
  template <int X, class P>
  static PAGEDATTN_HOST_DEVICE std::int64_t key_token_stride(const P&) { return X; }
  template <int X, class P>
  static PAGEDATTN_HOST_DEVICE std::int64_t key_vector_stride(const P& p) { return static_cast<std::int64_t>(p.block_size) * X; }

  /// The copies that move a tensor-core tile (the host asks with bulk_copies_compiled: the device runs code of
  /// PTX version 9.0+; the kernel with its own code's): every copy of the policy's, since a block's run is contiguous.
  static constexpr KvCopy kv_copy(KvCopy policy_copy, bool bulk_copies_compiled, int /*head_dim*/, int /*element_bytes*/)
  {
    return detail::compiled_kv_copy(policy_copy, bulk_copies_compiled);
  }

  /// The slab that Copy fills, of 16-bit elements or fp8 bytes as they lie (an fp8 cache: bulk copies only;
  /// a host pass asks for cp.async, and gets a slab of the same storage whose Load it never calls).
  template <class KvT, int HeadDim, int BlockThreads, KvCopy Copy>
  using Slab = std::conditional_t<Copy == KvCopy::cp_async && !is_fp8<KvT>, KvSlab<KvT, HeadDim, BlockThreads>,
                                  KvSlabBulk<KvT, HeadDim, BlockThreads, Copy == KvCopy::bulk_tensor>>;

  /// The tensor maps of the caches (host): a box is one block's run of one KV head, at coordinate
  /// (0, 0, block_id * num_kv_heads + kv_head).
  template <class P>
  static detail::CacheTensorMapShape key_map_shape(const P& p, int head_size, int element_bytes)
  {
    return detail::key_tensor_map_shape(head_size, p.block_size, element_bytes, p.num_blocks, p.num_kv_heads);
  }
  template <class P>
  static detail::CacheTensorMapShape value_map_shape(const P& p, int head_size, int element_bytes)
  {
    return detail::value_tensor_map_shape(head_size, p.block_size, element_bytes, p.num_blocks, p.num_kv_heads);
  }
  /// The largest map coordinate a copy takes (checked against 2^31 - 1), what it is, and the maps' names in errors.
  template <class P>
  static std::int64_t map_coordinates(const P& p) { return p.num_blocks * p.num_kv_heads; }
  static constexpr const char* map_coordinates_name = "num_blocks * num_kv_heads";
  static constexpr const char* key_map_name = "key_cache";
  static constexpr const char* value_map_name = "value_cache";
};

/// Caches in token rows (CacheLayout hnd and nhd), with the strides of PagedAttentionParams.
struct TokenRowsKvLayout {
  /// V lies in token rows: the CUDA-core fold reads a lane's consecutive dims of each token's row.
  static constexpr bool value_rows = true;

  template <int X, class P>
  static PAGEDATTN_HOST_DEVICE std::int64_t key_token_stride(const P& p) { return p.cache_token_stride; }
  template <int X, class P>
  static PAGEDATTN_HOST_DEVICE std::int64_t key_vector_stride(const P&) { return X; }

  /// Tensor copies where a row is whole 128-byte spans (heads 64, 128, 192, 256 of 16 bits, 128 and 256 of
  /// fp8), else cp.async: plain bulk copies cannot gather strided rows.
  static constexpr KvCopy kv_copy(KvCopy policy_copy, bool bulk_copies_compiled, int head_dim, int element_bytes)
  {
    return detail::compiled_kv_copy(policy_copy, bulk_copies_compiled) == KvCopy::bulk_tensor && token_rows_tensor_copies_fit(head_dim, element_bytes)
               ? KvCopy::bulk_tensor
               : KvCopy::cp_async;
  }

  template <class KvT, int HeadDim, int BlockThreads, KvCopy Copy>
  using Slab = KvSlabRows<KvT, HeadDim, BlockThreads, Copy == KvCopy::bulk_tensor>;

  /// The tensor maps (host): 5-D maps of the caches' strides, one box per block's run of one KV head, at
  /// coordinate (0, 0, 0, kv_head, block_id); K's and V's the same shape.
  template <class P>
  static detail::CacheTensorMapShape key_map_shape(const P& p, int head_size, int element_bytes)
  {
    return detail::token_rows_tensor_map_shape(head_size, p.block_size, element_bytes, p.num_blocks, p.num_kv_heads, p.cache_block_stride,
                                               p.cache_head_stride, p.cache_token_stride);
  }
  template <class P>
  static detail::CacheTensorMapShape value_map_shape(const P& p, int head_size, int element_bytes) { return key_map_shape(p, head_size, element_bytes); }
  template <class P>
  static std::int64_t map_coordinates(const P& p) { return p.num_blocks; }
  static constexpr const char* map_coordinates_name = "num_blocks";
  static constexpr const char* key_map_name = "key_cache (token rows)";
  static constexpr const char* value_map_name = "value_cache (token rows)";
};

} // namespace pagedattn
