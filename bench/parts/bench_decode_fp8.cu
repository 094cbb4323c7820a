// bench_decode's rows over fp8 caches (fp16 queries, e4m3 and e5m2), compiled beside bench_decode.cu.
#include "../bench_decode_rows.cuh"

namespace bench_decode {
template int run<__half, pagedattn::fp8_e4m3>(const Options&);
template int run<__half, pagedattn::fp8_e5m2>(const Options&);
} // namespace bench_decode
