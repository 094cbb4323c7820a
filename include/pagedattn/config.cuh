#pragma once
// Compiler portability macros shared by every pagedattn header.
#include <cuda_runtime.h>

#define PAGEDATTN_HOST_DEVICE __host__ __device__ __forceinline__
#define PAGEDATTN_DEVICE __device__ __forceinline__

/// 1 where the toolkit has bf16 (<cuda_bf16.h>, CUDA 11 and later), 0 where it has not (a CUDA 10.2-level
/// SDK such as BI-V100's CoreX): then __nv_bfloat16 is not offered. Define it to 0 to build without bf16.
#ifndef PAGEDATTN_HAS_BF16
#  if defined(__has_include)
#    if __has_include(<cuda_bf16.h>)
#      define PAGEDATTN_HAS_BF16 1
#    endif
#  endif
#  ifndef PAGEDATTN_HAS_BF16
#    define PAGEDATTN_HAS_BF16 0
#  endif
#endif

namespace pagedattn {

/// `value`, as an expression that depends on the template parameter T. A static_assert on a
/// configuration constant (the warp width, say) inside a template is checked when the header is read
/// unless it depends on a template parameter; this defers it to the instantiations that use the
/// template. (BI-V100 builds read the tensor-core headers but never instantiate them.)
template <class T, class V>
__host__ __device__ constexpr V dependent_value(V value) { return value; }

} // namespace pagedattn

/// Timeline instrumentation (off by default): a translation unit that defines PAGEDATTN_TRACE_POINT(point)
/// before including pagedattn gets a call at each numbered step of a thread block's decode (see
/// bench/trace_decode.cu, which records %globaltimer per block). Points: 0 start, 1 tile chosen, 2 block
/// ids staged, 3 first K/V tile landed, 4 partition folded, 5 aggregate stored (look-back: arrival
/// counted), 6 group folded (one wave: grid barrier passed), 7 done; inside a fold: 8 loads landed
/// (one wave: group statistics and factors), 9 factors (one wave: group values), 10 fold done; look-back:
/// 11 group published, 12 looked back, 13 final fold done; one wave: 14 slice fold started, 15 its first
/// group statistics folded. PAGEDATTN_TRACE_AFTER(point, value) marks a point once `value` (a float
/// register) has arrived: one wave: 16 the first statistics loaded, 17 the first values loaded.
#ifndef PAGEDATTN_TRACE_POINT
#define PAGEDATTN_TRACE_POINT(point) ((void)0)
#endif
#ifndef PAGEDATTN_TRACE_AFTER
#define PAGEDATTN_TRACE_AFTER(point, value) ((void)0)
#endif
