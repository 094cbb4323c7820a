// Decode benchmark: DevicePagedAttention::Decode over a table of shapes (Qwen3.6 and two other GQA
// configurations, long single sequences, uniform batches and latency-bound small steps), then a serving
// table (Qwen3.6: skewed and log-uniform batches, and CUDA graphs captured under a looser max_seq_len and
// replayed, against a fresh launch at the true maximum), each checked against an fp64 CPU reference,
// timed cold (L2 flushed) and hot, and compared with the device's copy bandwidth and read bandwidth (a
// plain kernel reading 1 GiB: the ceiling of a kernel that only reads) measured in the same run.
//
//   bench_decode --json PATH --commit SHA [--dtype fp16|bf16|fp32|fp16/fp8_e4m3|fp16/fp8_e5m2|bf16/fp8_e4m3] [--layout vllm|hnd|nhd]
//                [--policy default|biv100] [--quick] [--shape SEQSxLEN@HEADS/KV_HEADS/HEAD]...
//       (--dtype: the queries' and output's type, then the cache's where it differs: an fp8 cache with one K
//        and one V scale; its bytes, %copy and %read count the fp8 bytes read)
//       (--layout: the caches' layout, packed: vLLM's 5-D (default), or token rows, HND or NHD)
//       (--policy: each architecture's own policy (default), or biv100: PagedAttentionPolicyBIV100's CUDA-core tile
//        at this GPU's 32-lane warps, fp16 only; every row and the JSON name the policy)
//       (--shape: only the rows named, e.g. 1x16384@24/4/256 or a serving row's name such as
//        1x100000+63x512 or graph:32x1000@8192; for profiling one launch)
//
// Exit status: 0 if every row passed its accuracy check, 1 otherwise (the JSON is written either way),
// 2 for bad arguments.
#include "bench_decode_rows.cuh"

namespace bench_decode {
// Instantiated in parts/bench_decode_bf16_fp32.cu, parts/bench_decode_fp8.cu, parts/bench_decode_fp8_bf16.cu and
// parts/bench_decode_biv100.cu.
extern template int run<__nv_bfloat16, __nv_bfloat16>(const Options&);
extern template int run<float, float>(const Options&);
extern template int run<__half, pagedattn::fp8_e4m3>(const Options&);
extern template int run<__half, pagedattn::fp8_e5m2>(const Options&);
extern template int run<__nv_bfloat16, pagedattn::fp8_e4m3>(const Options&);
extern template int run<__half, __half, BIV100Policies>(const Options&);
} // namespace bench_decode

int main(int argc, char** argv)
{
  using namespace bench_decode;
  const Options o = parse(argc, argv);
  if (!paged_decode::have_cuda_device())
  {
    std::fprintf(stderr, "no CUDA device: bench_decode needs an NVIDIA GPU (sm_80 or newer)\n");
    return 1;
  }
  using pagedattn::fp8_e4m3;
  using pagedattn::fp8_e5m2;
  if (o.policy == "biv100") { return run<__half, __half, BIV100Policies>(o); } // (parse: fp16 only)
  if (o.dtype == "fp32") { return run<float, float>(o); }                       // the CUDA-core fold
  if (o.dtype == "fp16/fp8_e4m3") { return run<__half, fp8_e4m3>(o); }
  if (o.dtype == "fp16/fp8_e5m2") { return run<__half, fp8_e5m2>(o); }
  if (o.dtype == "bf16/fp8_e4m3") { return run<__nv_bfloat16, fp8_e4m3>(o); }
  return o.dtype == "bf16" ? run<__nv_bfloat16, __nv_bfloat16>(o) : run<__half, __half>(o);
}
