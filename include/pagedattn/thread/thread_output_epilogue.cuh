#pragma once
// Thread level: the output epilogue of the decode, CUB style (a functor type parameter, as CUB's reductions
// take their operators): a callable that every output element passes through before it is stored.
#include <pagedattn/config.cuh>

namespace pagedattn {

/// The default output epilogue: each output element as attention computed it. An epilogue of your own is
/// any copyable type with
///
///   __device__ float operator()(float value, int seq, int head, int dim) const;
///
/// called once per element (value: the attention output in float, before the conversion to the output
/// type; seq, head, dim: where it is stored, seq the output's row s * q_len + i of new token i of sequence s,
/// the sequence itself at q_len 1), on every path that writes the output: the combines, a
/// single partition's direct write, and the 0 of an empty or the NaN of an invalid sequence. It lives in the
/// kernel's parameters (DecodeArguments::output_epilogue is copied there at each launch; a graph replays
/// the captured copy), so pointers it holds must stay valid, and the data they point to may change
/// between replays. examples/gated_output.cu: Qwen3.6's gated attention output, o * sigmoid(gate).
struct IdentityOutputEpilogue {
  PAGEDATTN_HOST_DEVICE float operator()(float value, int /*seq*/, int /*head*/, int /*dim*/) const { return value; }
};

} // namespace pagedattn
