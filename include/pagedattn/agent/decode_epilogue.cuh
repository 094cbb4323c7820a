#pragma once
// The decode's epilogue: what happens to a work item's partial after its partition is folded. It poisons the
// partial of a partition that met a bad block id, joins the sinks to partition 0's partial, merges the
// segment's partitions (AgentPartitionCombine's look-back, or AgentSliceCombine's one-wave fold) and writes
// each output element through the variant's output epilogue; a sequence with no tokens to fold (empty, or an
// invalid length) has its output written here without a fold.
#include <pagedattn/agent/agent_paged_attention_params.cuh>
#include <pagedattn/agent/agent_partition_combine.cuh>
#include <pagedattn/agent/agent_slice_combine.cuh>
#include <pagedattn/agent/decode_schedule.cuh>
#include <pagedattn/agent/decode_tile_scheduler.cuh>
#include <pagedattn/grid/grid_barrier.cuh>
#include <pagedattn/thread/thread_online_softmax.cuh>
#include <pagedattn/util_type.cuh>

#include <cstddef>
#include <cstdint>

namespace pagedattn {

/// Traits: the instantiation's DecodeTraits (element types, head size, query rows, variant). OneWaveCapable:
/// whether the kernel may combine in one wave (its storage holds SliceCombine's beside the partial).
template <class Traits, int BlockThreads, bool OneWaveCapable>
class DecodeEpilogue {
public:
  using T = typename Traits::T;
  using KvT = typename Traits::KvT;
  using Variant = typename Traits::Variant;
  using Params = PagedAttentionParams<T, KvT>;
  static constexpr int head_dim = Traits::head_dim;
  static constexpr int max_rows = Traits::max_rows;
  using Combine = AgentPartitionCombine<head_dim, max_rows, BlockThreads>;
  using SliceCombine = AgentSliceCombine<head_dim, max_rows, BlockThreads>;

  /// The block's partial: stats [rows][2] (max score, exp sum), values [rows][head_dim].
  struct PartialStorage {
    float stats[max_rows * 2];
    alignas(16) float values[max_rows * head_dim];
  };
  /// Where the epilogue's storage lies: the agent lays it out beside (or over) the fold's. `slice` only
  /// where OneWaveCapable.
  struct Storage {
    PartialStorage& partial;
    typename Combine::TempStorage& combine;
    typename SliceCombine::TempStorage* slice;
  };

  PAGEDATTN_DEVICE DecodeEpilogue(const Storage& storage, const Params& p, const Variant& variant) : storage_(storage), p_(p), variant_(variant) {}

  /// An item with no tokens to fold (num_partitions 0: an empty sequence, zeros; -1: an invalid length or
  /// query offsets, NaN and the error count) or no query rows (place.rows <= 0: nothing to write), without any
  /// cache access. With one_wave, the block then meets the grid's others.
  PAGEDATTN_DEVICE void WriteWithoutFold(const PlannedItem& item, const ItemPlace& place, bool one_wave) const
  {
    const bool invalid = item.num_partitions < 0;
    const float fill = invalid ? __int_as_float(0x7fc00000) : 0.f;
    for (int i = threadIdx.x; i < place.rows * head_dim; i += BlockThreads)
    {
      const QueryRow row = query_row(p_, place.span, item.seq_len, place.kv_head, place.first_row + i / head_dim);
      store_output(row.index, row.head, i % head_dim, fill);
    }
    if (invalid && threadIdx.x == 0 && p_.error_count) { arch::atomic_fetch_add(p_.error_count, 1u); }
    if constexpr (OneWaveCapable)
    {
      if (one_wave) { GridBarrier::Sync(); }
    }
  }

  /// The item's partial is in storage.partial (after a barrier); `invalid`: its fold met a block id outside
  /// the cache. Poisons it if so, joins the sinks to partition 0's, and merges the segment (number `index`:
  /// the item's partial slot; with one_wave, the slice fold after the grid barrier, which this block reaches
  /// exactly once).
  PAGEDATTN_DEVICE void Run(bool invalid, const PlannedItem& item, const ItemPlace& place, unsigned index, bool one_wave)
  {
    const QuerySpan span = place.span;
    const int kv_head = place.kv_head, first_row = place.first_row, rows = place.rows;
    const int seq_len = item.seq_len;
    PartialStorage& own = storage_.partial;
    if (invalid) // a block id outside the cache: this partition's partial (and the output) is NaN
    {
      const float nan = __int_as_float(0x7fc00000);
      for (int i = threadIdx.x; i < rows * head_dim; i += BlockThreads) { own.values[i] = nan; }
      if (threadIdx.x < rows) { own.stats[2 * threadIdx.x + 1] = nan; }
      if (threadIdx.x == 0 && p_.error_count) { arch::atomic_fetch_add(p_.error_count, 1u); }
      __syncthreads();
    }
    if (variant_.score.HasSinks(p_) && item.partition == 0) { FoldSinks(own, span, seq_len, kv_head, first_row, rows); }

    // The segment's partials are the slots of its items: the plan lays them out back to back.
    const SegmentSlots slots{index - static_cast<unsigned>(item.partition), static_cast<std::size_t>(item.first_group)};
    if constexpr (OneWaveCapable)
    {
      if (one_wave)
      {
        CombineInOneWave(slots, item.partition, item.num_partitions, rows, OutputWriter{this, span, seq_len, kv_head, first_row});
        return;
      }
    }
    Combine combine(storage_.combine, rows);
    combine.Run(p_.state, slots, item.partition, item.num_partitions, own.stats, own.values, OutputWriter{this, span, seq_len, kv_head, first_row});
  }

private:
  Storage storage_;
  const Params& p_;
  const Variant& variant_;

  /// Attention sinks: each query row's sink (its head's) joins its partition-0 partial (fold_sink: one more
  /// token, of value 0), so that whichever combine runs (look-back, slices, a single partition) counts it
  /// once. Every thread first rescales its values from the old statistics, then the statistics are replaced.
  PAGEDATTN_DEVICE void FoldSinks(PartialStorage& own, const QuerySpan& span, int seq_len, int kv_head, int first_row, int rows)
  {
    for (int i = threadIdx.x; i < rows * head_dim; i += BlockThreads)
    {
      const int h = i / head_dim;
      float max_score = own.stats[2 * h], exp_sum = own.stats[2 * h + 1];
      const float sink = variant_.score.Sink(p_, query_row(p_, span, seq_len, kv_head, first_row + h));
      own.values[i] = detail::mul_rn(fold_sink(max_score, exp_sum, sink), own.values[i]);
    }
    __syncthreads();
    if (static_cast<int>(threadIdx.x) < rows)
    {
      const float sink = variant_.score.Sink(p_, query_row(p_, span, seq_len, kv_head, first_row + threadIdx.x));
      fold_sink(own.stats[2 * threadIdx.x], own.stats[2 * threadIdx.x + 1], sink);
    }
    __syncthreads();
  }

  /// One-wave combine (AgentSliceCombine): store the aggregate, meet every block of the grid, fold this
  /// block's slice of the segment. A single-partition segment writes its output directly (and arrives).
  template <class WriteOutput>
  PAGEDATTN_DEVICE void CombineInOneWave(const SegmentSlots& slots, int partition, int num_partitions, int heads, WriteOutput write)
  {
    const PartialStorage& own = storage_.partial;
    SliceCombine slice(*storage_.slice, heads);
    if (num_partitions > 1) { slice.StoreAggregate(p_.state, slots, partition, own.stats, own.values); }
    else { Combine(storage_.combine, heads).Run(p_.state, slots, 0, 1, own.stats, own.values, write); }
    PAGEDATTN_TRACE_POINT(TracePoint::aggregate_stored);
    const GridBarrier::Token arrival = GridBarrier::Arrive();
    typename SliceCombine::Plan plan{}; // worked out while the other blocks arrive
    if (num_partitions > 1) { plan = slice.MakePlan(p_.state, slots, partition, num_partitions); }
    GridBarrier::Wait(arrival);
    PAGEDATTN_TRACE_POINT(TracePoint::grid_barrier_passed);
    if (num_partitions > 1) { slice.Run(p_.state, slots, plan, write); }
  }

  struct alignas(4 * sizeof(T)) Vector4 {
    T e[4];
  };
  struct OutputWriter {
    const DecodeEpilogue* epilogue;
    QuerySpan span;
    int seq_len, kv_head, first_row;
    /// Elements 4 vector .. 4 vector + 3 of row first_row + h, through the output epilogue: one store where
    /// the output is aligned for it (the strides are the caller's), else four.
    PAGEDATTN_DEVICE void operator()(int h, int vector, float4 v) const
    {
      const QueryRow row = query_row(epilogue->p_, span, seq_len, kv_head, first_row + h);
      const int index = row.index, head = row.head, d = 4 * vector;
      T* dst = epilogue->output_ptr(index, head, d);
      const Variant& e = epilogue->variant_;
      const Vector4 packed{{ElementTraits<T>::from_float(e.Output(v.x, index, head, d)), ElementTraits<T>::from_float(e.Output(v.y, index, head, d + 1)),
                            ElementTraits<T>::from_float(e.Output(v.z, index, head, d + 2)),
                            ElementTraits<T>::from_float(e.Output(v.w, index, head, d + 3))}};
      if (reinterpret_cast<std::uintptr_t>(dst) % sizeof(Vector4) == 0) { *reinterpret_cast<Vector4*>(dst) = packed; }
      else
      {
#pragma unroll
        for (int i = 0; i < 4; ++i) { dst[i] = packed.e[i]; }
      }
    }
  };

  /// Element d of head `head` of output row `index` (QueryRow::index).
  PAGEDATTN_DEVICE T* output_ptr(int index, int head, int d) const
  {
    return p_.output + index * p_.output_seq_stride + head * p_.output_head_stride + d;
  }
  /// One output element, through the output epilogue.
  PAGEDATTN_DEVICE void store_output(int index, int head, int d, float value) const
  {
    *output_ptr(index, head, d) = ElementTraits<T>::from_float(variant_.Output(value, index, head, d));
  }
};

} // namespace pagedattn
