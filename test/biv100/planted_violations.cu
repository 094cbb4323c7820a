// Negative controls of check_biv100.sh: each macro plants one violation of the BI-V100 rules, and the
// check that guards that rule must reject the file. Run before every real check, so that a check that
// has stopped detecting anything fails instead of passing silently.
#include <pagedattn/util_arch.cuh>

#if defined(PLANT_INSTRUCTION) // an instruction BI-V100 lacks, outside any __ILUVATAR__ guard
__global__ void planted_sleep() { __nanosleep(100); }
#endif

#if defined(PLANT_ASSERTION) // a non-dependent assertion in a template that 64-lane builds never instantiate
template <class T>
struct PlantedTensorCoreStage {
  static_assert(pagedattn::warp_threads == 32, "one lane per token");
};
#endif

__global__ void planted_nothing() {}
