#pragma once
// dispatch_paged_attention: validates the arguments, picks the tuning policy (per compute capability),
// the head size instantiation, the GQA head tiling and the path (single partition or partitioned with the
// single-pass combine), sizes the temporary storage and launches.
#include <pagedattn/agent/agent_paged_attention.cuh>
#include <pagedattn/device/dispatch/tuning/tuning_paged_attention.cuh>
#include <pagedattn/util_error.cuh>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

namespace pagedattn {

/// Arguments of one decode step, as vLLM passes them (all pointers on the device, strides in elements).
template <class T>
struct DecodeArguments {
  T* output = nullptr;                 ///< [num_seqs][num_heads][head_size] (strides below)
  std::int64_t output_seq_stride = 0;  ///< 0: num_heads * head_size
  std::int64_t output_head_stride = 0; ///< 0: head_size
  const T* query = nullptr;            ///< [num_seqs][num_heads][head_size]
  std::int64_t query_seq_stride = 0;   ///< 0: num_heads * head_size
  std::int64_t query_head_stride = 0;  ///< 0: head_size
  const T* key_cache = nullptr;        ///< [num_blocks][num_kv_heads][head_size / x][block_size][x], x = 16 / sizeof(T)
  const T* value_cache = nullptr;      ///< [num_blocks][num_kv_heads][head_size][block_size]
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
  unsigned* error_count = nullptr;     ///< optional: +1 per segment with a bad seq_len (its partition-0 block),
                                       ///< +1 per thread block that met a block id outside the cache
  int partition_tokens = 0;            ///< 0: chosen per launch to fill the GPU; else fixed (a multiple of 32, at
                                       ///< most partition_token_limit of the policy): then a sequence's output
                                       ///< does not depend on the rest of the batch, bit for bit
};

/// Head sizes the library supports (and instantiates by default).
using SupportedHeadDims = std::integer_sequence<int, 64, 80, 96, 112, 128, 192, 256>;
/// Cache block sizes the library supports.
inline constexpr int supported_block_sizes[] = {8, 16, 32};
/// GQA heads computed by one thread block at most; larger groups are split into tiles.
inline constexpr int max_heads_per_block = 8;

namespace detail {

template <class T, int HeadDim, int MaxHeads, class PolicyChain>
__global__ void __launch_bounds__(PolicyChain::device_policy::block_threads, PolicyChain::device_policy::min_blocks_per_sm)
paged_attention_kernel(const PagedAttentionParams<T> params)
{
  using Agent = AgentPagedAttention<T, HeadDim, MaxHeads, typename PolicyChain::device_policy>;
  // Dynamic shared memory: the tensor-core pipeline's stages exceed the 48 KB of static storage. (128-byte
  // aligned: the stages at its start need it, see PartitionFoldTensorCore::TempStorage.)
  extern __shared__ __align__(128) unsigned char paged_attention_smem[];
  Agent(*reinterpret_cast<typename Agent::TempStorage*>(paged_attention_smem), params).Run();
  PAGEDATTN_TRACE_POINT(7);
}

/// The init pass of a look-back launch: zeroes the ticket, arrival counters and status words. It lets
/// the decode kernel start at once (programmatic dependent launch, sm_90): the decode waits for this
/// grid's completion only where it first touches those words (before the ticket, or before its arrival).
template <class Word>
__global__ void reset_partition_state_kernel(Word* words, std::size_t count)
{
  arch::launch_dependents();
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count; i += std::size_t(gridDim.x) * blockDim.x) { words[i] = 0; }
}

/// Shared memory of one thread block (for the policies' budget checks and the launch).
template <class T, int HeadDim, int MaxHeads, class Policy>
constexpr std::size_t paged_attention_smem_bytes() { return sizeof(typename AgentPagedAttention<T, HeadDim, MaxHeads, Policy>::TempStorage); }

inline bool is_supported_block_size(int b) { return b == 8 || b == 16 || b == 32; }

template <int... HeadDims>
std::string list_head_dims(std::integer_sequence<int, HeadDims...>)
{
  std::string s;
  ((s += (s.empty() ? "" : ", ") + std::to_string(HeadDims)), ...);
  return s;
}

template <int... HeadDims>
bool contains_head_dim(std::integer_sequence<int, HeadDims...>, int h) { return ((h == HeadDims) || ...); }

/// How a KV head's group of query heads is split over thread blocks.
struct HeadTiling {
  int head_tiles;     ///< blocks per (sequence, KV head, partition)
  int heads_per_tile; ///< query heads per block (the last tile may have fewer)
  int max_heads;      ///< the kernel instantiation: 1, 4 or 8
};
inline HeadTiling head_tiling(int gqa_ratio)
{
  const int tiles = (gqa_ratio + max_heads_per_block - 1) / max_heads_per_block;
  const int per_tile = (gqa_ratio + tiles - 1) / tiles;
  return {tiles, per_tile, per_tile == 1 ? 1 : per_tile <= 4 ? 4 : 8};
}

/// Host-side checks; every failure names the argument.
template <class T, class HeadDims>
cudaError_t validate(const DecodeArguments<T>& a)
{
  auto bad = [](const std::string& what) { return fail(cudaErrorInvalidValue, "pagedattn::Decode: " + what); };
  if (a.num_seqs < 0) { return bad("num_seqs must be >= 0, got " + std::to_string(a.num_seqs)); }
  if (a.max_seq_len < 0) { return bad("max_seq_len must be >= 0, got " + std::to_string(a.max_seq_len)); }
  if (!contains_head_dim(HeadDims{}, a.head_size))
  {
    return bad("head_size " + std::to_string(a.head_size) + " is not supported (supported: " + list_head_dims(HeadDims{}) + ")");
  }
  if (!is_supported_block_size(a.block_size)) { return bad("block_size " + std::to_string(a.block_size) + " is not supported (8, 16, 32)"); }
  if (a.num_kv_heads < 1) { return bad("num_kv_heads must be >= 1, got " + std::to_string(a.num_kv_heads)); }
  if (a.num_heads < 1 || a.num_heads % a.num_kv_heads != 0)
  {
    return bad("num_heads (" + std::to_string(a.num_heads) + ") must be a positive multiple of num_kv_heads (" +
               std::to_string(a.num_kv_heads) + ")");
  }
  if (a.max_blocks_per_seq < 1) { return bad("max_blocks_per_seq must be >= 1"); }
  if (a.num_blocks < 1) { return bad("num_blocks must be >= 1"); }
  if (static_cast<std::int64_t>(a.max_seq_len) > static_cast<std::int64_t>(a.max_blocks_per_seq) * a.block_size)
  {
    return bad("max_seq_len (" + std::to_string(a.max_seq_len) + ") exceeds max_blocks_per_seq * block_size");
  }
  if (!(a.scale == a.scale) || a.scale == INFINITY || a.scale == -INFINITY) { return bad("scale must be finite"); }
  if (a.partition_tokens < 0) { return bad("partition_tokens must be >= 0 (0: automatic), got " + std::to_string(a.partition_tokens)); }
  if (a.num_seqs == 0) { return cudaSuccess; }
  if (!a.output) { return bad("output is null"); }
  if (!a.query) { return bad("query is null"); }
  if (!a.key_cache) { return bad("key_cache is null"); }
  if (!a.value_cache) { return bad("value_cache is null"); }
  if (!a.block_tables) { return bad("block_tables is null"); }
  if (!a.seq_lens) { return bad("seq_lens is null"); }
  if (reinterpret_cast<std::uintptr_t>(a.key_cache) % 16) { return bad("key_cache must be 16-byte aligned"); }
  if (reinterpret_cast<std::uintptr_t>(a.value_cache) % 16) { return bad("value_cache must be 16-byte aligned"); }
  if (a.query_head_stride < 0 || a.query_seq_stride < 0) { return bad("query strides must be >= 0"); }
  if (a.output_head_stride < 0 || a.output_seq_stride < 0) { return bad("output strides must be >= 0"); }
  return cudaSuccess;
}

/// How the decode kernel is launched.
struct LaunchShape {
  unsigned grid;
  unsigned* state_words;   ///< the partition state a look-back launch's init pass zeroes (null: not partitioned)
  std::size_t state_count; ///< its words
  bool early_start;        ///< the device has programmatic dependent launch (sm_90): start during the init pass
  bool one_wave_plan;      ///< partitioned, and no segment has more partitions than the one-wave combine takes
  int sm_count;
  bool cooperative_launch; ///< the device supports cooperative launches
};

/// The init pass of a partitioned look-back launch, in the stream (so graphs capture it): ticket,
/// arrival counters and statuses back to zero.
inline cudaError_t reset_partition_state(const LaunchShape& shape, cudaStream_t stream)
{
  const std::size_t blocks = (shape.state_count + 255) / 256;
  reset_partition_state_kernel<<<static_cast<unsigned>(blocks < 1024 ? blocks : 1024), 256, 0, stream>>>(shape.state_words, shape.state_count);
  return check_cuda(cudaGetLastError(), "reset_partition_state_kernel launch");
}

/// Whether a policy lets one-wave launches combine by AgentSliceCombine (Policy::one_wave_combine; off
/// when the policy does not say).
template <class Policy, class = void>
inline constexpr bool policy_one_wave_combine = false;
template <class Policy>
inline constexpr bool policy_one_wave_combine<Policy, std::void_t<decltype(Policy::one_wave_combine)>> = Policy::one_wave_combine;

/// Make `smem` bytes of dynamic shared memory available to `kernel`, or fail (naming the policy and the
/// head size) when the device offers less; nothing is launched then. No size is assumed: BI-V100's limit
/// is read from the device (CoreX offers no opt-in beyond it); NVIDIA GPUs since sm_70 give every kernel
/// 48 KB and more on opt-in, up to cudaDevAttrMaxSharedMemoryPerBlockOptin.
template <class Kernel>
cudaError_t reserve_shared_memory(Kernel kernel, std::size_t smem, const char* policy_name, int head_dim)
{
#if defined(__ILUVATAR__)
  constexpr bool needs_opt_in = false;
  constexpr cudaDeviceAttr limit_attribute = cudaDevAttrMaxSharedMemoryPerBlock;
#else
  const bool needs_opt_in = smem > 48 * 1024;
  if (!needs_opt_in) { return cudaSuccess; }
  constexpr cudaDeviceAttr limit_attribute = cudaDevAttrMaxSharedMemoryPerBlockOptin;
#endif
  int device = 0, limit = 0;
  PAGEDATTN_RETURN_IF_ERROR(check_cuda(cudaGetDevice(&device), "cudaGetDevice"));
  PAGEDATTN_RETURN_IF_ERROR(check_cuda(cudaDeviceGetAttribute(&limit, limit_attribute, device), "cudaDeviceGetAttribute(shared memory per block)"));
  if (static_cast<std::size_t>(limit) < smem)
  {
    return fail(cudaErrorInvalidConfiguration, std::string("pagedattn::Decode: policy ") + policy_name + " needs " + std::to_string(smem) +
                                                   " bytes of shared memory per block, the device allows " + std::to_string(limit) +
                                                   " (head_size " + std::to_string(head_dim) + ")");
  }
  if (!needs_opt_in) { return cudaSuccess; }
  return check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
                    "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
}

template <class T, class PolicyChain, class Policy, int HeadDim, int MaxHeads>
cudaError_t launch(const PagedAttentionParams<T>& base_params, LaunchShape shape, cudaStream_t stream)
{
  using Agent = AgentPagedAttention<T, HeadDim, MaxHeads, Policy>;
  constexpr std::size_t smem = paged_attention_smem_bytes<T, HeadDim, MaxHeads, Policy>();
  auto kernel = paged_attention_kernel<T, HeadDim, MaxHeads, PolicyChain>;
  PagedAttentionParams<T> params = base_params;
  PAGEDATTN_RETURN_IF_ERROR(reserve_shared_memory(kernel, smem, Policy::name, HeadDim));
#if defined(__ILUVATAR__)
  if (shape.state_words) { PAGEDATTN_RETURN_IF_ERROR(reset_partition_state(shape, stream)); }
  kernel<<<shape.grid, Policy::block_threads, smem, stream>>>(params);
  return check_cuda(cudaGetLastError(), "paged_attention_kernel launch");
#else
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(shape.grid);
  config.blockDim = dim3(Policy::block_threads);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  config.attrs = &attribute;

  // One wave: when every block of the grid can be resident at once, a cooperative launch guarantees it,
  // and the blocks combine by slices after a grid barrier (AgentSliceCombine) instead of by look-back.
  // Its barrier is the runtime's, so it needs no init pass.
  if constexpr (Agent::one_wave_capable && policy_one_wave_combine<Policy>)
  {
    if (shape.one_wave_plan && shape.cooperative_launch)
    {
      int resident = 0;
      PAGEDATTN_RETURN_IF_ERROR(check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, Policy::block_threads, smem),
                                           "cudaOccupancyMaxActiveBlocksPerMultiprocessor"));
      if (shape.grid <= static_cast<unsigned>(resident) * static_cast<unsigned>(shape.sm_count))
      {
        params.one_wave_combine = true;
        params.use_tickets = false; // nobody waits on a block that has not started: the barrier is cooperative
        attribute.id = cudaLaunchAttributeCooperative;
        attribute.val.cooperative = 1;
        config.numAttrs = 1;
        const cudaError_t e = cudaLaunchKernelEx(&config, kernel, params);
        if (e != cudaErrorCooperativeLaunchTooLarge) { return check_cuda(e, "paged_attention_kernel launch (cooperative)"); }
        // Another context holds part of the GPU: nothing ran; combine by look-back instead.
        (void)cudaGetLastError();
        params = base_params;
      }
    }
  }
  if (shape.state_words) { PAGEDATTN_RETURN_IF_ERROR(reset_partition_state(shape, stream)); }
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.numAttrs = shape.state_words && shape.early_start ? 1 : 0;
  return check_cuda(cudaLaunchKernelEx(&config, kernel, params), "paged_attention_kernel launch");
#endif
}

/// Kernel instantiations per head size: 1, 4 and 8 heads for the CUDA-core tile; the tensor-core tile
/// always computes 8 heads (the mma's n), so one instantiation serves every group.
template <class T, class PolicyChain, class Policy, int HeadDim>
cudaError_t launch_heads(int max_heads, const PagedAttentionParams<T>& params, LaunchShape shape, cudaStream_t stream)
{
  if constexpr (uses_tensor_cores<T, Policy>) { return launch<T, PolicyChain, Policy, HeadDim, 8>(params, shape, stream); }
  else
  {
    if (max_heads == 1) { return launch<T, PolicyChain, Policy, HeadDim, 1>(params, shape, stream); }
    if (max_heads == 4) { return launch<T, PolicyChain, Policy, HeadDim, 4>(params, shape, stream); }
    return launch<T, PolicyChain, Policy, HeadDim, 8>(params, shape, stream);
  }
}

template <class T, class PolicyChain, class Policy, int... HeadDims>
cudaError_t launch_head_dim(std::integer_sequence<int, HeadDims...>, int head_size, int max_heads, const PagedAttentionParams<T>& params,
                            LaunchShape shape, cudaStream_t stream)
{
  cudaError_t result = cudaErrorInvalidValue; // validate() has checked head_size against HeadDims
  ((head_size == HeadDims ? (result = launch_heads<T, PolicyChain, Policy, HeadDims>(max_heads, params, shape, stream), 0) : 0), ...);
  return result;
}

/// Shapes the launch derives from the arguments and the policy.
struct DecodePlan {
  int partition_tokens;
  int max_partitions;
  HeadTiling tiling;
  std::size_t num_segments;
  bool partitioned; ///< more than one partition possible: tickets, statuses, look-back
  PartitionTileLayout layout;
  std::size_t temp_bytes;
};

/// Longest partition of a policy at a cache block size: max_partition_tokens, and no more than the
/// policy_max_partition_blocks cache blocks whose table entries a thread block stages (sm_80, sm_90: 4096 tokens,
/// 2048 at block size 8). A multiple of 32 for every supported block size.
template <class Policy>
constexpr int partition_token_limit(int block_size)
{
  const long long by_blocks = static_cast<long long>(policy_max_partition_blocks<Policy>) * block_size;
  return by_blocks < Policy::max_partition_tokens ? static_cast<int>(by_blocks) / 32 * 32 : Policy::max_partition_tokens;
}

/// The caller's partition size against the policy (validate() has checked that it is >= 0 and the block size).
template <class Policy, class T>
cudaError_t validate_partition_tokens(const DecodeArguments<T>& a)
{
  const int limit = partition_token_limit<Policy>(a.block_size);
  if (a.partition_tokens == 0 || (a.partition_tokens % 32 == 0 && a.partition_tokens <= limit)) { return cudaSuccess; }
  return fail(cudaErrorInvalidValue, "pagedattn::Decode: partition_tokens " + std::to_string(a.partition_tokens) +
                                         " must be 0 (automatic) or a multiple of 32 in [32, " + std::to_string(limit) +
                                         "] (policy " + Policy::name + ", block_size " + std::to_string(a.block_size) + ")");
}

/// Smallest automatic partition: one 32-token tile, so that a short sequence spreads over as many blocks
/// as fill the GPU (1x1000 at 24/4 heads: 128 blocks of one tile, measured 0.5 µs faster than 64 blocks
/// of two, bench/NOTES.md v19).
inline constexpr int min_auto_partition_tokens = 32;

/// A thread block's fixed cost (sequence length and block ids, the first tile's round trip, its part of
/// the combine; ~4 µs on H200) in bytes of K and V that it could have streamed meanwhile at its share of
/// the bandwidth (4.2 TB/s over 264 blocks: ~16 GB/s, so ~64 KB). bench/NOTES.md v20-v21.
inline constexpr std::size_t block_fixed_cost_bytes = 64 * 1024;

/// Partition size of a launch: the caller's, or the multiple of 32 in [32, partition_token_limit] that
/// minimises the modelled time: waves x (partition tokens + a block's fixed cost in tokens), where a wave
/// is sm_count x min_blocks_per_sm blocks and a launch has num_segments x ceil(max_seq_len / partition)
/// blocks. Ties go to the longer partition (fewer partials to combine). On 132 SMs at block size 16:
/// - when one wave can hold the longest sequence, the shortest partition that keeps the grid to one wave:
///   1x100000 at 24/4 heads gets 66 partitions of 1536 tokens per KV head (264 blocks), at 32/8 heads 33
///   of 3040 (264 blocks); 1x1000 32 of 32 tokens; 8x32768 8 of 4096 (256 blocks);
/// - otherwise whole waves of partitions as long as possible: a large batch keeps whole sequences of up to
///   4096 tokens per block and no combine (64x4096: 256 or 512 blocks), where 2048-token halves would
///   cost each block a second prologue and the launch a combine (bench/NOTES.md v21).
template <class Policy, class T>
int choose_partition_tokens(const DecodeArguments<T>& a, std::size_t num_segments, int sm_count)
{
  if (a.partition_tokens > 0) { return a.partition_tokens; }
  const std::size_t wave = static_cast<std::size_t>(sm_count > 0 ? sm_count : 1) * Policy::min_blocks_per_sm;
  const std::size_t segments = num_segments > 0 ? num_segments : 1;
  const std::size_t length = static_cast<std::size_t>(a.max_seq_len > 0 ? a.max_seq_len : 1);
  const std::size_t token_bytes = 2 * static_cast<std::size_t>(a.head_size > 0 ? a.head_size : 1) * sizeof(T);
  const std::size_t fixed_tokens = (block_fixed_cost_bytes + token_bytes - 1) / token_bytes;
  const std::size_t smallest = min_auto_partition_tokens;
  const std::size_t whole = (length + 31) / 32 * 32; // one partition holds the longest sequence
  const std::size_t limit = static_cast<std::size_t>(partition_token_limit<Policy>(a.block_size));
  const std::size_t longest = whole < limit ? whole : limit;
  std::size_t best = longest;
  std::size_t best_cost = ~std::size_t{0};
  for (std::size_t tokens = longest; tokens >= smallest; tokens -= 32)
  {
    const std::size_t blocks = segments * ((length + tokens - 1) / tokens);
    const std::size_t cost = (blocks + wave - 1) / wave * (tokens + fixed_tokens);
    if (cost < best_cost) { best_cost = cost; best = tokens; }
  }
  return static_cast<int>(best);
}

template <class Policy, class T>
DecodePlan make_plan(const DecodeArguments<T>& a, int sm_count)
{
  DecodePlan plan{};
  plan.tiling = head_tiling(a.num_heads / a.num_kv_heads);
  plan.num_segments = static_cast<std::size_t>(a.num_seqs) * a.num_kv_heads * plan.tiling.head_tiles;
  plan.partition_tokens = choose_partition_tokens<Policy>(a, plan.num_segments, sm_count);
  plan.max_partitions = a.max_seq_len <= 0 ? 1 : (a.max_seq_len + plan.partition_tokens - 1) / plan.partition_tokens;
  plan.partitioned = plan.max_partitions > 1;
  plan.layout = PartitionTileLayout(plan.partitioned ? plan.num_segments : 0, plan.max_partitions, plan.tiling.heads_per_tile,
                                    a.head_size);
  plan.temp_bytes = plan.partitioned ? plan.layout.total_bytes : 16; // never 0, so a real allocation exists
  return plan;
}

template <class T, class PolicyChain = DefaultPagedAttentionPolicies, class HeadDims = SupportedHeadDims>
cudaError_t dispatch_paged_attention(void* d_temp_storage, std::size_t& temp_storage_bytes, const DecodeArguments<T>& a,
                                     cudaStream_t stream)
{
  PAGEDATTN_RETURN_IF_ERROR((validate<T, HeadDims>(a)));
  int device = 0, major = 0, minor = 0;
  PAGEDATTN_RETURN_IF_ERROR(check_cuda(cudaGetDevice(&device), "cudaGetDevice"));
  PAGEDATTN_RETURN_IF_ERROR(check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute"));
  PAGEDATTN_RETURN_IF_ERROR(check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "cudaDeviceGetAttribute"));

  int sm_count = 0, cooperative = 0;
  PAGEDATTN_RETURN_IF_ERROR(check_cuda(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute"));
#if !defined(__ILUVATAR__) // BI-V100 has no cooperative launches (the launch never asks for one): no query
  PAGEDATTN_RETURN_IF_ERROR(check_cuda(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device), "cudaDeviceGetAttribute"));
#endif

  return PolicyChain::invoke(major * 10 + minor, [&](auto policy) -> cudaError_t {
    using Policy = decltype(policy);
    PAGEDATTN_RETURN_IF_ERROR((validate_partition_tokens<Policy>(a)));
    const DecodePlan plan = make_plan<Policy>(a, sm_count);
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
    const std::size_t grid = plan.num_segments * plan.max_partitions;
    if (grid > 0x7fffffffu) { return fail(cudaErrorInvalidValue, "pagedattn::Decode: too many thread blocks (num_seqs * heads * partitions)"); }

    PagedAttentionParams<T> p{};
    p.query = a.query;
    p.query_seq_stride = a.query_seq_stride ? a.query_seq_stride : std::int64_t(a.num_heads) * a.head_size;
    p.query_head_stride = a.query_head_stride ? a.query_head_stride : a.head_size;
    p.key_cache = a.key_cache;
    p.value_cache = a.value_cache;
    p.num_blocks = a.num_blocks;
    p.block_tables = a.block_tables;
    p.max_blocks_per_seq = a.max_blocks_per_seq;
    p.seq_lens = a.seq_lens;
    p.max_seq_len = a.max_seq_len;
    p.num_kv_heads = a.num_kv_heads;
    p.block_size = a.block_size;
    p.scale = a.scale;
    p.alibi_slopes = a.alibi_slopes;
    p.output = a.output;
    p.output_seq_stride = a.output_seq_stride ? a.output_seq_stride : std::int64_t(a.num_heads) * a.head_size;
    p.output_head_stride = a.output_head_stride ? a.output_head_stride : a.head_size;
    p.error_count = a.error_count;
    p.heads_per_tile = plan.tiling.heads_per_tile;
    p.head_tiles = plan.tiling.head_tiles;
    p.gqa_ratio = a.num_heads / a.num_kv_heads;
    p.partition_tokens = plan.partition_tokens;
    p.max_partitions = plan.max_partitions;
    p.use_tickets = plan.partitioned && plan.layout.max_groups > 1;
    p.state = PartitionTileState::bind(d_temp_storage, plan.layout);

    const bool one_wave_plan = plan.partitioned && plan.max_partitions <= one_wave_max_partitions;
    const LaunchShape shape{static_cast<unsigned>(grid),
                            plan.partitioned ? static_cast<unsigned*>(d_temp_storage) : nullptr,
                            plan.partitioned ? plan.layout.reset_bytes / sizeof(unsigned) : 0,
                            major >= 9,
                            one_wave_plan,
                            sm_count,
                            cooperative != 0};
    return launch_head_dim<T, PolicyChain, Policy>(HeadDims{}, a.head_size, plan.tiling.max_heads, p, shape, stream);
  });
}

} // namespace detail
} // namespace pagedattn
