#pragma once
// A score modifier in one struct: Llama 4's attention temperature tuning, which scales the logits of a query
// at position p by log(floor((p + 1) / floor_scale) + 1) * attn_scale + 1, so that long contexts keep a
// sharp softmax. It derives from pagedattn::DefaultScoreVariant, keeps the default's soft-cap, ALiBi,
// window and sinks, and adds one float per query row: its temperature, worked out once per row when a fold
// starts (MakeRow), then one multiply per score (Logits). examples/score_variant.cu runs it; the emulated
// decode test checks it against an fp64 reference.
#include <pagedattn/agent/decode_variant.cuh>

#include <cmath>

struct QueryTemperature : pagedattn::DefaultScoreVariant {
  float floor_scale = 8192.f; ///< Llama 4's defaults
  float attn_scale = 0.1f;

  /// The default's row and the temperature of the row's query (Row{}: temperature 0, and it sees nothing).
  struct Row : pagedattn::ScoreRow {
    float temperature;
  };

  /// The temperature of the query at position `position` (the newest token of a sequence of n is n - 1).
  PAGEDATTN_HOST_DEVICE float temperature(int position) const
  {
    return logf(floorf((static_cast<float>(position) + 1.f) / floor_scale) + 1.f) * attn_scale + 1.f;
  }

  template <class T, class KvT>
  PAGEDATTN_DEVICE Row MakeRow(const pagedattn::PagedAttentionParams<T, KvT>& p, const pagedattn::QueryRow& row) const
  {
    return {DefaultScoreVariant::MakeRow(p, row), temperature(row.end - 1)}; // the query sees up to itself
  }

  template <class T, class KvT, int N>
  PAGEDATTN_DEVICE void Logits(const pagedattn::PagedAttentionParams<T, KvT>& p, float (&score)[N], const Row& row, int pos) const
  {
    for (int e = 0; e < N; ++e) { score[e] *= row.temperature; }
    DefaultScoreVariant::Logits(p, score, row, pos);
  }
};
