// Compiled by the CTest `warning_free_consumer` with nvcc -Werror all-warnings and none of the project's
// own flags (no --expt-relaxed-constexpr): a project that includes pagedattn with plain nvcc flags must
// see no warning. Instantiates Decode for every element type and DeviceCombinePartials (never run).
#include <pagedattn/pagedattn.cuh>

template <class T>
cudaError_t decode(void* temp, std::size_t& bytes, cudaStream_t stream)
{
  return pagedattn::DevicePagedAttention::Decode(temp, bytes, pagedattn::DecodeArguments<T>{}, stream);
}

cudaError_t consumer(void* temp, std::size_t& bytes, cudaStream_t stream)
{
  const cudaError_t results[] = {
    decode<__half>(temp, bytes, stream),
    decode<float>(temp, bytes, stream),
#if PAGEDATTN_HAS_BF16
    decode<__nv_bfloat16>(temp, bytes, stream),
#endif
    pagedattn::DeviceCombinePartials::Combine<128>(temp, bytes, nullptr, nullptr, nullptr, nullptr, 1, 2, 1, stream),
  };
  return results[0];
}
