#pragma once
// Thread level: the binary operators the warp reductions apply (CUB's thread_operators).
#include <pagedattn/config.cuh>

namespace pagedattn {

/// Sum functor (QK dot products, exp sums).
struct Sum {
  template <class T>
  PAGEDATTN_HOST_DEVICE T operator()(const T& a, const T& b) const { return a + b; }
};

/// Max functor (score maxima). Written with a comparison so that it works for any ordered T.
struct Max {
  template <class T>
  PAGEDATTN_HOST_DEVICE T operator()(const T& a, const T& b) const { return (b > a) ? b : a; }
};

} // namespace pagedattn
