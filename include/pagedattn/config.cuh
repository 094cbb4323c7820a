#pragma once
// Compiler portability macros shared by every pagedattn header.
#include <cuda_runtime.h>

#define PAGEDATTN_HOST_DEVICE __host__ __device__ __forceinline__
#define PAGEDATTN_DEVICE __device__ __forceinline__
