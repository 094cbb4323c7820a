// fp32 queries over e5m2 caches: decode_as's instantiation (torch_decode.cuh: one translation unit per pair of types).
#include "torch_decode.cuh"

template void pagedattn_torch::decode_as<float, pagedattn::fp8_e5m2>(pagedattn_torch::VllmPagedAttentionArgs&, const pagedattn_torch::CallTensors&);
