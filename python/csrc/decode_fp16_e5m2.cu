// fp16 queries over e5m2 caches: decode_as's instantiation in a translation unit of its own, so that the
// build compiles the fp8 pairs side by side (torch_decode.cuh).
#include "torch_decode.cuh"

template void pagedattn_torch::decode_as<__half, pagedattn::fp8_e5m2>(pagedattn_torch::VllmPagedAttentionArgs&,
                                                                      const pagedattn_torch::CallTensors&);
