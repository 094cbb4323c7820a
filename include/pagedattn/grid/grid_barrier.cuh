#pragma once
// Grid level: a barrier over every thread block of a grid, for cooperative launches only (where the runtime
// guarantees that all blocks are resident at once; anywhere else waiting on blocks that have not started
// could hang, and cooperative_groups traps instead).
//
// It is the CUDA runtime's grid barrier (cooperative_groups::this_grid().sync()): its counter lives in a
// workspace the driver provides with every cooperative launch and returns to its starting state at each
// use, so a launch that combines in one wave needs no init pass and no temporary storage for it.
#if !defined(__ILUVATAR__)
#  include <cooperative_groups.h>
#endif

#include <pagedattn/config.cuh>

namespace pagedattn {

struct GridBarrier {
  /// What Arrive() hands to Wait(): the runtime's arrival token.
  using Token = unsigned int;

  /// Every thread of every block calls it once: returns when all blocks of the grid have arrived. Each
  /// block's global writes before the call are visible to every block's reads after it (the arriving
  /// thread releases after the block's barrier, the polling thread acquires before the next).
  static PAGEDATTN_DEVICE void Sync() { Wait(Arrive()); }

  /// Sync() in two halves, so that a block can do work that needs nothing from the other blocks while the
  /// barrier completes: Arrive() (every thread; the block's writes before it are released) ... Wait(token)
  /// (every thread; returns once every block has arrived, with their writes visible).
  static PAGEDATTN_DEVICE Token Arrive()
  {
#if defined(__ILUVATAR__)
    __trap(); // no cooperative launches there: dispatch never asks for a one-wave combine
    return 0;
#else
    return cooperative_groups::this_grid().barrier_arrive();
#endif
  }
  static PAGEDATTN_DEVICE void Wait(Token token)
  {
#if defined(__ILUVATAR__)
    (void)token;
    __trap();
#else
    cooperative_groups::this_grid().barrier_wait(static_cast<Token&&>(token));
#endif
  }
};

} // namespace pagedattn
