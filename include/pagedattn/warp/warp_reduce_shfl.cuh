#pragma once
// Level 1: reduction across a logical warp by shuffles, in the manner of CUB's warp_reduce_shfl.
//
// The hardware warp is split into warp_threads / LogicalWarpThreads logical warps of consecutive lanes.
// Reduce() leaves the aggregate in the logical warp's first lane; lane i combines op(own, lane i+offset)
// with offsets 1, 2, 4, ..., so the operands keep their lane order and non-commutative operators work.
// AllReduce() uses the xor butterfly and leaves the same aggregate in every lane (operator must be
// commutative, as sum and max are; fp32 sum is commutative bit-for-bit, so all lanes agree exactly).
//
// Every lane of the hardware warp must call these functions together (they use full-warp shuffles).
#include <pagedattn/thread/thread_operators.cuh>
#include <pagedattn/util_arch.cuh>

namespace pagedattn {

template <class T, int LogicalWarpThreads = warp_threads>
class WarpReduceShfl {
  static_assert(is_power_of_two(LogicalWarpThreads) && LogicalWarpThreads <= warp_threads,
                "LogicalWarpThreads must be a power of two no larger than the hardware warp");

public:
  static constexpr int logical_warp_threads = LogicalWarpThreads;
  static constexpr int logical_warps_per_warp = warp_threads / LogicalWarpThreads;

  /// Lane index inside the logical warp.
  static PAGEDATTN_DEVICE int logical_lane_id() { return arch::lane_id() & (LogicalWarpThreads - 1); }
  /// Index of the calling thread's logical warp inside its hardware warp.
  static PAGEDATTN_DEVICE int logical_warp_id() { return arch::lane_id() / LogicalWarpThreads; }

  /// Aggregate valid in logical lane 0 only.
  template <class ReductionOp>
  static PAGEDATTN_DEVICE T Reduce(T input, ReductionOp op)
  {
#pragma unroll
    for (int offset = 1; offset < LogicalWarpThreads; offset *= 2)
    {
      const T other = arch::shfl_down(input, offset, LogicalWarpThreads);
      // Lanes whose partner lies outside the logical warp get their own value back: they hold garbage
      // afterwards, which is fine, since only logical lane 0 is defined.
      if (logical_lane_id() + offset < LogicalWarpThreads) { input = op(input, other); }
    }
    return input;
  }

  static PAGEDATTN_DEVICE T Sum(T input) { return Reduce(input, pagedattn::Sum{}); }
  static PAGEDATTN_DEVICE T Max(T input) { return Reduce(input, pagedattn::Max{}); }

  /// Aggregate valid in every lane of the logical warp (commutative operators).
  template <class ReductionOp>
  static PAGEDATTN_DEVICE T AllReduce(T input, ReductionOp op)
  {
#pragma unroll
    for (int mask = LogicalWarpThreads / 2; mask > 0; mask /= 2)
    {
      input = op(input, arch::shfl_xor(input, mask, LogicalWarpThreads));
    }
    return input;
  }

  static PAGEDATTN_DEVICE T AllSum(T input) { return AllReduce(input, pagedattn::Sum{}); }
  static PAGEDATTN_DEVICE T AllMax(T input) { return AllReduce(input, pagedattn::Max{}); }
};

} // namespace pagedattn
