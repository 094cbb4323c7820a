#pragma once
// vLLM 0.6.x's paged_attention_v1/v2 arguments -> pagedattn::DecodeArguments, with every check that the
// library's own validation cannot make from raw pointers (shapes, dtypes, devices, layouts, kv_cache_dtype
// and the fp8 scales, the options pagedattn does not support). Free of PyTorch, so that host tests build it
// without torch (test/python/test_vllm_arguments_host.cu); python/csrc/torch_ops.cu fills TensorInfo from
// at::Tensor.
// Every message names the argument as vLLM's signature does.
#include <pagedattn/device/dispatch/decode_arguments.cuh>
#include <pagedattn/util_fp8.cuh>
#include <pagedattn/util_type.cuh>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>
#include <utility>

namespace pagedattn_python {

/// A tensor's dtype, as far as the checks tell them apart. vLLM 0.6 stores an fp8 cache as uint8 (u8);
/// f8_e4m3 and f8_e5m2 are torch.float8_e4m3fn and torch.float8_e5m2.
enum class DType { f16, bf16, f32, i32, u8, f8_e4m3, f8_e5m2, other };

inline const char* dtype_name(DType t)
{
  switch (t)
  {
  case DType::f16: return "float16";
  case DType::bf16: return "bfloat16";
  case DType::f32: return "float32";
  case DType::i32: return "int32";
  case DType::u8: return "uint8";
  case DType::f8_e4m3: return "float8_e4m3fn";
  case DType::f8_e5m2: return "float8_e5m2";
  default: return "another dtype";
  }
}
inline int dtype_bytes(DType t)
{
  switch (t)
  {
  case DType::f16:
  case DType::bf16: return 2;
  case DType::f32:
  case DType::i32: return 4;
  case DType::u8:
  case DType::f8_e4m3:
  case DType::f8_e5m2: return 1;
  default: return 0;
  }
}

/// vLLM's kv_cache_dtype: "auto" (the caches have the query's dtype), "fp8" and "fp8_e4m3" (OCP E4M3FN),
/// "fp8_e5m2"; any other string is `unknown`.
enum class KvCacheDtype { auto_, fp8_e4m3, fp8_e5m2, unknown };

inline KvCacheDtype kv_cache_dtype_of(const std::string& s)
{
  if (s == "auto") { return KvCacheDtype::auto_; }
  if (s == "fp8" || s == "fp8_e4m3") { return KvCacheDtype::fp8_e4m3; }
  if (s == "fp8_e5m2") { return KvCacheDtype::fp8_e5m2; }
  return KvCacheDtype::unknown;
}

/// The kv_cache_dtype whose caches have element type KvT (the query's type T for "auto").
template <class KvT>
inline constexpr KvCacheDtype kv_cache_dtype_for = std::is_same_v<KvT, pagedattn::fp8_e4m3>   ? KvCacheDtype::fp8_e4m3
                                                   : std::is_same_v<KvT, pagedattn::fp8_e5m2> ? KvCacheDtype::fp8_e5m2
                                                                                              : KvCacheDtype::auto_;

/// Dimensions a TensorInfo holds. A tensor may have more (dim says how many): only the first
/// max_tensor_dims sizes and strides are stored, and check() rejects it before any of them is read.
inline constexpr int max_tensor_dims = 8;

/// What the translation reads of a tensor. The data pointer is only read by to_decode_arguments(), after
/// check() has passed: the torch binding fills it last, from tensors that are known to be CUDA tensors
/// of the right dtype and shape.
struct TensorInfo {
  bool defined = false;
  bool cuda = false;
  int device = -1;
  DType dtype = DType::other;
  int dim = 0;
  std::int64_t size[max_tensor_dims] = {};
  std::int64_t stride[max_tensor_dims] = {};
  const void* data = nullptr;
};

/// The arguments of vLLM 0.6.x's ops.paged_attention_v1 / v2 that pagedattn reads. v2's exp_sums,
/// max_logits and tmp_out are accepted by the op and not used: pagedattn keeps its own temporary storage.
struct VllmPagedAttentionArgs {
  TensorInfo out, query, key_cache, value_cache, block_tables, seq_lens, alibi_slopes;
  TensorInfo sinks;             ///< pagedattn.decode only: float32 [num_heads] attention sinks, or undefined
  double logits_soft_cap = 0.0; ///< pagedattn.decode only: DecodeArguments::logit_softcap (0: off)
  std::int64_t window_left = -1; ///< pagedattn.decode only: DecodeArguments::window_left (-1: off)
  std::int64_t q_len = 1;        ///< pagedattn.decode only: DecodeArguments::q_len, new tokens per sequence (1 ..
                                 ///< pagedattn::max_q_len): query and out have num_seqs * q_len rows, new token i
                                 ///< of sequence s in row s * q_len + i; with query_start_loc, the most of any sequence
  TensorInfo query_start_loc;    ///< pagedattn.decode only: int32 [num_seqs + 1] (vLLM V1's query_start_loc), each
                                 ///< sequence's first row of query and out and their end, or undefined
  std::int64_t num_kv_heads = 0;
  double scale = 0;
  std::int64_t block_size = 0;
  std::int64_t max_seq_len = 0;
  std::string kv_cache_dtype = "auto";
  double k_scale = 1.0, v_scale = 1.0;
  std::int64_t tp_rank = 0, blocksparse_local_blocks = 0, blocksparse_vert_stride = 0, blocksparse_block_size = 64,
               blocksparse_head_sliding_step = 0;
};

namespace detail {

/// The dimensions a TensorInfo holds of t: 0 to max_tensor_dims, whatever t.dim says.
inline int stored_dims(const TensorInfo& t) { return t.dim < 0 ? 0 : t.dim > max_tensor_dims ? max_tensor_dims : t.dim; }

inline std::string shape_of(const TensorInfo& t)
{
  std::string s = "[";
  for (int i = 0; i < stored_dims(t); ++i) { s += (i ? ", " : "") + std::to_string(t.size[i]); }
  return s + (t.dim > max_tensor_dims ? ", ...]" : "]");
}

/// Dense row-major strides for t's sizes (a size-1 dimension's stride is not looked at).
inline bool contiguous(const TensorInfo& t)
{
  std::int64_t expected = 1;
  for (int i = stored_dims(t) - 1; i >= 0; --i)
  {
    if (t.size[i] != 1 && t.stride[i] != expected) { return false; }
    expected *= t.size[i];
  }
  return true;
}

inline bool fits_int(std::int64_t v) { return v >= 0 && v <= INT_MAX; }

/// A double as %g prints it (std::to_string's fixed 6 decimals would print 1e-9 as 0.000000).
inline std::string number(double x)
{
  char text[32];
  std::snprintf(text, sizeof(text), "%g", x);
  return text;
}

/// An fp8 cache's k_scale or v_scale: a float32 that is finite and > 0 (the kernel multiplies by it as a
/// float, so a double that rounds to 0 or to infinity there is refused too).
inline std::string check_cache_scale(const char* name, double scale)
{
  const float as_float = static_cast<float>(scale);
  if (as_float > 0.f && std::isfinite(as_float)) { return ""; }
  return std::string(name) + " must be finite and > 0 (as a float32) with an fp8 cache, got " + number(scale);
}

/// key_cache's or value_cache's dtype: the query's with kv_cache_dtype "auto"; with an fp8 kv_cache_dtype
/// uint8 (how vLLM 0.6 stores fp8) or the matching torch float8 dtype. kv is known (check() returned on
/// `unknown` before).
inline std::string check_cache_dtype(const char* name, DType cache, DType query, KvCacheDtype kv, const std::string& kv_cache_dtype)
{
  if (kv == KvCacheDtype::auto_)
  {
    if (cache == query) { return ""; }
    const bool looks_fp8 = cache == DType::u8 || cache == DType::f8_e4m3 || cache == DType::f8_e5m2;
    return std::string(name) + " must have the query's dtype (" + dtype_name(query) + ") with kv_cache_dtype 'auto', got " +
           dtype_name(cache) + (looks_fp8 ? " (an fp8 cache needs kv_cache_dtype 'fp8', 'fp8_e4m3' or 'fp8_e5m2')" : "");
  }
  const DType float8 = kv == KvCacheDtype::fp8_e4m3 ? DType::f8_e4m3 : DType::f8_e5m2;
  if (cache == DType::u8 || cache == float8) { return ""; }
  return std::string(name) + " must be uint8 or " + dtype_name(float8) + " with kv_cache_dtype '" + kv_cache_dtype + "', got " +
         dtype_name(cache);
}

/// Whether two (sequence, head) rows of a 3-D tensor whose last dimension is contiguous share an element.
/// The outer dimensions that step (size > 1), in order of stride whatever their order in the shape, must
/// each step past everything the dimensions inside them span.
inline bool rows_overlap(const TensorInfo& t)
{
  struct Step {
    std::int64_t stride, size;
  };
  Step steps[2];
  int n = 0;
  for (int d = 0; d < 2; ++d)
  {
    if (t.size[d] > 1) { steps[n++] = {t.stride[d], t.size[d]}; }
  }
  if (n == 2 && steps[1].stride < steps[0].stride) { std::swap(steps[0], steps[1]); }
  std::int64_t extent = t.size[2]; // one row
  for (int i = 0; i < n; ++i)
  {
    if (steps[i].stride < extent) { return true; }
    extent += (steps[i].size - 1) * steps[i].stride;
  }
  return false;
}

/// A CUDA tensor of `dim` dimensions on the query's device. In this order: defined, on a CUDA device, the
/// query's device, the number of dimensions, then the sizes and strides: nothing reads a size or a stride
/// of a tensor whose dimensions are not known to be `dim` (<= max_tensor_dims).
inline std::string check_tensor(const char* name, const TensorInfo& t, int dim, int device)
{
  if (!t.defined) { return std::string(name) + " is required"; }
  if (!t.cuda) { return std::string(name) + " must be a CUDA tensor"; }
  if (t.device != device)
  {
    return std::string(name) + " is on cuda:" + std::to_string(t.device) + ", query on cuda:" + std::to_string(device);
  }
  if (t.dim != dim || dim > max_tensor_dims)
  {
    return std::string(name) + " must have " + std::to_string(dim) + " dimensions, got " + std::to_string(t.dim) + ": " + shape_of(t);
  }
  for (int i = 0; i < t.dim; ++i)
  {
    if (t.size[i] < 0 || t.stride[i] < 0) { return std::string(name) + " has a negative size or stride"; }
  }
  return "";
}

/// An optional float32 vector of one value per query head (alibi_slopes, sinks): "" when undefined.
inline std::string check_per_head_floats(const char* name, const TensorInfo& t, std::int64_t num_heads, int device)
{
  if (!t.defined) { return ""; }
  std::string e = check_tensor(name, t, 1, device);
  if (!e.empty()) { return e; }
  if (t.dtype != DType::f32) { return std::string(name) + " must be float32, got " + dtype_name(t.dtype); }
  if (t.size[0] != num_heads)
  {
    return std::string(name) + " has " + std::to_string(t.size[0]) + " entries, the query " + std::to_string(num_heads) + " heads";
  }
  if (!contiguous(t)) { return std::string(name) + " must be contiguous"; }
  return "";
}

} // namespace detail

/// Every check that does not depend on the element type. Returns "" or a message naming the argument.
inline std::string check(const VllmPagedAttentionArgs& v)
{
  using detail::check_per_head_floats;
  using detail::check_tensor;
  using detail::contiguous;
  using detail::shape_of;
  std::string e;
  // The cache's format and the options, before the tensors: their message is the useful one.
  const KvCacheDtype kv = kv_cache_dtype_of(v.kv_cache_dtype);
  if (kv == KvCacheDtype::unknown)
  {
    return "kv_cache_dtype '" + v.kv_cache_dtype + "' is not supported ('auto', 'fp8', 'fp8_e4m3' or 'fp8_e5m2')";
  }
  const bool fp8 = kv != KvCacheDtype::auto_;
  if (!fp8 && (v.k_scale != 1.0 || v.v_scale != 1.0))
  {
    return "k_scale and v_scale must be 1.0 with kv_cache_dtype 'auto' (got " + detail::number(v.k_scale) + ", " +
           detail::number(v.v_scale) + "): they scale fp8 caches only";
  }
  if (fp8 && !(e = detail::check_cache_scale("k_scale", v.k_scale)).empty()) { return e; }
  if (fp8 && !(e = detail::check_cache_scale("v_scale", v.v_scale)).empty()) { return e; }
  if (v.blocksparse_vert_stride > 1)
  {
    return "blocksparse attention (blocksparse_vert_stride " + std::to_string(v.blocksparse_vert_stride) + " > 1) is not supported";
  }
  // Before the query's shape, which is read with it (num_seqs * q_len rows).
  if (v.q_len < 1 || v.q_len > pagedattn::max_q_len)
  {
    return "q_len (new tokens per sequence) must be in [1, " + std::to_string(pagedattn::max_q_len) + "], got " + std::to_string(v.q_len);
  }

  const TensorInfo& q = v.query;
  if (!q.defined || !q.cuda) { return "query must be a CUDA tensor"; }
  if (!(e = check_tensor("query", q, 3, q.device)).empty()) { return e; }
  if (q.dtype != DType::f16 && q.dtype != DType::bf16 && q.dtype != DType::f32)
  {
    return std::string("query must be float16, bfloat16 or float32, got ") + dtype_name(q.dtype);
  }
  if (q.stride[2] != 1 && q.size[2] > 1) { return "query's last dimension (head_size) must be contiguous (stride 1)"; }
  // pagedattn reads a stride of 0 as "dense": a broadcast query would be read from the wrong places.
  if ((q.size[0] > 1 && q.stride[0] == 0) || (q.size[1] > 1 && q.stride[1] == 0)) { return "query must not be broadcast (a stride of 0)"; }
  const std::int64_t num_rows = q.size[0], num_heads = q.size[1], head_size = q.size[2];
  if (!detail::fits_int(num_rows) || !detail::fits_int(num_heads) || !detail::fits_int(head_size)) { return "query's shape exceeds int"; }
  // Without query_start_loc, [num_seqs * q_len, num_heads, head_size]: the sequences are the query's rows /
  // q_len, which block_tables and seq_lens must match (their messages name the query too: either side may be
  // the wrong one). With it, any number of rows, and the sequences are its entries less one.
  const TensorInfo& starts = v.query_start_loc;
  if (starts.defined)
  {
    if (!(e = check_tensor("query_start_loc", starts, 1, q.device)).empty()) { return e; }
    if (starts.dtype != DType::i32) { return std::string("query_start_loc must be int32, got ") + dtype_name(starts.dtype); }
    if (starts.size[0] < 1) { return "query_start_loc must have num_seqs + 1 entries, got none"; }
    if (!detail::fits_int(starts.size[0])) { return "query_start_loc has too many entries"; }
    if (!contiguous(starts)) { return "query_start_loc must be contiguous"; }
  }
  else if (num_rows % v.q_len != 0)
  {
    return "query has " + std::to_string(num_rows) + " rows, not a multiple of q_len " + std::to_string(v.q_len) +
           " (it must be [num_seqs * q_len, num_heads, head_size], or give query_start_loc)";
  }
  const std::int64_t num_seqs = starts.defined ? starts.size[0] - 1 : num_rows / v.q_len;
  // "the query N sequences", and how they were counted: the messages of block_tables and seq_lens (built
  // only for a message: nothing is allocated on a good call).
  auto query_sequences = [&]() {
    if (starts.defined) { return "query_start_loc " + std::to_string(num_seqs) + " sequences (its entries less one)"; }
    return "the query " + std::to_string(num_seqs) + " sequences" +
           (v.q_len == 1 ? "" : " (its " + std::to_string(num_rows) + " rows / q_len " + std::to_string(v.q_len) + ")");
  };

  const TensorInfo& o = v.out;
  if (!(e = check_tensor("out", o, 3, q.device)).empty()) { return e; }
  if (o.dtype != q.dtype) { return std::string("out must have the query's dtype (") + dtype_name(q.dtype) + "), got " + dtype_name(o.dtype); }
  if (o.size[0] != num_rows || o.size[1] != num_heads || o.size[2] != head_size)
  {
    return "out must have the query's shape " + shape_of(q) + ", got " + shape_of(o);
  }
  if (o.stride[2] != 1 && o.size[2] > 1) { return "out's last dimension (head_size) must be contiguous (stride 1)"; }
  if (detail::rows_overlap(o))
  {
    return "out's rows overlap (strides " + std::to_string(o.stride[0]) + ", " + std::to_string(o.stride[1]) + ", 1 for shape " +
           shape_of(o) + "): every (sequence, head) needs its own head_size elements";
  }

  if (v.num_kv_heads < 1 || num_heads % v.num_kv_heads != 0)
  {
    return "num_kv_heads (" + std::to_string(v.num_kv_heads) + ") must divide the query's " + std::to_string(num_heads) + " heads";
  }

  const TensorInfo& k = v.key_cache;
  if (!(e = check_tensor("key_cache", k, 5, q.device)).empty())
  {
    return e + " (vLLM's layout [num_blocks, num_kv_heads, head_size / x, block_size, x])";
  }
  if (!(e = detail::check_cache_dtype("key_cache", k.dtype, q.dtype, kv, v.kv_cache_dtype)).empty()) { return e; }
  const std::int64_t x = k.size[4];
  const int cache_bytes = dtype_bytes(k.dtype); // 1 for an fp8 cache: x = 16
  if (x * cache_bytes != 16) { return "key_cache's last dimension x must hold 16 bytes (" + std::to_string(16 / cache_bytes) + " elements), got " + std::to_string(x); }
  if (k.size[1] != v.num_kv_heads) { return "key_cache has " + std::to_string(k.size[1]) + " KV heads, num_kv_heads is " + std::to_string(v.num_kv_heads); }
  if (!pagedattn::head_is_whole_vectors(static_cast<int>(head_size), cache_bytes)) // before the shape it cannot have
  {
    return "head_size " + std::to_string(head_size) + " is not supported with a " + std::to_string(cache_bytes) +
           "-byte cache element: a key must be whole 16-byte vectors";
  }
  if (k.size[2] * x != head_size) { return "key_cache's head_size / x * x = " + std::to_string(k.size[2] * x) + " differs from the query's head_size " + std::to_string(head_size); }
  if (k.size[3] != v.block_size) { return "key_cache's block dimension is " + std::to_string(k.size[3]) + ", block_size is " + std::to_string(v.block_size); }
  if (!contiguous(k)) { return "key_cache must be contiguous"; }

  const TensorInfo& val = v.value_cache;
  if (!(e = check_tensor("value_cache", val, 4, q.device)).empty())
  {
    return e + " (vLLM's layout [num_blocks, num_kv_heads, head_size, block_size])";
  }
  if (!(e = detail::check_cache_dtype("value_cache", val.dtype, q.dtype, kv, v.kv_cache_dtype)).empty()) { return e; }
  if (val.size[0] != k.size[0] || val.size[1] != v.num_kv_heads || val.size[2] != head_size || val.size[3] != v.block_size)
  {
    return "value_cache must be [" + std::to_string(k.size[0]) + ", " + std::to_string(v.num_kv_heads) + ", " + std::to_string(head_size) +
           ", " + std::to_string(v.block_size) + "] like key_cache, got " + shape_of(val);
  }
  if (!contiguous(val)) { return "value_cache must be contiguous"; }

  const TensorInfo& bt = v.block_tables;
  if (!(e = check_tensor("block_tables", bt, 2, q.device)).empty()) { return e; }
  if (bt.dtype != DType::i32) { return std::string("block_tables must be int32, got ") + dtype_name(bt.dtype); }
  if (bt.size[0] != num_seqs)
  {
    return "block_tables has " + std::to_string(bt.size[0]) + " rows, " + query_sequences();
  }
  if (!contiguous(bt)) { return "block_tables must be contiguous"; }
  if (!detail::fits_int(bt.size[1])) { return "block_tables has too many columns"; }

  const TensorInfo& sl = v.seq_lens;
  if (!(e = check_tensor("seq_lens", sl, 1, q.device)).empty()) { return e; }
  if (sl.dtype != DType::i32) { return std::string("seq_lens must be int32, got ") + dtype_name(sl.dtype); }
  if (sl.size[0] != num_seqs)
  {
    return "seq_lens has " + std::to_string(sl.size[0]) + " entries, " + query_sequences();
  }
  if (!contiguous(sl)) { return "seq_lens must be contiguous"; }

  if (!(e = check_per_head_floats("alibi_slopes", v.alibi_slopes, num_heads, q.device)).empty()) { return e; }
  if (!(e = check_per_head_floats("sinks", v.sinks, num_heads, q.device)).empty()) { return e; }
  if (!(v.logits_soft_cap >= 0.0) || !(static_cast<float>(v.logits_soft_cap) < INFINITY))
  {
    return "logits_soft_cap must be finite and >= 0 (as a float32; 0: off), got " + detail::number(v.logits_soft_cap);
  }
  if (v.window_left < -1 || v.window_left > std::int64_t(INT_MAX))
  {
    return "window_left must be -1 (no window) or in [0, 2^31 - 1], got " + std::to_string(v.window_left);
  }
  if (!detail::fits_int(v.max_seq_len)) { return "max_seq_len must be in [0, 2^31 - 1], got " + std::to_string(v.max_seq_len); }
  if (v.block_size < 1 || !detail::fits_int(v.block_size)) { return "block_size must be positive, got " + std::to_string(v.block_size); }
  if (v.max_seq_len > bt.size[1] * v.block_size)
  {
    return "max_seq_len (" + std::to_string(v.max_seq_len) + ") exceeds what block_tables hold (max_blocks_per_seq " +
           std::to_string(bt.size[1]) + " * block_size " + std::to_string(v.block_size) + ")";
  }
  return "";
}

/// pagedattn.decode() takes the KV heads and the block size from key_cache
/// ([num_blocks, num_kv_heads, head_size / x, block_size, x]): sets v.num_kv_heads and v.block_size, or
/// returns the message naming key_cache. Nothing is read of key_cache's sizes before its dimensions are
/// known to be 5 (a 4-D or 9-D key_cache is named, not indexed).
inline std::string take_layout_from_key_cache(VllmPagedAttentionArgs& v)
{
  const TensorInfo& k = v.key_cache;
  if (!k.defined) { return "key_cache is required"; }
  if (k.dim != 5)
  {
    return "key_cache must have 5 dimensions [num_blocks, num_kv_heads, head_size / x, block_size, x], got " + std::to_string(k.dim) +
           ": " + detail::shape_of(k);
  }
  v.num_kv_heads = k.size[1];
  v.block_size = k.size[3];
  return "";
}

/// check(), then the Decode arguments for the query's element type T and the caches' KvT (T with
/// kv_cache_dtype "auto", pagedattn::fp8_e4m3 or fp8_e5m2 with an fp8 one). Returns "" or the message.
/// An fp8 cache's scales are read by the kernel from the device: device_scales is the caller's device
/// float[2] that holds {k_scale, v_scale} by the time the launch runs (torch_ops.cu writes it on the
/// launch's stream); one scale for all KV heads, as vLLM 0.6 has. Ignored with "auto".
template <class T, class KvT>
std::string to_decode_arguments(const VllmPagedAttentionArgs& v, pagedattn::DecodeArguments<T, KvT>& a,
                                const float* device_scales = nullptr)
{
  const std::string e = check(v);
  if (!e.empty()) { return e; }
  // The caller's choice of KvT against kv_cache_dtype: a mismatch would read the caches as another format.
  if (kv_cache_dtype_of(v.kv_cache_dtype) != kv_cache_dtype_for<KvT>)
  {
    return "kv_cache_dtype '" + v.kv_cache_dtype + "' translated with another cache element type (a bug of the caller)";
  }
  if (pagedattn::is_fp8<KvT> && !device_scales)
  {
    return "k_scale and v_scale: kv_cache_dtype '" + v.kv_cache_dtype + "' needs the device float[2] for them (a bug of the caller)";
  }
  a = pagedattn::DecodeArguments<T, KvT>{};
  a.output = static_cast<T*>(const_cast<void*>(v.out.data));
  a.output_seq_stride = v.out.stride[0];
  a.output_head_stride = v.out.stride[1];
  a.query = static_cast<const T*>(v.query.data);
  a.query_seq_stride = v.query.stride[0];
  a.query_head_stride = v.query.stride[1];
  a.key_cache = static_cast<const KvT*>(v.key_cache.data);
  a.value_cache = static_cast<const KvT*>(v.value_cache.data);
  if constexpr (pagedattn::is_fp8<KvT>)
  {
    a.k_scale = device_scales;
    a.v_scale = device_scales + 1;
    a.scale_head_stride = 0; // one k_scale and one v_scale per layer, for all its KV heads
  }
  a.num_blocks = v.key_cache.size[0];
  a.block_tables = static_cast<const int*>(v.block_tables.data);
  a.max_blocks_per_seq = static_cast<int>(v.block_tables.size[1]);
  a.seq_lens = static_cast<const int*>(v.seq_lens.data);
  if (v.query_start_loc.defined) // check(): [num_seqs + 1] int32
  {
    a.num_seqs = static_cast<int>(v.query_start_loc.size[0] - 1);
    a.query_start_loc = static_cast<const int*>(v.query_start_loc.data);
    a.num_query_rows = static_cast<int>(v.query.size[0]);
  }
  else { a.num_seqs = static_cast<int>(v.query.size[0] / v.q_len); } // check(): the query's rows are num_seqs * q_len
  a.max_seq_len = static_cast<int>(v.max_seq_len);
  a.num_heads = static_cast<int>(v.query.size[1]);
  a.num_kv_heads = static_cast<int>(v.num_kv_heads);
  a.head_size = static_cast<int>(v.query.size[2]);
  a.block_size = static_cast<int>(v.block_size);
  a.scale = static_cast<float>(v.scale);
  a.alibi_slopes = v.alibi_slopes.defined ? static_cast<const float*>(v.alibi_slopes.data) : nullptr;
  a.logit_softcap = static_cast<float>(v.logits_soft_cap);
  a.sinks = v.sinks.defined ? static_cast<const float*>(v.sinks.data) : nullptr;
  a.window_left = static_cast<int>(v.window_left);
  a.q_len = static_cast<int>(v.q_len);
  return "";
}

} // namespace pagedattn_python
