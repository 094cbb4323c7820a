// Compiled, never run, by a compile check (PAGEDATTN_COMPILE_CHECK, as CI builds: the GPU tests to sm_90's
// PTX alone, without device optimisation), for each of the project's architectures: this unit keeps every
// architecture's code building through the optimising front end and ptxas, so that the inline PTX of each
// path is assembled for sm_80 and sm_90. It instantiates one decode kernel per fold, staging, query and cache
// type and cache layout that the default policies take there (a kernel's other rows and its plain or
// persistent grid change its control flow, not its instructions: one of each is here), and the BI-V100
// policy's: the tensor-core folds at heads 96 (token rows that are not whole 128-byte spans), 120 (a head
// carried in a 128-wide tile: its key padding's copies and stores) and 256, in 8 and 32 rows; the CUDA-core
// fold (fp32, fp8 below sm_90, fp32 over fp8, BI-V100) at one head size each.
#include <pagedattn/pagedattn.cuh>

namespace {

using Default = pagedattn::DefaultPagedAttentionPolicies;
using BIV100 = pagedattn::SinglePolicyChain<pagedattn::PagedAttentionPolicyBIV100>;
using Vllm = pagedattn::VllmKvLayout;
using TokenRows = pagedattn::TokenRowsKvLayout;

template <class T, int HeadDim, int Rows, class KvT, class KvLayout, class Chain, class Policy, bool Persistent, bool QueryOffsets>
const void* kernel_of()
{
  return reinterpret_cast<const void*>(
      pagedattn::detail::DecodeKernel<pagedattn::DecodeTraits<T, HeadDim, Rows, Policy, KvT, KvLayout>, Chain, Persistent, QueryOffsets>::function());
}

/// One configuration's kernel under each policy of the default chain, as the dispatch instantiates them (the
/// policy of the architecture compiled has a body, the other traps), or under the BI-V100 policy alone.
template <class T, int HeadDim, int Rows, class KvT = T, class KvLayout = Vllm, class Chain = Default, bool Persistent = true,
          bool QueryOffsets = false>
struct Kernels {
  const void* sm80 = kernel_of<T, HeadDim, Rows, KvT, KvLayout, Chain, pagedattn::PagedAttentionPolicySm80, Persistent, QueryOffsets>();
  const void* sm90 = kernel_of<T, HeadDim, Rows, KvT, KvLayout, Chain, pagedattn::PagedAttentionPolicySm90, Persistent, QueryOffsets>();
};
template <class T, int HeadDim, int Rows>
struct Kernels<T, HeadDim, Rows, T, Vllm, BIV100, true, false> {
  const void* biv100 = kernel_of<T, HeadDim, Rows, T, Vllm, BIV100, pagedattn::PagedAttentionPolicyBIV100, true, false>();
};

} // namespace

/// Referenced, so that every kernel above is compiled (nothing calls it).
const void* every_path_compiles()
{
  using pagedattn::fp8_e4m3;
  using pagedattn::fp8_e5m2;
  static const Kernels<__half, 96, 8> fp16_96;
  static const Kernels<__half, 96, 8, __half, TokenRows> fp16_96_rows;
  static const Kernels<__half, 120, 8> fp16_120;
  static const Kernels<__half, 256, 8> fp16_256;
  static const Kernels<__half, 256, 32> fp16_256_32;
  static const Kernels<__half, 256, 32, __half, TokenRows> fp16_256_32_rows;
  static const Kernels<__half, 256, 8, __half, Vllm, Default, /*Persistent=*/false> fp16_256_plain;
  // Launches with query offsets: a kernel of their own (DecodeKernel's QueryOffsets).
  static const Kernels<__half, 256, 32, __half, Vllm, Default, /*Persistent=*/true, /*QueryOffsets=*/true> fp16_256_32_offsets;
  static const Kernels<__half, 256, 32, __half, Vllm, Default, /*Persistent=*/false, /*QueryOffsets=*/true> fp16_256_32_plain_offsets;
  static const Kernels<float, 96, 8, float, Vllm, Default, /*Persistent=*/true, /*QueryOffsets=*/true> fp32_96_offsets;
  static const Kernels<float, 96, 8> fp32_96;
  static const Kernels<float, 96, 8, float, TokenRows> fp32_96_rows;
  static const Kernels<float, 96, 8, fp8_e4m3> fp32_e4m3;
  static const Kernels<__half, 256, 8, fp8_e4m3> fp16_e4m3;
  static const Kernels<__half, 256, 32, fp8_e4m3> fp16_e4m3_32;
  static const Kernels<__half, 256, 8, fp8_e4m3, TokenRows> fp16_e4m3_rows;
#if PAGEDATTN_HAS_BF16
  static const Kernels<__nv_bfloat16, 96, 8> bf16_96;
  static const Kernels<__nv_bfloat16, 256, 32, __nv_bfloat16, TokenRows> bf16_256_32_rows;
  static const Kernels<__nv_bfloat16, 96, 8, fp8_e5m2> bf16_e5m2;
#endif
  static const Kernels<__half, 256, 8, __half, Vllm, BIV100> biv100;
  return biv100.biv100;
}
