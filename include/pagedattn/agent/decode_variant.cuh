#pragma once
// The decode's variant: what a query row's scores pass through between the QK product and the softmax (the
// logit modifiers and the mask), the sink that joins its softmax, and what each output element passes
// through before its store. Both folds and the agent call only these hooks, so the modifiers and their order
// are written here once:
//
//   logit(pos)  = ALiBi(soft-cap(score(pos)))          for a position the row sees, else masked (-inf)
//   sees(pos)   = first_visible <= pos < end           (the window, and causality among the new tokens)
//   softmax     over the seen positions, with the row's head's sink in the denominator
//   out         = epilogue(softmax · V)
//
// score(pos) arrives scaled (the softmax scale times K's dequantization scale, applied where each fold
// finds it cheapest: the CUDA-core fold scales the queries, the tensor-core fold the scores).
//
// A score variant (ScoreVariant below: DefaultScoreVariant, or one of your own) is a copyable type with
//
//   using Row = ...;  // what a fold keeps of one query row (in shared memory); Row{} sees no position
//   template <class T, class KvT> __device__ Row MakeRow(const PagedAttentionParams<T, KvT>&, const QueryRow&) const;
//   __device__ bool Visible(const Row&, int pos) const;
//   template <class T, class KvT, int N>  // the logits of N consecutive positions pos .. pos + N - 1, in place
//   __device__ void Logits(const PagedAttentionParams<T, KvT>&, float (&score)[N], const Row&, int pos) const;
//   template <class T, class KvT> __device__ bool HasSinks(const PagedAttentionParams<T, KvT>&) const;
//   template <class T, class KvT> __device__ float Sink(const PagedAttentionParams<T, KvT>&, const QueryRow&) const;
//
// The easiest is to derive from DefaultScoreVariant and replace one hook, calling the default's inside it
// (examples/score_variant.cu). Like the output epilogue, the variant is a kernel parameter
// (DecodeArguments::score_variant, copied at each launch), and each type instantiates its own kernels.
#include <pagedattn/agent/agent_paged_attention_params.cuh>
#include <pagedattn/thread/thread_online_softmax.cuh>
#include <pagedattn/thread/thread_output_epilogue.cuh>

namespace pagedattn {

/// What the default variant keeps of a query row: the positions it sees [first_visible, end) (QueryRow) and
/// its head's ALiBi slope (0 without ALiBi). Value-initialised: it sees nothing.
struct ScoreRow {
  int first_visible, end;
  float slope;
};

/// The modifiers the launch's runtime fields ask for (DecodeArguments: logit_softcap, alibi_slopes,
/// window_left, q_len, sinks): one set of kernels serves every combination of them.
struct DefaultScoreVariant {
  using Row = ScoreRow;

  template <class T, class KvT>
  PAGEDATTN_DEVICE Row MakeRow(const PagedAttentionParams<T, KvT>& p, const QueryRow& row) const
  {
    return {row.first_visible, row.end, p.alibi_slopes ? p.alibi_slopes[row.head] : 0.f};
  }

  /// Whether the row sees position pos (one compare).
  PAGEDATTN_DEVICE bool Visible(const Row& row, int pos) const
  {
    return static_cast<unsigned>(pos - row.first_visible) < static_cast<unsigned>(row.end - row.first_visible);
  }

  /// The logits of positions pos .. pos + N - 1 from their scaled scores: soft-capped, then ALiBi-biased. A
  /// fold passes a lane's run of scores (the tensor-core tile: N = 4 to 16; the CUDA-core tile: 1), so each
  /// modifier's uniform branch is taken once per run, not per score (per score it cost the fp8 head-128 tile
  /// 1.3 % more instructions: bench/NOTES.md, "Decode variants: soft-cap, sinks, windows, output epilogue").
  template <class T, class KvT, int N>
  PAGEDATTN_DEVICE void Logits(const PagedAttentionParams<T, KvT>& p, float (&score)[N], const Row& row, int pos) const
  {
    const float cap = p.logit_softcap;
    if (cap > 0.f)
    {
#pragma unroll
      for (int e = 0; e < N; ++e) { score[e] = soft_capped_logit(score[e], cap); }
    }
    if (p.alibi_slopes)
    {
#pragma unroll
      for (int e = 0; e < N; ++e) { score[e] = alibi_logit(score[e], row.slope, pos + e, row.end); }
    }
  }

  template <class T, class KvT>
  PAGEDATTN_DEVICE bool HasSinks(const PagedAttentionParams<T, KvT>& p) const
  {
    return p.sinks != nullptr;
  }
  /// The sink logit of the row's head (fold_sink); read only where HasSinks.
  template <class T, class KvT>
  PAGEDATTN_DEVICE float Sink(const PagedAttentionParams<T, KvT>& p, const QueryRow& row) const
  {
    return p.sinks[row.head];
  }
};

/// A score variant bound to its launch's parameters: the Scorer the tiles call (block/block_tile_tensor_core.cuh),
/// which never see the parameters themselves.
template <class ScoreVariant, class T, class KvT>
struct BoundScoreVariant {
  using Row = typename ScoreVariant::Row;
  const ScoreVariant& variant;
  const PagedAttentionParams<T, KvT>& p;

  PAGEDATTN_DEVICE bool Visible(const Row& row, int pos) const { return variant.Visible(row, pos); }
  template <int N>
  PAGEDATTN_DEVICE void Logits(float (&score)[N], const Row& row, int pos) const
  {
    variant.Logits(p, score, row, pos);
  }
};

/// The variant the kernel takes: a score variant and an output epilogue (thread/thread_output_epilogue.cuh),
/// one kernel parameter.
template <class ScoreVariant = DefaultScoreVariant, class OutputEpilogue = IdentityOutputEpilogue>
struct DecodeVariant {
  using Score = ScoreVariant;
  using Epilogue = OutputEpilogue;
  ScoreVariant score;
  OutputEpilogue epilogue;

  /// One output element through the epilogue (value: the attention output; index, head, dim: where it goes).
  PAGEDATTN_DEVICE float Output(float value, int index, int head, int dim) const { return epilogue(value, index, head, dim); }
};

} // namespace pagedattn
