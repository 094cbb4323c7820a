// fp16 queries over fp16 caches: decode_as's instantiation (torch_decode.cuh: one translation unit per pair of types).
#include "torch_decode.cuh"

template void pagedattn_torch::decode_as<__half, __half>(pagedattn_torch::VllmPagedAttentionArgs&, const pagedattn_torch::CallTensors&);
