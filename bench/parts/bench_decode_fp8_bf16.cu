// bench_decode's rows of bf16 queries over an e4m3 cache, compiled beside bench_decode.cu.
#include "../bench_decode_rows.cuh"

namespace bench_decode {
template int run<__nv_bfloat16, pagedattn::fp8_e4m3>(const Options&);
} // namespace bench_decode
