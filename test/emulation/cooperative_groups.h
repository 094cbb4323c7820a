#pragma once
// Stand-in for <cooperative_groups.h> (test/emulation/cuda_runtime.h): the grid barrier exists only for
// cooperative launches, which the emulation does not offer; calling it traps.
#include <cuda_runtime.h>

namespace cooperative_groups {
struct grid_group {
  unsigned barrier_arrive() { __trap(); }
  void barrier_wait(unsigned&&) { __trap(); }
  void sync() { __trap(); }
};
inline grid_group this_grid() { return {}; }
} // namespace cooperative_groups
