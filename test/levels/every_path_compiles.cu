// Compiled, never run, by a compile check (PAGEDATTN_COMPILE_CHECK, as CI builds: the GPU tests to sm_90's
// PTX alone, without device optimisation), for each of the project's architectures: this unit keeps every
// architecture's code building through the optimising front end and ptxas (the inline PTX of each path is assembled: sm_80's and sm_90's). It instantiates
// every fold and staging the default policies take there, for each query and cache type and each cache
// layout, and the BI-V100 policy's configuration: the tensor-core folds at heads 96 (token rows that are
// not whole 128-byte slabs) and 256, the CUDA-core fold (fp32, fp8 below sm_90, BI-V100) at one of them
// each (its kernels, of 1, 4 and 8 heads, are the costly ones to compile).
#include <pagedattn/pagedattn.cuh>

#include <cstddef>
#include <utility>

namespace {

template <int... HeadSizes>
using Heads = std::integer_sequence<int, HeadSizes...>;

template <class HeadDims, class T, class KvT = T, class PolicyChain = pagedattn::DefaultPagedAttentionPolicies,
          class Layouts = pagedattn::SupportedCacheLayouts>
cudaError_t decode(void* temp, std::size_t& bytes)
{
  return pagedattn::DevicePagedAttention::Decode<PolicyChain, HeadDims, Layouts>(temp, bytes, pagedattn::DecodeArguments<T, KvT>{});
}

} // namespace

cudaError_t every_path_compiles(void* temp, std::size_t& bytes)
{
  using BIV100 = pagedattn::SinglePolicyChain<pagedattn::PagedAttentionPolicyBIV100>;
  const cudaError_t results[] = {
    decode<Heads<96, 256>, __half>(temp, bytes),
    decode<Heads<96>, float>(temp, bytes),
    decode<Heads<256>, __half, pagedattn::fp8_e4m3>(temp, bytes),
#if PAGEDATTN_HAS_BF16
    decode<Heads<96, 256>, __nv_bfloat16>(temp, bytes),
    decode<Heads<96>, __nv_bfloat16, pagedattn::fp8_e5m2>(temp, bytes),
#endif
    decode<Heads<256>, __half, __half, BIV100, pagedattn::VllmCacheLayout>(temp, bytes),
  };
  return results[0];
}
