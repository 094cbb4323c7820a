// The PyTorch operators of pagedattn (namespace torch.ops.pagedattn), registered with TORCH_LIBRARY:
//   paged_attention_v1 / paged_attention_v2: vLLM 0.6.x's argument lists and semantics;
//   decode: the arguments pagedattn needs, for pagedattn.decode().
// Each has a CUDA kernel and a Meta kernel (nothing to compute: the ops write `out` and return nothing),
// so that torch.compile traces them and CUDA graphs capture them. The temporary storage is a buffer per
// device and stream, kept between calls (from PyTorch's caching allocator), and inside a graph capture a
// tensor from the graph's pool (with_stream_storage() in torch_decode.cuh, the launch half of the op).
// fp8 caches (kv_cache_dtype "fp8", "fp8_e4m3", "fp8_e5m2") get their k_scale and v_scale on the device
// through a float[2] beside that storage, written by a 1-thread kernel before each launch
// (write_cache_scales()). Bad input raises ValueError with pagedattn's message.
// The module pagedattn._C also exports each function for Python without the dispatcher (*_eager), the
// path of a plain eager call (pagedattn/_paths.py says which calls take it).
#include <torch/library.h>

#include "torch_decode.cuh"

#include <stdexcept>
#include <string>
#include <utility>

namespace pagedattn_torch {

#if defined(PAGEDATTN_OP_PROBES)
bool probe_skip_launch = false;
#endif

/// One thread: an fp8 call's scales into the float[2] that the decode reads.
__global__ void write_cache_scales_kernel(float* scales, float k_scale, float v_scale)
{
  scales[0] = k_scale;
  scales[1] = v_scale;
}

/// torch_decode.cuh says why the scales travel this way.
const float* write_cache_scales(StreamStorage& storage, const VllmPagedAttentionArgs& v, const at::Tensor& like, cudaStream_t stream)
{
  if (!storage.scales.defined()) { storage.scales = at::empty({2}, like.options().dtype(at::kFloat)); }
  float* const scales = storage.scales.data_ptr<float>();
  // check() has made both finite and > 0 as float32.
  write_cache_scales_kernel<<<1, 1, 0, stream>>>(scales, static_cast<float>(v.k_scale), static_cast<float>(v.v_scale));
  const cudaError_t err = cudaGetLastError();
  TORCH_CHECK(err == cudaSuccess, "pagedattn: the launch that writes k_scale and v_scale failed (", cudaGetErrorString(err), ")");
  return scales;
}

} // namespace pagedattn_torch

namespace {

using pagedattn_python::DType;
using pagedattn_python::KvCacheDtype;
using pagedattn_python::TensorInfo;
using pagedattn_python::VllmPagedAttentionArgs;
using pagedattn_torch::CallTensors;
using pagedattn_torch::decode_as;
using pagedattn_torch::throw_if_bad;

DType dtype_of(const at::Tensor& t)
{
  switch (t.scalar_type())
  {
  case at::kHalf: return DType::f16;
  case at::kBFloat16: return DType::bf16;
  case at::kFloat: return DType::f32;
  case at::kInt: return DType::i32;
  case at::kByte: return DType::u8; // vLLM 0.6's fp8 caches
  case at::kFloat8_e4m3fn: return DType::f8_e4m3;
  case at::kFloat8_e5m2: return DType::f8_e5m2;
  default: return DType::other;
  }
}

/// What the checks read of t: no data pointer (decode_as() reads it once the checks have passed) and
/// no size or stride past max_tensor_dims (check() rejects such a tensor by its dim before reading any).
TensorInfo info_of(const at::Tensor& t)
{
  TensorInfo i;
  i.defined = t.defined();
  if (!i.defined) { return i; }
  i.cuda = t.is_cuda();
  i.device = i.cuda ? t.get_device() : -1;
  i.dtype = dtype_of(t);
  i.dim = static_cast<int>(t.dim());
  const int stored = i.dim < pagedattn_python::max_tensor_dims ? i.dim : pagedattn_python::max_tensor_dims;
  for (int d = 0; d < stored; ++d)
  {
    i.size[d] = t.size(d);
    i.stride[d] = t.stride(d);
  }
  return i;
}
TensorInfo info_of(const c10::optional<at::Tensor>& t) { return t.has_value() ? info_of(*t) : TensorInfo{}; }
/// An optional tensor argument vLLM's ops do not have (pagedattn.decode's sinks and query_start_loc).
const c10::optional<at::Tensor> no_tensor;

/// The caches' element type for queries of type T: T with kv_cache_dtype "auto", else its fp8 format.
template <class T>
void decode_with_cache_of(VllmPagedAttentionArgs& v, const CallTensors& t)
{
  switch (pagedattn_python::kv_cache_dtype_of(v.kv_cache_dtype))
  {
  case KvCacheDtype::auto_: decode_as<T, T>(v, t); break;
  case KvCacheDtype::fp8_e4m3: decode_as<T, pagedattn::fp8_e4m3>(v, t); break;
  case KvCacheDtype::fp8_e5m2: decode_as<T, pagedattn::fp8_e5m2>(v, t); break;
  default: throw_if_bad("kv_cache_dtype '" + v.kv_cache_dtype + "' is not supported"); // check() has said so already
  }
}

/// Every check first (check() reads no data pointer and no size of a tensor whose dimensions it has not
/// checked), then the launch for the query's dtype and the caches' (each query type with caches of its
/// own dtype, e4m3 or e5m2).
void run(VllmPagedAttentionArgs& v, const CallTensors& t)
{
  throw_if_bad(pagedattn_python::check(v));
  switch (v.query.dtype)
  {
  case DType::f16: decode_with_cache_of<__half>(v, t); break;
  case DType::bf16: decode_with_cache_of<__nv_bfloat16>(v, t); break;
  case DType::f32: decode_with_cache_of<float>(v, t); break;
  default: throw_if_bad("query must be float16, bfloat16 or float32"); // check() has said so already
  }
}

VllmPagedAttentionArgs vllm_args(const CallTensors& t, int64_t num_kv_heads, double scale, int64_t block_size, int64_t max_seq_len,
                                 const std::string& kv_cache_dtype, double k_scale, double v_scale, int64_t tp_rank,
                                 int64_t blocksparse_local_blocks, int64_t blocksparse_vert_stride, int64_t blocksparse_block_size,
                                 int64_t blocksparse_head_sliding_step)
{
  VllmPagedAttentionArgs v;
  v.out = info_of(t.out);
  v.query = info_of(t.query);
  v.key_cache = info_of(t.key_cache);
  v.value_cache = info_of(t.value_cache);
  v.block_tables = info_of(t.block_tables);
  v.seq_lens = info_of(t.seq_lens);
  v.alibi_slopes = info_of(t.alibi_slopes);
  v.num_kv_heads = num_kv_heads;
  v.scale = scale;
  v.block_size = block_size;
  v.max_seq_len = max_seq_len;
  v.kv_cache_dtype = kv_cache_dtype;
  v.k_scale = k_scale;
  v.v_scale = v_scale;
  v.tp_rank = tp_rank;
  v.blocksparse_local_blocks = blocksparse_local_blocks;
  v.blocksparse_vert_stride = blocksparse_vert_stride;
  v.blocksparse_block_size = blocksparse_block_size;
  v.blocksparse_head_sliding_step = blocksparse_head_sliding_step;
  return v;
}

void paged_attention_v1(at::Tensor& out, const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                        int64_t num_kv_heads, double scale, const at::Tensor& block_tables, const at::Tensor& seq_lens, int64_t block_size,
                        int64_t max_seq_len, const c10::optional<at::Tensor>& alibi_slopes, const std::string& kv_cache_dtype,
                        double k_scale, double v_scale, int64_t tp_rank, int64_t blocksparse_local_blocks,
                        int64_t blocksparse_vert_stride, int64_t blocksparse_block_size, int64_t blocksparse_head_sliding_step)
{
  const CallTensors t{out, query, key_cache, value_cache, block_tables, seq_lens, alibi_slopes, no_tensor, no_tensor};
  VllmPagedAttentionArgs v = vllm_args(t, num_kv_heads, scale, block_size, max_seq_len, kv_cache_dtype, k_scale, v_scale, tp_rank,
                                       blocksparse_local_blocks, blocksparse_vert_stride, blocksparse_block_size,
                                       blocksparse_head_sliding_step);
  run(v, t);
}

/// exp_sums, max_logits and tmp_out are vLLM's workspace for its own kernel: accepted, not used.
void paged_attention_v2(at::Tensor& out, const at::Tensor& /*exp_sums*/, const at::Tensor& /*max_logits*/, const at::Tensor& /*tmp_out*/,
                        const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache, int64_t num_kv_heads,
                        double scale, const at::Tensor& block_tables, const at::Tensor& seq_lens, int64_t block_size, int64_t max_seq_len,
                        const c10::optional<at::Tensor>& alibi_slopes, const std::string& kv_cache_dtype, double k_scale, double v_scale,
                        int64_t tp_rank, int64_t blocksparse_local_blocks, int64_t blocksparse_vert_stride,
                        int64_t blocksparse_block_size, int64_t blocksparse_head_sliding_step)
{
  paged_attention_v1(out, query, key_cache, value_cache, num_kv_heads, scale, block_tables, seq_lens, block_size, max_seq_len,
                     alibi_slopes, kv_cache_dtype, k_scale, v_scale, tp_rank, blocksparse_local_blocks, blocksparse_vert_stride,
                     blocksparse_block_size, blocksparse_head_sliding_step);
}

/// pagedattn.decode(): the KV heads and the block size are key_cache's, taken by the torch-free
/// take_layout_from_key_cache() once key_cache is known to have 5 dimensions; every message leaves through
/// throw_if_bad(). q_len new tokens per sequence: query and out have num_seqs * q_len rows; with
/// query_start_loc, each sequence's rows as it says (q_len their most).
void decode(at::Tensor& out, const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache, const at::Tensor& block_tables,
            const at::Tensor& seq_lens, double scale, int64_t max_seq_len, const c10::optional<at::Tensor>& alibi_slopes,
            double logits_soft_cap, const c10::optional<at::Tensor>& sinks, int64_t window_left, int64_t q_len,
            const c10::optional<at::Tensor>& query_start_loc)
{
  const CallTensors t{out, query, key_cache, value_cache, block_tables, seq_lens, alibi_slopes, sinks, query_start_loc};
  VllmPagedAttentionArgs v = vllm_args(t, 0, scale, 0, max_seq_len, "auto", 1.0, 1.0, 0, 0, 0, 64, 0);
  v.sinks = info_of(sinks);
  v.logits_soft_cap = logits_soft_cap;
  v.window_left = window_left;
  v.q_len = q_len;
  v.query_start_loc = info_of(query_start_loc);
  throw_if_bad(pagedattn_python::take_layout_from_key_cache(v));
  run(v, t);
}

// Meta kernels: the ops write `out` in place and return nothing, so there is nothing to compute.
void paged_attention_v1_meta(at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t, double, const at::Tensor&,
                             const at::Tensor&, int64_t, int64_t, const c10::optional<at::Tensor>&, const std::string&, double, double,
                             int64_t, int64_t, int64_t, int64_t, int64_t)
{
}
void paged_attention_v2_meta(at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                             const at::Tensor&, int64_t, double, const at::Tensor&, const at::Tensor&, int64_t, int64_t,
                             const c10::optional<at::Tensor>&, const std::string&, double, double, int64_t, int64_t, int64_t, int64_t,
                             int64_t)
{
}
void decode_meta(at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, double,
                 int64_t, const c10::optional<at::Tensor>&, double, const c10::optional<at::Tensor>&, int64_t, int64_t,
                 const c10::optional<at::Tensor>&)
{
}

} // namespace

#if defined(TORCH_EXTENSION_NAME) // built as the Python module pagedattn._C: importing it registers the operators
#include <ATen/PythonTorchFunctionTLS.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/extension.h>

#include <tuple>

namespace {

// ---- the eager entry points: an operator's function called from Python without the dispatcher ----------
// The path of a plain eager call: the dispatcher's boxing of vLLM's 22 arguments costs more than the
// launch. The arguments are read straight from the vectorcall array (METH_FASTCALL), each by
// its C++ parameter type. A call the dispatcher must see returns NotImplemented, and the Python wrapper
// (pagedattn/_paths.py) calls the registered operator instead: a tensor that is not a plain CUDA
// torch.Tensor (Meta, CPU, FakeTensor or another subclass) or an active dispatch or torch-function mode.
// Errors leave as the operator's do: ValueError for a bad argument, RuntimeError otherwise; TypeError
// for an argument of the wrong Python type.

enum class Loaded { ok, wrong_type, for_the_dispatcher };

/// One parameter type: the value held while the call runs, and how it is read from Python.
template <class A>
struct EagerArg;
template <>
struct EagerArg<const at::Tensor&> {
  using Held = at::Tensor;
  static constexpr const char* expected = "a torch.Tensor";
  static Loaded load(PyObject* o, Held& h)
  {
    if (!THPVariable_Check(o)) { return Loaded::wrong_type; }
    h = THPVariable_Unpack(o);
    return THPVariable_CheckExact(o) && h.is_cuda() ? Loaded::ok : Loaded::for_the_dispatcher;
  }
};
template <>
struct EagerArg<at::Tensor&> : EagerArg<const at::Tensor&> {};
template <>
struct EagerArg<const c10::optional<at::Tensor>&> {
  using Held = c10::optional<at::Tensor>;
  static constexpr const char* expected = "a torch.Tensor or None";
  static Loaded load(PyObject* o, Held& h)
  {
    if (o == Py_None) { return Loaded::ok; }
    at::Tensor t;
    const Loaded l = EagerArg<const at::Tensor&>::load(o, t);
    h = std::move(t);
    return l;
  }
};
template <>
struct EagerArg<int64_t> {
  using Held = int64_t;
  static constexpr const char* expected = "an int";
  static Loaded load(PyObject* o, Held& h)
  {
    if (!PyLong_Check(o)) { return Loaded::wrong_type; }
    h = PyLong_AsLongLong(o);
    if (h == -1 && PyErr_Occurred()) // out of int64's range
    {
      PyErr_Clear();
      return Loaded::wrong_type;
    }
    return Loaded::ok;
  }
};
template <>
struct EagerArg<double> {
  using Held = double;
  static constexpr const char* expected = "a float";
  static Loaded load(PyObject* o, Held& h)
  {
    if (!PyFloat_Check(o) && !PyLong_Check(o)) { return Loaded::wrong_type; }
    h = PyFloat_AsDouble(o);
    if (h == -1.0 && PyErr_Occurred())
    {
      PyErr_Clear();
      return Loaded::wrong_type;
    }
    return Loaded::ok;
  }
};
template <>
struct EagerArg<const std::string&> {
  using Held = std::string;
  static constexpr const char* expected = "a str";
  static Loaded load(PyObject* o, Held& h)
  {
    if (!PyUnicode_Check(o)) { return Loaded::wrong_type; }
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(o, &size);
    if (!utf8)
    {
      PyErr_Clear();
      return Loaded::wrong_type;
    }
    h.assign(utf8, static_cast<std::size_t>(size));
    return Loaded::ok;
  }
};

template <auto Fn>
struct EagerCall;
template <class... Args, void (*Fn)(Args...)>
struct EagerCall<Fn> {
  static constexpr Py_ssize_t arity = sizeof...(Args);
  using Held = std::tuple<typename EagerArg<Args>::Held...>;

  /// A METH_FASTCALL function: exactly the operator's arguments, by position (pagedattn.ops and
  /// pagedattn.decode pass them so). Returns None, or NotImplemented for a call the dispatcher must see.
  static PyObject* call(PyObject*, PyObject* const* args, Py_ssize_t nargs)
  {
    if (nargs != arity)
    {
      PyErr_Format(PyExc_TypeError, "pagedattn: the eager call takes %zd arguments, got %zd", arity, nargs);
      return nullptr;
    }
    if (c10::impl::TorchDispatchModeTLS::stack_len() > 0 || at::impl::torch_function_mode_enabled()) { Py_RETURN_NOTIMPLEMENTED; }
    Held held;
    const Loaded loaded = load(args, held, std::index_sequence_for<Args...>{});
    if (loaded == Loaded::wrong_type) { return nullptr; }
    if (loaded == Loaded::for_the_dispatcher) { Py_RETURN_NOTIMPLEMENTED; }
    try
    {
      std::apply(Fn, held);
    }
    catch (const c10::ValueError& e)
    {
      PyErr_SetString(PyExc_ValueError, e.what_without_backtrace());
      return nullptr;
    }
    catch (const c10::Error& e)
    {
      PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
      return nullptr;
    }
    catch (const std::exception& e)
    {
      PyErr_SetString(PyExc_RuntimeError, e.what());
      return nullptr;
    }
    Py_RETURN_NONE;
  }

private:
  /// Every argument read; a wrong type is raised (TypeError with its position) before any deferral.
  template <std::size_t... I>
  static Loaded load(PyObject* const* args, Held& held, std::index_sequence<I...>)
  {
    const Loaded loaded[] = {EagerArg<Args>::load(args[I], std::get<I>(held))...};
    const char* const expected[] = {EagerArg<Args>::expected...};
    Loaded result = Loaded::ok;
    for (std::size_t i = 0; i < sizeof...(Args); ++i)
    {
      if (loaded[i] == Loaded::wrong_type)
      {
        PyErr_Format(PyExc_TypeError, "pagedattn: argument %zu must be %s, got %s", i, expected[i], Py_TYPE(args[i])->tp_name);
        return Loaded::wrong_type;
      }
      if (loaded[i] == Loaded::for_the_dispatcher) { result = Loaded::for_the_dispatcher; }
    }
    return result;
  }
};

template <auto Fn>
PyCFunction eager_function()
{
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&EagerCall<Fn>::call));
}

#if defined(PAGEDATTN_OP_PROBES) // bench_ops's breakdown of the eager call's host time (not in a normal build)
void probe_noop_v2(at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                   const at::Tensor&, int64_t, double, const at::Tensor&, const at::Tensor&, int64_t, int64_t,
                   const c10::optional<at::Tensor>&, const std::string&, double, double, int64_t, int64_t, int64_t, int64_t, int64_t)
{
}
#endif

} // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)
{
  m.doc() = "pagedattn's operators, registered as torch.ops.pagedattn when imported; the eager entry points";
  static PyMethodDef eager_methods[] = {
      {"paged_attention_v1_eager", eager_function<&paged_attention_v1>(), METH_FASTCALL, "torch.ops.pagedattn.paged_attention_v1's function"},
      {"paged_attention_v2_eager", eager_function<&paged_attention_v2>(), METH_FASTCALL, "torch.ops.pagedattn.paged_attention_v2's function"},
      {"decode_eager", eager_function<&decode>(), METH_FASTCALL, "torch.ops.pagedattn.decode's function"},
#if defined(PAGEDATTN_OP_PROBES)
      {"_probe_noop_v2", eager_function<&probe_noop_v2>(), METH_FASTCALL, "reads v2's arguments, does nothing"},
#endif
      {nullptr, nullptr, 0, nullptr}};
  if (PyModule_AddFunctions(m.ptr(), eager_methods) != 0) { throw pybind11::error_already_set(); }
#if defined(PAGEDATTN_OP_PROBES)
  m.def("_probe_pybind_v2", &paged_attention_v2); // the same call through pybind11's argument casters
  m.def("_probe_skip_launch", [](bool skip) { pagedattn_torch::probe_skip_launch = skip; });
#endif
}
#endif

TORCH_LIBRARY(pagedattn, m)
{
  m.def("paged_attention_v1(Tensor(a!) out, Tensor query, Tensor key_cache, Tensor value_cache, int num_kv_heads, float scale, "
        "Tensor block_tables, Tensor seq_lens, int block_size, int max_seq_len, Tensor? alibi_slopes, str kv_cache_dtype, "
        "float k_scale, float v_scale, int tp_rank=0, int blocksparse_local_blocks=0, int blocksparse_vert_stride=0, "
        "int blocksparse_block_size=64, int blocksparse_head_sliding_step=0) -> ()");
  m.def("paged_attention_v2(Tensor(a!) out, Tensor exp_sums, Tensor max_logits, Tensor tmp_out, Tensor query, Tensor key_cache, "
        "Tensor value_cache, int num_kv_heads, float scale, Tensor block_tables, Tensor seq_lens, int block_size, int max_seq_len, "
        "Tensor? alibi_slopes, str kv_cache_dtype, float k_scale, float v_scale, int tp_rank=0, int blocksparse_local_blocks=0, "
        "int blocksparse_vert_stride=0, int blocksparse_block_size=64, int blocksparse_head_sliding_step=0) -> ()");
  m.def("decode(Tensor(a!) out, Tensor query, Tensor key_cache, Tensor value_cache, Tensor block_tables, Tensor seq_lens, float scale, "
        "int max_seq_len, Tensor? alibi_slopes, float logits_soft_cap=0.0, Tensor? sinks=None, int window_left=-1, "
        "int q_len=1, Tensor? query_start_loc=None) -> ()");
}

TORCH_LIBRARY_IMPL(pagedattn, CUDA, m)
{
  m.impl("paged_attention_v1", &paged_attention_v1);
  m.impl("paged_attention_v2", &paged_attention_v2);
  m.impl("decode", &decode);
}

// CPU tensors reach the same checks, which say which argument must be on the GPU.
TORCH_LIBRARY_IMPL(pagedattn, CPU, m)
{
  m.impl("paged_attention_v1", &paged_attention_v1);
  m.impl("paged_attention_v2", &paged_attention_v2);
  m.impl("decode", &decode);
}

TORCH_LIBRARY_IMPL(pagedattn, Meta, m)
{
  m.impl("paged_attention_v1", &paged_attention_v1_meta);
  m.impl("paged_attention_v2", &paged_attention_v2_meta);
  m.impl("decode", &decode_meta);
}
