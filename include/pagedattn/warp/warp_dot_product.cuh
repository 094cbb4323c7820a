#pragma once
// Level 1: the QK score of one token, computed by one logical warp.
//
// Each lane holds a slice of the query and the matching slice of one key (in any dimension order, as
// long as both slices use the same one); the lanes' partial dot products are summed by WarpReduceShfl.
#include <pagedattn/warp/warp_reduce_shfl.cuh>

namespace pagedattn {

template <int LogicalWarpThreads>
struct WarpDotProduct {
  /// Partial dot product of this lane's slices: sum over i of q[i] * k[i], in a fixed order.
  template <int ItemsPerLane>
  static PAGEDATTN_DEVICE float LanePartial(const float (&q)[ItemsPerLane], const float (&k)[ItemsPerLane])
  {
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < ItemsPerLane; ++i) { sum = fmaf(q[i], k[i], sum); }
    return sum;
  }

  /// Full dot product, valid in logical lane 0.
  template <int ItemsPerLane>
  static PAGEDATTN_DEVICE float Dot(const float (&q)[ItemsPerLane], const float (&k)[ItemsPerLane])
  {
    return WarpReduceShfl<float, LogicalWarpThreads>::Sum(LanePartial(q, k));
  }

  /// Full dot product, valid in every lane of the logical warp.
  template <int ItemsPerLane>
  static PAGEDATTN_DEVICE float AllDot(const float (&q)[ItemsPerLane], const float (&k)[ItemsPerLane])
  {
    return WarpReduceShfl<float, LogicalWarpThreads>::AllSum(LanePartial(q, k));
  }
};

} // namespace pagedattn
