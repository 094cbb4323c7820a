#pragma once
// DevicePagedAttention::Decode, top to bottom: check the arguments, learn the device (cached), take the
// policy of the code the device runs, plan the launch on the host (head tiling, the schedule model, the
// temporary storage for any lengths up to max_seq_len), pick the kernel instantiation and, with its
// occupancy, the persistent grid, then launch the decode (after its init pass where it may need one). Each step lives in a header
// of its own: decode_arguments.cuh (what the caller passes), decode_plan.cuh (the host-only plan),
// decode_device.cuh (device and kernel facts), kernels/decode_kernels.cuh, decode_launch.cuh (with
// decode_tensor_maps.cuh: the caches' tensor maps, for the sm_90 tensor copies).
#include <pagedattn/device/dispatch/decode_arguments.cuh>
#include <pagedattn/device/dispatch/decode_device.cuh>
#include <pagedattn/device/dispatch/decode_launch.cuh>
#include <pagedattn/device/dispatch/decode_params.cuh>
#include <pagedattn/device/dispatch/decode_plan.cuh>
#include <pagedattn/device/dispatch/tuning/tuning_paged_attention.cuh>
#include <pagedattn/util_error.cuh>
#include <pagedattn/util_type.cuh>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

namespace pagedattn {
namespace detail {

/// Whether a set of cache layouts holds one in token rows (hnd, nhd), and vLLM's.
template <CacheLayout... Layouts>
constexpr bool has_token_rows(CacheLayoutList<Layouts...>) { return ((Layouts != CacheLayout::vllm) || ...); }
template <CacheLayout... Layouts>
constexpr bool has_vllm_layout(CacheLayoutList<Layouts...>) { return ((Layouts == CacheLayout::vllm) || ...); }

/// Call f(DecodeKernel<...>{}) for the instantiation of (head_size, kernel_rows, cache_layout): kernel_rows is
/// one of the path's KernelRowCounts (head_split); cache_layout's type (agent/kv_cache_layout.cuh) is
/// instantiated only where Layouts holds that layout (HND and NHD share TokenRowsKvLayout: they differ in
/// strides only). validate_arguments() has checked head_size against HeadDims, validate_cache_layout() the layout.
template <class T, class KvT, class Variant, class PolicyChain, class Policy, bool Persistent, bool QueryOffsets, class Layouts, int... HeadDims,
          class F>
cudaError_t with_decode_kernel(std::integer_sequence<int, HeadDims...>, int head_size, int kernel_rows, CacheLayout cache_layout, F&& f)
{
  cudaError_t result = cudaErrorInvalidValue;
  auto with_layout = [&](auto head_dim, auto layout) {
    constexpr int D = decltype(head_dim)::value;
    using KvLayout = decltype(layout);
    with_one_of(KernelRowCounts<T, Policy, KvT>{}, kernel_rows, [&](auto count) {
      result = f(DecodeKernel<DecodeTraits<T, D, decltype(count)::value, Policy, KvT, KvLayout, Variant>, PolicyChain, Persistent, QueryOffsets>{});
    });
  };
  with_one_of(std::integer_sequence<int, HeadDims...>{}, head_size, [&](auto head_dim) {
    if constexpr (head_is_whole_vectors<KvT>(decltype(head_dim)::value)) // (else refused by validate_arguments)
    {
      if constexpr (has_token_rows(Layouts{}))
      {
        if (cache_layout != CacheLayout::vllm) { with_layout(head_dim, TokenRowsKvLayout{}); }
      }
      if constexpr (has_vllm_layout(Layouts{}))
      {
        if (cache_layout == CacheLayout::vllm) { with_layout(head_dim, VllmKvLayout{}); }
      }
    }
  });
  return result;
}

/// The dispatch of arguments that validate_arguments() has accepted.
template <class T, class PolicyChain, class HeadDims, class Layouts, class QueryRowForms, class KvT, class OutputEpilogue, class ScoreVariant>
cudaError_t dispatch_validated(void* d_temp_storage, std::size_t& temp_storage_bytes,
                               const DecodeArguments<T, KvT, OutputEpilogue, ScoreVariant>& a, cudaStream_t stream)
{
  using Variant = DecodeVariant<ScoreVariant, OutputEpilogue>;
  DeviceInfo device;
  PAGEDATTN_RETURN_IF_ERROR(current_device_info(device));

  return PolicyChain::invoke(device.ptx_version, [&](auto policy) -> cudaError_t {
    using Policy = decltype(policy);
    PAGEDATTN_RETURN_IF_ERROR((validate_partition_tokens<Policy>(a)));
    DecodePlan plan = make_plan<Policy>(a, device.sm_count);
    PAGEDATTN_RETURN_IF_ERROR(validate_plan(plan));
    if (d_temp_storage == nullptr)
    {
      temp_storage_bytes = plan.temp_bytes;
      return cudaSuccess;
    }
    if (temp_storage_bytes < plan.temp_bytes)
    {
      return fail(cudaErrorInvalidValue, "pagedattn::Decode: temp_storage_bytes too small: " + std::to_string(temp_storage_bytes) +
                                             " < " + std::to_string(plan.temp_bytes) + " required for these shapes");
    }
    if (a.num_seqs == 0) { return cudaSuccess; }

    auto launch = [&](auto kernel) -> cudaError_t {
      using Kernel = decltype(kernel);
      std::size_t resident = 0;
      PAGEDATTN_RETURN_IF_ERROR(Kernel::resident_blocks(device, resident));
      choose_grid(plan, resident, Kernel::cooperative_capable(device), Kernel::persistent);
      return launch_decode<Kernel>(plan, device, make_params(a, plan, d_temp_storage), Variant{a.score_variant, a.output_epilogue},
                                   d_temp_storage, stream);
    };
    // A launch captured in a graph may be replayed with any lengths under the bound: a persistent grid,
    // which never has more blocks than resident; so does a plain launch whose bound admits many waves of
    // items (loose_bound). Other plain launches: a block per item of the bound.
    // A launch with query offsets runs kernels of their own: their code in every kernel cost the latency rows
    // of launches without them 1-3 % (bench/NOTES.md, "Per-sequence query rows").
    bool capturing = false;
    PAGEDATTN_RETURN_IF_ERROR(stream_is_capturing(stream, capturing));
    const bool persistent = capturing || loose_bound(plan);
    auto with_kernel = [&](auto persistent_grid, auto query_offsets) {
      return with_decode_kernel<T, KvT, Variant, PolicyChain, Policy, decltype(persistent_grid)::value, decltype(query_offsets)::value, Layouts>(
          HeadDims{}, a.head_size, plan.head_split.kernel_rows, a.cache_layout, launch);
    };
    // validate_query_rows() has checked the launch's form against QueryRowForms.
    if constexpr (contains_query_rows(QueryRowForms{}, QueryRows::per_sequence))
    {
      if (a.query_start_loc)
      {
        return persistent ? with_kernel(std::true_type{}, std::true_type{}) : with_kernel(std::false_type{}, std::true_type{});
      }
    }
    if constexpr (contains_query_rows(QueryRowForms{}, QueryRows::uniform))
    {
      if (!a.query_start_loc)
      {
        return persistent ? with_kernel(std::true_type{}, std::false_type{}) : with_kernel(std::false_type{}, std::false_type{});
      }
    }
    return cudaErrorInvalidValue;
  });
}

template <class T, class PolicyChain = DefaultPagedAttentionPolicies, class HeadDims = SupportedHeadDims,
          class Layouts = SupportedCacheLayouts, class QueryRowForms = SupportedQueryRows, class KvT = T, class OutputEpilogue = IdentityOutputEpilogue,
          class ScoreVariant = DefaultScoreVariant>
cudaError_t dispatch_paged_attention(void* d_temp_storage, std::size_t& temp_storage_bytes,
                                     const DecodeArguments<T, KvT, OutputEpilogue, ScoreVariant>& a, cudaStream_t stream)
{
  static_assert(std::is_same_v<KvT, T> || is_fp8<KvT>, "the caches hold the query's type or an fp8 format (util_fp8.cuh)");
  PAGEDATTN_RETURN_IF_ERROR((validate_arguments<T, HeadDims>(a)));
  PAGEDATTN_RETURN_IF_ERROR((validate_cache_layout<Layouts>(a)));
  PAGEDATTN_RETURN_IF_ERROR((validate_query_rows<QueryRowForms>(a)));
  return dispatch_validated<T, PolicyChain, HeadDims, Layouts, QueryRowForms>(d_temp_storage, temp_storage_bytes, a, stream);
}


} // namespace detail
} // namespace pagedattn
