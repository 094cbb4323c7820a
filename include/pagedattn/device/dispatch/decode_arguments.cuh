#pragma once
// The public arguments of DevicePagedAttention::Decode, and what the library supports.
#include <cstdint>
#include <utility>

#include <pagedattn/agent/decode_variant.cuh>
#include <pagedattn/config.cuh>
#include <pagedattn/thread/thread_output_epilogue.cuh>

namespace pagedattn {

/// How the caches lie in memory (DecodeArguments::cache_layout); x = 16 / sizeof(KvT) elements.
enum class CacheLayout {
  vllm, ///< vLLM's: key [num_blocks][num_kv_heads][head_size / x][block_size][x], value [num_blocks][num_kv_heads][head_size][block_size], packed
  hnd,  ///< key and value [num_blocks][num_kv_heads][block_size][head_size] (FlashInfer's HND), strided (cache_*_stride)
  nhd,  ///< key and value [num_blocks][block_size][num_kv_heads][head_size] (FlashInfer's NHD), strided (cache_*_stride)
};

/// A compile-time set of cache layouts: those DevicePagedAttention::Decode instantiates kernels for.
template <CacheLayout... Layouts>
struct CacheLayoutList {};
/// Every layout (the default of Decode).
using SupportedCacheLayouts = CacheLayoutList<CacheLayout::vllm, CacheLayout::hnd, CacheLayout::nhd>;
/// vLLM's layout only: half the tensor-core kernels of the default (HND and NHD share their kernels).
using VllmCacheLayout = CacheLayoutList<CacheLayout::vllm>;

/// How a launch gives its query rows: q_len new tokens per sequence, or each sequence its own number
/// (DecodeArguments::query_start_loc).
enum class QueryRows {
  uniform,      ///< query_start_loc null: q_len rows per sequence
  per_sequence, ///< query_start_loc set: the rows each sequence's offsets give
};

/// A compile-time set of QueryRows: those DevicePagedAttention::Decode instantiates kernels for. Each has
/// kernels of its own, so that launches without offsets run code with none of theirs.
template <QueryRows... Forms>
struct QueryRowsList {};
/// Both (the default of Decode).
using SupportedQueryRows = QueryRowsList<QueryRows::uniform, QueryRows::per_sequence>;
/// Launches without query_start_loc only: half the kernels of the default.
using UniformQueryRows = QueryRowsList<QueryRows::uniform>;
/// Launches with query_start_loc only.
using PerSequenceQueryRows = QueryRowsList<QueryRows::per_sequence>;

/// Arguments of one decode step, as vLLM passes them (all pointers on the device, strides in elements).
/// T: the query and output type (fp16, bf16, fp32); KvT: the caches' element type, T or an fp8 format
/// (fp8_e4m3, fp8_e5m2: util_fp8.cuh), whose elements are dequantized as float(fp8) * scale with the scales
/// below (with fp32 queries on the CUDA-core fold). OutputEpilogue: what each output element passes through
/// before it is stored (thread/thread_output_epilogue.cuh; by default nothing). ScoreVariant: the logit
/// modifiers, the mask and the sinks (agent/decode_variant.cuh; by default those the fields below ask for).
template <class T, class KvT = T, class OutputEpilogue = IdentityOutputEpilogue, class ScoreVariant = DefaultScoreVariant>
struct DecodeArguments {
  T* output = nullptr;                 ///< [rows][num_heads][head_size] (strides below); rows: num_seqs * q_len, or
                                       ///< num_query_rows with query_start_loc
  std::int64_t output_seq_stride = 0;  ///< between rows of the first index; 0: num_heads * head_size
  std::int64_t output_head_stride = 0; ///< 0: head_size
  const T* query = nullptr;            ///< [rows][num_heads][head_size], as the output: new token i of sequence s is row
                                       ///< s * q_len + i, or query_start_loc[s] + i
  std::int64_t query_seq_stride = 0;   ///< between rows of the first index; 0: num_heads * head_size
  std::int64_t query_head_stride = 0;  ///< 0: head_size
  const KvT* key_cache = nullptr;      ///< laid out as cache_layout says (default: vLLM's 5-D key cache)
  const KvT* value_cache = nullptr;    ///< likewise (default: vLLM's 4-D value cache)
  CacheLayout cache_layout = CacheLayout::vllm;
  std::int64_t cache_block_stride = 0; ///< hnd, nhd: elements between cache blocks (0: packed, num_kv_heads * block_size * head_size)
  std::int64_t cache_head_stride = 0;  ///< hnd, nhd: between KV heads (0: packed; hnd block_size * head_size, nhd head_size)
  std::int64_t cache_token_stride = 0; ///< hnd, nhd: between a block's tokens (0: packed; hnd head_size, nhd num_kv_heads * head_size)
                                       ///< (the same strides for both caches, e.g. views of one [blocks][2][...] tensor;
                                       ///< each a multiple of 16 bytes; vllm: all 0)
  const float* k_scale = nullptr;      ///< fp8 caches only (and then required): K's scale of KV head h at
  const float* v_scale = nullptr;      ///< k_scale[h * scale_head_stride] (likewise V's), read by the kernel
  std::int64_t scale_head_stride = 0;  ///< 0: one scale for every KV head; 1: one per KV head
  std::int64_t num_blocks = 0;         ///< cache blocks (bounds for block table entries)
  const int* block_tables = nullptr;   ///< [num_seqs][max_blocks_per_seq]
  int max_blocks_per_seq = 0;
  const int* seq_lens = nullptr;       ///< [num_seqs], on the device
  int num_seqs = 0;
  int max_seq_len = 0;                 ///< host-side upper bound of seq_lens
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_size = 0;
  int block_size = 0;
  float scale = 0.f;
  const float* alibi_slopes = nullptr; ///< [num_heads] or null
  float logit_softcap = 0.f;           ///< > 0: each logit (scale q.k) becomes logit_softcap * tanh(logit / logit_softcap)
                                       ///< before ALiBi and the softmax (Gemma 2's soft-capping); 0: off
  const float* sinks = nullptr;        ///< [num_heads] or null: attention sinks (gpt-oss), one logit per query head that
                                       ///< joins the softmax's denominator and adds no value: out = sum_t e^s_t v_t / (sum_t e^s_t + e^sink);
                                       ///< -inf: no sink for that head; NaN: a NaN output for that head
  int window_left = -1;                ///< >= 0: a sliding window, the new token sees the last window_left + 1 positions
                                       ///< [seq_len - 1 - window_left, seq_len) (0: itself only); cache blocks wholly
                                       ///< before them are never read, nor their block table entries; -1: off
  int q_len = 1;                       ///< new tokens per sequence, 1 .. max_q_len (speculative decoding: the drafts to
                                       ///< verify); all q_len tokens' keys and values are in the cache, and new token i
                                       ///< sees positions [0, seq_len - q_len + 1 + i) (causal among them; nothing when that
                                       ///< is <= 0: a zero output), a window its last window_left + 1 of them; with
                                       ///< query_start_loc, the most new tokens of any sequence
  const int* query_start_loc = nullptr; ///< optional, [num_seqs + 1] on the device (vLLM's query_start_loc,
                                       ///< FlashAttention's cu_seqlens_q): sequence s has the n = query_start_loc[s + 1] -
                                       ///< query_start_loc[s] new tokens (0 .. q_len) in rows query_start_loc[s] + i, new
                                       ///< token i seeing [0, seq_len - n + 1 + i); query_start_loc[0] = 0, non-decreasing,
                                       ///< at most num_query_rows. A sequence whose offsets break this gets NaN in the
                                       ///< rows they name within [0, num_query_rows) and the error count. null: q_len each
  int num_query_rows = 0;              ///< with query_start_loc: the query's and the output's rows (host-side bound of
                                       ///< query_start_loc[num_seqs]); else 0
  unsigned* error_count = nullptr;     ///< optional: +1 per segment with a bad seq_len or query offsets (its partition-0 block),
                                       ///< +1 per thread block that met a block id outside the cache
  OutputEpilogue output_epilogue{};    ///< applied to each output element (value, seq, head, dim) before the store
  ScoreVariant score_variant{};        ///< what each row's scores pass through (DefaultScoreVariant reads the fields above)
  int partition_tokens = 0;            ///< 0: chosen per launch to fill the GPU; else fixed (a multiple of 32, at
                                       ///< most partition_token_limit of the policy): then a sequence's output
                                       ///< does not depend on the rest of the batch, bit for bit
};

/// Head sizes the library supports (and instantiates by default). 120 only with 16- and 32-bit caches
/// (head_is_whole_vectors); the tensor-core fold carries it in a 128-wide tile (BlockTileTensorCore).
using SupportedHeadDims = std::integer_sequence<int, 64, 80, 96, 112, 120, 128, 192, 256>;
/// Cache block sizes the library supports.
inline constexpr int supported_block_sizes[] = {8, 16, 32};
/// Query rows (heads x new tokens) one thread block of the CUDA-core fold computes at most (the tensor-core
/// tile: 32, detail::max_rows_per_block); a KV head's larger set of rows (q_len x its GQA group) is split into
/// head parts, each of which reads the KV head's cache again.
inline constexpr int max_cuda_core_rows = 8;
/// The most new tokens per sequence (DecodeArguments::q_len).
inline constexpr int max_q_len = 8;

} // namespace pagedattn
