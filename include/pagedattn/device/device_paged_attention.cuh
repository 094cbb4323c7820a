#pragma once
// The public entry point: paged decode attention over vLLM's KV cache, CUB style.
//
//   pagedattn::DecodeArguments<__half> args;  // pointers, shapes, strides (see dispatch/decode_arguments.cuh)
//   std::size_t bytes = 0;
//   pagedattn::DevicePagedAttention::Decode(nullptr, bytes, args);        // 1. size the temporary storage
//   cudaMalloc(&temp, bytes);
//   pagedattn::DevicePagedAttention::Decode(temp, bytes, args, stream);   // 2. run (asynchronous)
//
// No allocation, no host synchronisation, capturable in a CUDA graph. Returns cudaErrorInvalidValue with
// pagedattn::last_error_message() naming the argument for bad host-side input; see docs/api.md for the
// layouts, the device-side error handling and the determinism guarantees.
#include <pagedattn/device/dispatch/dispatch_paged_attention.cuh>

namespace pagedattn {

struct DevicePagedAttention {
  /// PolicyChain: DefaultPagedAttentionPolicies, or SinglePolicyChain<YourPolicy>.
  /// HeadDims: the head sizes to instantiate (default: all supported); others return an error.
  /// CacheLayouts: the cache layouts to instantiate (default: all; VllmCacheLayout halves the tensor-core
  /// kernels); others return an error.
  /// QueryRowForms: the query rows to instantiate (default: both; UniformQueryRows, for callers that never
  /// pass query_start_loc, halves the kernels); a launch of another form returns an error.
  /// T: query and output; KvT: the caches' elements (T, fp8_e4m3 or fp8_e5m2);
  /// OutputEpilogue, ScoreVariant: args.output_epilogue's and args.score_variant's types (each one
  /// instantiates its own kernels).
  template <class PolicyChain = DefaultPagedAttentionPolicies, class HeadDims = SupportedHeadDims,
            class CacheLayouts = SupportedCacheLayouts, class QueryRowForms = SupportedQueryRows, class T, class KvT, class OutputEpilogue,
            class ScoreVariant>
  static cudaError_t Decode(void* d_temp_storage, std::size_t& temp_storage_bytes,
                            const DecodeArguments<T, KvT, OutputEpilogue, ScoreVariant>& args, cudaStream_t stream = 0)
  {
    return detail::dispatch_paged_attention<T, PolicyChain, HeadDims, CacheLayouts, QueryRowForms, KvT, OutputEpilogue, ScoreVariant>(
        d_temp_storage, temp_storage_bytes, args, stream);
  }
};

} // namespace pagedattn
