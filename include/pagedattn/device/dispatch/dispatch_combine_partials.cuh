#pragma once
// Kernels and launch logic of DeviceCombinePartials (the Level 3 primitive on its own): the single-pass
// look-back combine, and, for tests and benchmarks only (detail::), the classic two-kernel combine and the
// debug hooks (publish delays, tail timestamps), compiled into their own kernel instantiations.
#include <pagedattn/agent/agent_partition_combine.cuh>
#include <pagedattn/util_error.cuh>

#include <cstdint>
#include <string>

namespace pagedattn {
namespace detail {

/// How the partitions of a segment are merged (the facade always runs single_pass).
enum class PartitionCombineAlgorithm {
  single_pass, ///< one launch: group statuses and decoupled look-back
  two_kernel,  ///< a second launch folds the partitions (vLLM v2's scheme), for comparison
};

/// Test and benchmark hooks of the combine, honoured by the Debug instantiation of
/// dispatch_combine_partials only; the facade's kernels have no hook code.
struct CombineDebugOptions {
  unsigned max_delay_ns = 0;       ///< each block sleeps a pseudo-random 0..max before publishing
  CombineTiming* timing = nullptr; ///< [num_segments] timestamps (zeroed by the caller)
};

struct CombinePartialsParams {
  const float* partial_stats;  ///< [segments][max_partitions][heads][2]
  const float* partial_values; ///< [segments][max_partitions][heads][head_dim]
  const int* num_partitions;   ///< [segments]
  float* output;               ///< [segments][heads][head_dim]
  int num_segments;
  int max_partitions;
  int heads;
  PartitionCombineState state;
  CombineDebugOptions debug;
};

constexpr int combine_block_threads = 256;

/// Deterministic per-partial delay for the stress test (hash of the partial's index); Debug kernels only.
PAGEDATTN_DEVICE void debug_delay(unsigned max_ns, std::size_t slot)
{
  if (max_ns == 0 || threadIdx.x != 0) { return; }
  unsigned h = static_cast<unsigned>(slot) * 2654435761u;
  h ^= h >> 15;
  const unsigned long long until = arch::global_timer_ns() + h % max_ns;
  while (arch::global_timer_ns() < until) { arch::sleep_ns(100); }
}

template <int HeadDim, int MaxRows>
struct CombineStaging {
  float stats[MaxRows * 2];
  alignas(16) float values[MaxRows * HeadDim];

  /// Copy the input partial at `slot` into shared memory (all threads; ends with a barrier).
  PAGEDATTN_DEVICE void load(const CombinePartialsParams& p, std::size_t slot)
  {
    const std::size_t n = static_cast<std::size_t>(p.heads) * HeadDim;
    for (int i = threadIdx.x; i < 2 * p.heads; i += blockDim.x) { stats[i] = p.partial_stats[slot * 2 * p.heads + i]; }
    for (std::size_t i = threadIdx.x; i < n; i += blockDim.x) { values[i] = p.partial_values[slot * n + i]; }
    __syncthreads();
  }
};

struct FloatOutputWriter {
  float* segment_output;
  int head_dim;
  PAGEDATTN_DEVICE void operator()(int h, int vector, float4 value) const
  {
    reinterpret_cast<float4*>(segment_output + static_cast<std::size_t>(h) * head_dim)[vector] = value;
  }
};

/// Fill a segment's output: zeros for a segment with no partition (empty softmax), NaN for a partition
/// count outside [0, max_partitions] (never trusted to index the counters).
PAGEDATTN_DEVICE void fill_segment(float* segment_output, int n, float value)
{
  for (int i = threadIdx.x; i < n; i += blockDim.x) { segment_output[i] = value; }
}

/// A segment's partition count, or -1 when it lies outside [0, max_partitions].
PAGEDATTN_DEVICE int checked_partitions(const CombinePartialsParams& p, int segment)
{
  const int n = p.num_partitions[segment];
  return n < 0 || n > p.max_partitions ? -1 : n;
}

PAGEDATTN_DEVICE float quiet_nan() { return __int_as_float(0x7fc00000); }

template <int HeadDim, int MaxRows, bool Debug>
__global__ void __launch_bounds__(combine_block_threads) single_pass_combine_kernel(CombinePartialsParams p)
{
  using Agent = AgentPartitionCombine<HeadDim, MaxRows, combine_block_threads>;
  __shared__ typename Agent::TempStorage temp;
  __shared__ CombineStaging<HeadDim, MaxRows> own;
  __shared__ unsigned ticket;
  if (threadIdx.x == 0) { ticket = arch::atomic_fetch_add(p.state.ticket, 1u); }
  __syncthreads();
  const auto [segment, partition] = work_item_of_ticket(ticket, p.max_partitions);
  const int num_partitions = checked_partitions(p, segment);
  float* out = p.output + static_cast<std::size_t>(segment) * p.heads * HeadDim;
  if (num_partitions <= 0 && partition == 0) { fill_segment(out, p.heads * HeadDim, num_partitions == 0 ? 0.f : quiet_nan()); }
  if (partition >= num_partitions) { return; }

  const std::size_t slot = p.state.partial_index(p.state.slots(segment), partition);
  own.load(p, slot);
  if constexpr (Debug) { debug_delay(p.debug.max_delay_ns, slot); }
  Agent(temp, p.heads).Run(p.state, p.state.slots(segment), partition, num_partitions, own.stats, own.values, FloatOutputWriter{out, HeadDim},
                           Debug && p.debug.timing ? p.debug.timing + segment : nullptr);
}

template <int HeadDim, int MaxRows, bool Debug>
__global__ void __launch_bounds__(combine_block_threads) store_aggregates_kernel(CombinePartialsParams p)
{
  using Agent = AgentPartitionCombine<HeadDim, MaxRows, combine_block_threads>;
  __shared__ typename Agent::TempStorage temp;
  __shared__ CombineStaging<HeadDim, MaxRows> own;
  const int segment = blockIdx.x / p.max_partitions, partition = blockIdx.x % p.max_partitions;
  if (partition >= checked_partitions(p, segment)) { return; }
  own.load(p, blockIdx.x);
  if constexpr (Debug) { debug_delay(p.debug.max_delay_ns, blockIdx.x); }
  Agent(temp, p.heads).StoreAggregate(p.state, p.state.slots(segment), partition, own.stats, own.values);
}

template <int HeadDim, int MaxRows>
__global__ void __launch_bounds__(combine_block_threads) fold_segments_kernel(CombinePartialsParams p)
{
  using Agent = AgentPartitionCombine<HeadDim, MaxRows, combine_block_threads>;
  __shared__ typename Agent::TempStorage temp;
  const int segment = blockIdx.x;
  const int num_partitions = checked_partitions(p, segment);
  float* out = p.output + static_cast<std::size_t>(segment) * p.heads * HeadDim;
  if (num_partitions <= 0)
  {
    fill_segment(out, p.heads * HeadDim, num_partitions == 0 ? 0.f : quiet_nan());
    return;
  }
  Agent(temp, p.heads).FoldSegment(p.state, p.state.slots(segment), num_partitions, FloatOutputWriter{out, HeadDim});
}

/// The facade's work (algorithm single_pass, Debug false), and the tests' and benchmarks' entry for the
/// two-kernel comparison and, with Debug, the hooks (compiled into the Debug kernels only).
template <int HeadDim, int MaxRows, bool Debug = false>
cudaError_t dispatch_combine_partials(void* d_temp_storage, std::size_t& temp_storage_bytes, const float* d_partial_stats,
                                      const float* d_partial_values, const int* d_num_partitions, float* d_output,
                                      int num_segments, int max_partitions, int heads, PartitionCombineAlgorithm algorithm,
                                      cudaStream_t stream, const CombineDebugOptions& debug)
{
  if (!Debug && (debug.max_delay_ns != 0 || debug.timing != nullptr))
  {
    return fail(cudaErrorInvalidValue, "pagedattn::detail::dispatch_combine_partials: debug options need the Debug instantiation");
  }
  if (num_segments < 0) { return fail(cudaErrorInvalidValue, "pagedattn::DeviceCombinePartials: num_segments must be >= 0"); }
  if (max_partitions < 1) { return fail(cudaErrorInvalidValue, "pagedattn::DeviceCombinePartials: max_partitions must be >= 1"); }
  if (heads < 1 || heads > MaxRows)
  {
    return fail(cudaErrorInvalidValue, "pagedattn::DeviceCombinePartials: heads must be in [1, " + std::to_string(MaxRows) + "], got " + std::to_string(heads));
  }
  const PartitionCombineLayout layout(static_cast<std::size_t>(num_segments), max_partitions, heads, HeadDim);
  if (d_temp_storage == nullptr)
  {
    temp_storage_bytes = layout.total_bytes;
    return cudaSuccess;
  }
  if (temp_storage_bytes < layout.total_bytes)
  {
    return fail(cudaErrorInvalidValue, "pagedattn::DeviceCombinePartials: temp_storage_bytes too small: " + std::to_string(temp_storage_bytes) + " < " +
                                           std::to_string(layout.total_bytes));
  }
  if (!d_partial_stats) { return fail(cudaErrorInvalidValue, "pagedattn::DeviceCombinePartials: d_partial_stats is null"); }
  if (!d_partial_values) { return fail(cudaErrorInvalidValue, "pagedattn::DeviceCombinePartials: d_partial_values is null"); }
  if (!d_num_partitions) { return fail(cudaErrorInvalidValue, "pagedattn::DeviceCombinePartials: d_num_partitions is null"); }
  if (!d_output) { return fail(cudaErrorInvalidValue, "pagedattn::DeviceCombinePartials: d_output is null"); }
  if (reinterpret_cast<std::uintptr_t>(d_output) % 16) { return fail(cudaErrorInvalidValue, "pagedattn::DeviceCombinePartials: d_output must be 16-byte aligned"); }
  if (num_segments == 0) { return cudaSuccess; }

  CombinePartialsParams p{d_partial_stats, d_partial_values, d_num_partitions, d_output, num_segments, max_partitions, heads,
                          PartitionCombineState::bind(d_temp_storage, layout), debug};
  const unsigned blocks = static_cast<unsigned>(static_cast<std::size_t>(num_segments) * max_partitions);
  if (algorithm == PartitionCombineAlgorithm::single_pass)
  {
    // The init pass: ticket, arrival counters and statuses back to zero, in the stream (captured by CUDA
    // graphs too).
    PAGEDATTN_RETURN_IF_ERROR(check_cuda(cudaMemsetAsync(d_temp_storage, 0, layout.reset_bytes, stream), "cudaMemsetAsync(group status)"));
    single_pass_combine_kernel<HeadDim, MaxRows, Debug><<<blocks, combine_block_threads, 0, stream>>>(p);
    return check_cuda(cudaGetLastError(), "single_pass_combine_kernel launch");
  }
  store_aggregates_kernel<HeadDim, MaxRows, Debug><<<blocks, combine_block_threads, 0, stream>>>(p);
  PAGEDATTN_RETURN_IF_ERROR(check_cuda(cudaGetLastError(), "store_aggregates_kernel launch"));
  fold_segments_kernel<HeadDim, MaxRows><<<num_segments, combine_block_threads, 0, stream>>>(p);
  return check_cuda(cudaGetLastError(), "fold_segments_kernel launch");
}

} // namespace detail
} // namespace pagedattn
