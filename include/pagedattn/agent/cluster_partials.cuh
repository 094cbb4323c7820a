#pragma once
// Level 3: the partials of the thread blocks of one cluster (sm_90), read in place through distributed
// shared memory, and the cluster's barrier. A launch whose segments have at most max_cluster_partitions
// partitions runs each segment as one cluster (block rank == partition): every block keeps its partial
// in its own shared memory, the cluster meets at a barrier, each block folds its slice of the segment's
// output over the partials of all ranks (AgentSliceCombine), and a second barrier keeps every block
// resident until no other block reads its shared memory. No global memory, no init pass, no grid barrier.
#if !defined(__ILUVATAR__)
#  include <cooperative_groups.h>
#endif

#include <pagedattn/util_arch.cuh>

namespace pagedattn {

/// The most partitions (cluster size) the cluster combine takes: 16 is sm_90's largest (non-portable)
/// cluster; a GPC holds it at two blocks per SM.
inline constexpr int max_cluster_partitions = 16;

#if !defined(__ILUVATAR__) && defined(_CG_HAS_CLUSTER_GROUP)
#  define PAGEDATTN_HAS_CLUSTERS 1
#else
#  define PAGEDATTN_HAS_CLUSTERS 0
#endif

/// AgentSliceCombine's source of partials: partial q is the one of cluster rank q, at the same shared
/// memory offsets (stats [heads][2], values [heads][head_dim]) as this block's own.
struct ClusterPartials {
  const float* stats;
  const float* values;

  PAGEDATTN_DEVICE float2 stat(int q, int h) const
  {
#if PAGEDATTN_HAS_CLUSTERS
    return *cooperative_groups::this_cluster().map_shared_rank(reinterpret_cast<const float2*>(stats) + h, q);
#else
    (void)q, (void)h;
    __trap();
    return {};
#endif
  }
  PAGEDATTN_DEVICE float4 value(int q, int v) const
  {
#if PAGEDATTN_HAS_CLUSTERS
    return *cooperative_groups::this_cluster().map_shared_rank(reinterpret_cast<const float4*>(values) + v, q);
#else
    (void)q, (void)v;
    __trap();
    return {};
#endif
  }

  /// Every thread of every block of the cluster calls it: returns when all have arrived; shared-memory
  /// writes before it are visible to reads after it in any block of the cluster (release-acquire).
  static PAGEDATTN_DEVICE void Sync()
  {
#if PAGEDATTN_HAS_CLUSTERS
    cooperative_groups::this_cluster().sync();
#else
    __trap(); // no clusters here: dispatch never asks for the cluster combine
#endif
  }
};

} // namespace pagedattn
