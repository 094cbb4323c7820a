// bench_decode's rows under the BI-V100 policy (fp16), compiled beside bench_decode.cu: the CUDA-core fold with
// BI-V100's tile (4 warps, 512-token partitions, 4 key vectors in flight) at this GPU's 32-lane warps.
#include "../bench_decode_rows.cuh"

namespace bench_decode {
template int run<__half, __half, BIV100Policies>(const Options&);
} // namespace bench_decode
