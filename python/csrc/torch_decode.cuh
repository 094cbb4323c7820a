#pragma once
// The launch half of pagedattn's torch operators (torch_ops.cu has the rest: the tensors described for
// the checks, the dispatch over the types, the registration and the eager entry points): the tensors of
// one call, the op's device memory per (device, stream), the fp8 scales on the device, and
// decode_as<T, KvT>(), the launch for one pair of query and cache element types. Each pair is instantiated
// in a translation unit of its own (the extern declarations below), so that the build compiles them
// side by side: each takes minutes, torch_ops.cu seconds.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <pagedattn/pagedattn.cuh>

#include "vllm_decode_arguments.h"

#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace pagedattn_torch {

using pagedattn_python::VllmPagedAttentionArgs;

/// The one way a bad argument leaves the op: ValueError with the message that names it.
inline void throw_if_bad(const std::string& bad) { TORCH_CHECK_VALUE(bad.empty(), "pagedattn: ", bad); }

/// DevicePagedAttention::Decode with vLLM's cache layout only (the op takes vLLM's caches; the other
/// layouts' kernels would only add compile time).
template <class T, class KvT>
cudaError_t decode_vllm_layout(void* temp, std::size_t& bytes, const pagedattn::DecodeArguments<T, KvT>& a, cudaStream_t stream = 0)
{
  return pagedattn::DevicePagedAttention::Decode<pagedattn::DefaultPagedAttentionPolicies, pagedattn::SupportedHeadDims,
                                                 pagedattn::VllmCacheLayout>(temp, bytes, a, stream);
}

/// Decode's result as a Python exception: ValueError for a bad argument (cudaErrorInvalidValue, with the
/// message that names it), RuntimeError for anything else (the runtime's failure, e.g. no kernel image for
/// this GPU).
inline void check_decode(cudaError_t err)
{
  if (err == cudaSuccess) { return; }
  const std::string message = pagedattn::last_error_message();
  TORCH_CHECK_VALUE(err != cudaErrorInvalidValue, "pagedattn: ", message);
  TORCH_CHECK(false, "pagedattn: ", message, " (", cudaGetErrorString(err), ")");
}

#if defined(PAGEDATTN_OP_PROBES)
extern bool probe_skip_launch; ///< bench_ops's breakdown: every step of the call but the launch (torch_ops.cu)
#endif

/// The op's device memory on one (device, stream), kept between calls.
struct StreamStorage {
  at::Tensor temp;   ///< Decode's temporary storage (bytes), grown when a launch needs more
  at::Tensor scales; ///< fp8 caches: float32 {k_scale, v_scale}, written before each fp8 launch
};

/// Every stream's StreamStorage: one map for the whole module (an inline function's static is one object
/// in every translation unit).
struct StreamStorages {
  std::mutex mutex;
  std::map<std::pair<int, cudaStream_t>, StreamStorage> by_stream;
};
inline StreamStorages& stream_storages()
{
  static StreamStorages* const storages = new StreamStorages; // never destroyed: no CUDA frees after the runtime's teardown
  return *storages;
}

/// Runs fn(storage) with the device memory of a launch on `stream`. Outside a graph capture that is the
/// stream's own StreamStorage, kept between calls and held under a lock while fn queues its work: calls
/// on one stream run in order, so they may share it (a replaced buffer goes back to the caching
/// allocator's pool of that stream). Inside a capture it is a fresh StreamStorage whose tensors come from
/// the graph's pool, so that a replay, which may run on any stream, shares no memory with eager calls. The
/// stream's storage lives as long as the process.
template <class Fn>
void with_stream_storage(const at::Tensor& like, cudaStream_t stream, Fn&& fn)
{
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  const cudaError_t capture_err = cudaStreamIsCapturing(stream, &capture);
  TORCH_CHECK(capture_err == cudaSuccess, "pagedattn: cudaStreamIsCapturing failed (", cudaGetErrorString(capture_err), ")");
  if (capture != cudaStreamCaptureStatusNone)
  {
    StreamStorage captured; // empty: the launch sizes and takes its temporary storage from the graph's pool
    fn(captured);
    return;
  }
  StreamStorages& storages = stream_storages();
  const std::lock_guard<std::mutex> lock(storages.mutex);
  fn(storages.by_stream[{like.get_device(), stream}]);
}

/// k_scale and v_scale where the kernel reads them (DecodeArguments' k_scale/v_scale are device pointers):
/// the storage's float[2], written on `stream` just before the decode by a 1-thread kernel. A kernel's
/// arguments are captured by value, so a CUDA graph replays the scales of capture time (vLLM's are
/// per-layer constants), and an eager call's write is stream-ordered: after the previous call's decode,
/// which read the buffer, and before its own. Its cost: one tiny extra kernel per fp8 call.
const float* write_cache_scales(StreamStorage& storage, const VllmPagedAttentionArgs& v, const at::Tensor& like,
                                cudaStream_t stream); // torch_ops.cu

/// A launch with `buffer` as the temporary storage (the stream's, or a capture's: with_stream_storage()).
/// The steady call is one Decode, with the buffer's size: the library sizes the storage itself only when
/// the buffer is missing or too small (it refuses the launch, and nothing runs), and the buffer is then
/// replaced by one of the size it asks for.
template <class T, class KvT>
void launch_with_temporary_storage(const pagedattn::DecodeArguments<T, KvT>& a, at::Tensor& buffer, const at::Tensor& like,
                                   cudaStream_t stream)
{
  std::size_t bytes = 0;
  std::string refusal; // why the launch with the buffer as it is was refused
  if (buffer.defined())
  {
#if defined(PAGEDATTN_OP_PROBES)
    if (probe_skip_launch) { return; }
#endif
    bytes = static_cast<std::size_t>(buffer.numel());
    const cudaError_t err = decode_vllm_layout(buffer.data_ptr(), bytes, a, stream);
    if (err == cudaSuccess) { return; }
    if (err != cudaErrorInvalidValue) { check_decode(err); } // throws
    refusal = pagedattn::last_error_message();
  }
  std::size_t needed = 0;
  check_decode(decode_vllm_layout(nullptr, needed, a));
  if (buffer.defined() && needed <= bytes) { throw_if_bad(refusal); } // refused for another reason than its size
  buffer = at::Tensor(); // the old buffer back to the pool before the larger one is taken
  buffer = at::empty({static_cast<std::int64_t>(needed > 0 ? needed : 1)}, like.options().dtype(at::kByte));
  bytes = static_cast<std::size_t>(buffer.numel());
  check_decode(decode_vllm_layout(buffer.data_ptr(), bytes, a, stream));
}

/// The tensors of one call, for their data pointers once check() has passed.
struct CallTensors {
  const at::Tensor& out;
  const at::Tensor& query;
  const at::Tensor& key_cache;
  const at::Tensor& value_cache;
  const at::Tensor& block_tables;
  const at::Tensor& seq_lens;
  const c10::optional<at::Tensor>& alibi_slopes;
  const c10::optional<at::Tensor>& sinks; ///< pagedattn.decode only (vLLM's ops pass none)
  const c10::optional<at::Tensor>& query_start_loc; ///< pagedattn.decode only (vLLM's ops pass none)
};

/// The launch with query type T and cache element type KvT (T, or an fp8 format for kv_cache_dtype fp8*).
template <class T, class KvT>
void decode_as(VllmPagedAttentionArgs& v, const CallTensors& t)
{
  if (v.query.size[0] == 0) { return; } // no rows: nothing to write
  // check() has passed: every tensor is a CUDA tensor on the query's device with the expected dtype and
  // shape, so the data pointers are read only now.
  v.out.data = t.out.data_ptr();
  v.query.data = t.query.data_ptr();
  v.key_cache.data = t.key_cache.data_ptr();
  v.value_cache.data = t.value_cache.data_ptr();
  v.block_tables.data = t.block_tables.data_ptr();
  v.seq_lens.data = t.seq_lens.data_ptr();
  v.alibi_slopes.data = t.alibi_slopes.has_value() && t.alibi_slopes->defined() ? t.alibi_slopes->data_ptr() : nullptr;
  v.sinks.data = t.sinks.has_value() && t.sinks->defined() ? t.sinks->data_ptr() : nullptr;
  v.query_start_loc.data = t.query_start_loc.has_value() && t.query_start_loc->defined() ? t.query_start_loc->data_ptr() : nullptr;
  const c10::cuda::CUDAGuard guard(t.query.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  with_stream_storage(t.query, stream, [&](StreamStorage& storage) {
    const float* device_scales = nullptr;
    if constexpr (pagedattn::is_fp8<KvT>) { device_scales = write_cache_scales(storage, v, t.query, stream); }
    pagedattn::DecodeArguments<T, KvT> a;
    throw_if_bad(pagedattn_python::to_decode_arguments(v, a, device_scales));
    launch_with_temporary_storage(a, storage.temp, t.query, stream);
  });
}

// Every pair of query and cache types, each instantiated in a translation unit of its own
// (decode_<query>[_<format>].cu), so that the build compiles the pairs side by side.
extern template void decode_as<__half, __half>(VllmPagedAttentionArgs&, const CallTensors&);
extern template void decode_as<__nv_bfloat16, __nv_bfloat16>(VllmPagedAttentionArgs&, const CallTensors&);
extern template void decode_as<float, float>(VllmPagedAttentionArgs&, const CallTensors&);
extern template void decode_as<__half, pagedattn::fp8_e4m3>(VllmPagedAttentionArgs&, const CallTensors&);
extern template void decode_as<__half, pagedattn::fp8_e5m2>(VllmPagedAttentionArgs&, const CallTensors&);
extern template void decode_as<__nv_bfloat16, pagedattn::fp8_e4m3>(VllmPagedAttentionArgs&, const CallTensors&);
extern template void decode_as<__nv_bfloat16, pagedattn::fp8_e5m2>(VllmPagedAttentionArgs&, const CallTensors&);
extern template void decode_as<float, pagedattn::fp8_e4m3>(VllmPagedAttentionArgs&, const CallTensors&);
extern template void decode_as<float, pagedattn::fp8_e5m2>(VllmPagedAttentionArgs&, const CallTensors&);

} // namespace pagedattn_torch
