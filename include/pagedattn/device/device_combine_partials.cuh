#pragma once
// Public facade of the Level 3 primitive: merge N attention partials per segment into normalised outputs,
// with CUB's two-phase temporary storage. Usable without the attention kernel (tests, benchmarks, or a
// caller with its own partial producer).
//
//   size_t bytes = 0;
//   DeviceCombinePartials::Combine<256>(nullptr, bytes, stats, values, counts, out, segments, max_parts, heads);
//   cudaMalloc(&temp, bytes);
//   DeviceCombinePartials::Combine<256>(temp, bytes, stats, values, counts, out, segments, max_parts, heads, stream);
//
// Inputs: partial stats [segments][max_partitions][heads][2] (max_score, exp_sum), partial values
// [segments][max_partitions][heads][HeadDim] (weighted_v, unnormalised), partition counts [segments]
// (0 .. max_partitions; 0 gives a zero output). Output: [segments][heads][HeadDim], weighted_v / exp_sum.
// Deterministic: the output is the same fixed fold tree of the partitions, bit for bit the same across
// runs (and equal to the two-kernel comparison combine of detail::dispatch_combine_partials).
#include <pagedattn/device/dispatch/dispatch_combine_partials.cuh>

namespace pagedattn {

struct DeviceCombinePartials {
  template <int HeadDim, int MaxRows = 8>
  static cudaError_t Combine(void* d_temp_storage, std::size_t& temp_storage_bytes, const float* d_partial_stats,
                             const float* d_partial_values, const int* d_num_partitions, float* d_output, int num_segments,
                             int max_partitions, int heads, cudaStream_t stream = 0)
  {
    return detail::dispatch_combine_partials<HeadDim, MaxRows>(d_temp_storage, temp_storage_bytes, d_partial_stats, d_partial_values,
                                                                 d_num_partitions, d_output, num_segments, max_partitions, heads,
                                                                 detail::PartitionCombineAlgorithm::single_pass, stream, {});
  }
};

} // namespace pagedattn
