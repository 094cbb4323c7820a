#pragma once
// Compiler portability macros shared by every pagedattn header.
#include <cuda_runtime.h>

#define PAGEDATTN_HOST_DEVICE __host__ __device__ __forceinline__
#define PAGEDATTN_DEVICE __device__ __forceinline__

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
