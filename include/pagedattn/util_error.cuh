#pragma once
// Error reporting of the host entry points: every check returns a cudaError_t and records a message that
// names the offending argument, retrievable with pagedattn::last_error_message() (per host thread).
#include <cuda_runtime.h>

#include <string>

namespace pagedattn {

namespace detail {
inline std::string& last_error_storage()
{
  thread_local std::string message;
  return message;
}

/// Record `message` and return `error` (so checks read `return detail::fail(cudaErrorInvalidValue, "...")`).
inline cudaError_t fail(cudaError_t error, std::string message)
{
  last_error_storage() = std::move(message);
  return error;
}

/// Record a CUDA runtime failure with the call that produced it.
inline cudaError_t check_cuda(cudaError_t error, const char* what)
{
  if (error != cudaSuccess) { return fail(error, std::string(what) + ": " + cudaGetErrorString(error)); }
  return cudaSuccess;
}
} // namespace detail

/// Message of the last error a pagedattn entry point returned on this host thread ("" if none yet).
inline const std::string& last_error_message() { return detail::last_error_storage(); }

} // namespace pagedattn

/// Return from the enclosing function when a CUDA call or check fails.
#define PAGEDATTN_RETURN_IF_ERROR(expr)                                                                          \
  do {                                                                                                           \
    const cudaError_t pagedattn_err_ = (expr);                                                                   \
    if (pagedattn_err_ != cudaSuccess) { return pagedattn_err_; }                                                \
  } while (0)
