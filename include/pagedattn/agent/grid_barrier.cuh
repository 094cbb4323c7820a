#pragma once
// Level 3: a barrier over every thread block of a grid, for cooperative launches only (where the runtime
// guarantees that all blocks are resident at once; anywhere else waiting on blocks that have not started
// could hang). The counter lives in the caller's temporary storage and is zero when the grid starts.
#include <pagedattn/util_arch.cuh>

namespace pagedattn {

struct GridBarrier {
  unsigned* counter; ///< zero at launch; each block adds 1 once

  /// Every thread of every block calls it once: returns when all `blocks` blocks have arrived. Each
  /// block's global writes before the call are visible to every block's reads after it (release by
  /// the arriving thread after the block's barrier, acquire by the polling thread before the next).
  PAGEDATTN_DEVICE void Sync(unsigned blocks) const
  {
    __syncthreads();
    if (threadIdx.x == 0)
    {
      arch::atomic_add_acq_rel(counter, 1u);
      arch::PollBackoff backoff;
      while (arch::load_acquire(counter) < blocks) { backoff.wait(); }
    }
    __syncthreads();
  }
};

} // namespace pagedattn
