// GPU tests of DevicePagedAttention::Decode for fp32 (the CUDA-core fold): the cases of every type.
#include "device/decode_test_support.cuh"

using T = float;
#define DTYPE "fp32"
#include "device/decode_cases_each_type.cuh"
