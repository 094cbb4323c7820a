// bench_decode's rows in bf16 (the tensor-core fold) and in fp32 (the CUDA-core fold), compiled beside
// bench_decode.cu (fp16), so that a parallel build compiles the element types at once.
#include "../bench_decode_rows.cuh"

namespace bench_decode {
template int run<__nv_bfloat16, __nv_bfloat16>(const Options&);
template int run<float, float>(const Options&);
} // namespace bench_decode
