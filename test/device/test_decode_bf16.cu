// GPU tests of DevicePagedAttention::Decode for bf16: the cases of every type.
#include "device/decode_test_support.cuh"

using T = __nv_bfloat16;
#define DTYPE "bf16"
#include "device/decode_cases_each_type.cuh"
