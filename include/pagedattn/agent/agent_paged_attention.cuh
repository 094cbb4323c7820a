#pragma once
// The thread block's share of the paged decode: one (sequence, KV head, group of query heads, KV
// partition) work item. Each K/V vector is loaded once and used for every query head of the group (GQA).
//
// The partition's tokens are folded into the block's partial by one of two folds:
// PartitionFoldTensorCore (mma.sync on a cp.async shared-memory pipeline; fp16/bf16 on sm_80+, when the
// policy asks for tensor cores) or PartitionFoldCudaCore (fp32 FMAs; every type, and BI-V100). Then
// AgentPartitionCombine merges the partitions of the segment (or writes the output directly when there
// is only one).
//
// Invalid input never causes an out-of-range read: a block id outside [0, num_blocks) is not
// dereferenced; the partition's partial becomes NaN (so the sequence's output is NaN) and the error
// counter is incremented. A sequence whose seq_len is negative, exceeds max_seq_len or exceeds its block
// table gets a NaN output without any cache access.
#include <pagedattn/agent/agent_decode_plan.cuh>
#include <pagedattn/agent/agent_paged_attention_params.cuh>
#include <pagedattn/agent/agent_paged_attention_policy.cuh>
#include <pagedattn/agent/agent_partition_combine.cuh>
#include <pagedattn/agent/agent_slice_combine.cuh>
#include <pagedattn/agent/decode_tile_scheduler.cuh>
#include <pagedattn/agent/decode_traits.cuh>
#include <pagedattn/agent/decode_variant.cuh>
#include <pagedattn/agent/kv_cache_layout.cuh>
#include <pagedattn/grid/grid_barrier.cuh>
#include <pagedattn/agent/partition_fold_cuda_core.cuh>
#include <pagedattn/agent/partition_fold_tensor_core.cuh>
#include <pagedattn/thread/thread_online_softmax.cuh>
#include <pagedattn/util_type.cuh>

#include <cstdint>
#include <type_traits>

namespace pagedattn {

/// Traits: a DecodeTraits (agent/decode_traits.cuh), the instantiation's element types, head size, query rows,
/// policy, cache layout and variant (the score variant both folds and the sinks call, and the epilogue each
/// output element passes through).
template <class Traits>
class AgentPagedAttention {
public:
  using T = typename Traits::T;
  using KvT = typename Traits::KvT;
  using Policy = typename Traits::AgentPolicy;
  using KvLayout = typename Traits::KvLayout;
  using Variant = typename Traits::Variant;
  static constexpr int head_dim = Traits::head_dim;
  static constexpr int max_rows = Traits::max_rows;
  static constexpr int block_threads = Policy::block_threads;
  using Fold = std::conditional_t<detail::uses_tensor_cores<T, Policy, KvT>,
                                  PartitionFoldTensorCore<T, head_dim, max_rows, Policy, KvT, KvLayout, typename Variant::Score>,
                                  PartitionFoldCudaCore<T, head_dim, max_rows, Policy, KvT, KvLayout, typename Variant::Score>>;
  using Combine = AgentPartitionCombine<head_dim, max_rows, block_threads>;
  using SliceCombine = AgentSliceCombine<head_dim, max_rows, block_threads>;
  using Plan = AgentDecodePlan<block_threads>;
  /// The one-wave combine (cooperative launches) needs room for its staging beside the partial: the
  /// tensor-core fold's storage has it (it is done with it by then), the CUDA-core fold's does not.
  static constexpr bool one_wave_capable = Fold::partial_after_storage;
  using Scheduler = DecodeTileScheduler<PagedAttentionParams<T, KvT>, block_threads, one_wave_capable>;

  static_assert(head_is_whole_vectors<KvT>(head_dim), "a key is whole 16-byte vectors of the cache");
  static_assert(block_threads % warp_threads == 0, "block_threads must be a multiple of the warp width");

  /// The block's partial: stats [heads][2] (max score, exp sum), values [heads][head_dim].
  struct PartialStorage {
    float stats[max_rows * 2];
    alignas(16) float values[max_rows * head_dim];
  };
  /// The tensor-core fold is done with its storage (the K/V stages) before it writes the partial, so the
  /// partial and the combine's scratch reuse it: 8 KB less per block at head 256 (a third block per SM
  /// fits with two stages). The CUDA-core fold writes the partial from its block-reduce storage.
  struct AliasedStorage {
    union {
      typename Fold::TempStorage fold; ///< while the partition is folded (first: its alignment is the smem base's)
      struct {
        typename Combine::TempStorage combine;
        PartialStorage partial;
        typename SliceCombine::TempStorage slice;
      } after; ///< from Fold::Run's partial on
      typename Plan::TempStorage plan; ///< while the plan is made and a work item found, before its fold
    } phase;
    typename Plan::CursorState cursor;
    unsigned ticket;
    PAGEDATTN_DEVICE typename Plan::TempStorage& plan() { return phase.plan; }
    PAGEDATTN_DEVICE PartialStorage& partial() { return phase.after.partial; }
    PAGEDATTN_DEVICE typename Combine::TempStorage& combine() { return phase.after.combine; }
    PAGEDATTN_DEVICE typename SliceCombine::TempStorage& slice() { return phase.after.slice; }
  };
  struct SeparateStorage {
    union alignas(16) {
      typename Fold::TempStorage fold;
      typename Combine::TempStorage combine;
      typename Plan::TempStorage plan;
    } phase;
    PartialStorage partial_;
    typename Plan::CursorState cursor;
    unsigned ticket;
    PAGEDATTN_DEVICE typename Plan::TempStorage& plan() { return phase.plan; }
    PAGEDATTN_DEVICE PartialStorage& partial() { return partial_; }
    PAGEDATTN_DEVICE typename Combine::TempStorage& combine() { return phase.combine; }
  };
  using TempStorage = std::conditional_t<Fold::partial_after_storage, AliasedStorage, SeparateStorage>;

  PAGEDATTN_DEVICE AgentPagedAttention(TempStorage& temp, const PagedAttentionParams<T, KvT>& p,
                                       const Variant& variant = Variant{})
      : temp_(temp), p_(p), variant_(variant)
  {
  }

  /// The block's share of the launch. Every block plans the launch from the lengths (AgentDecodePlan: the
  /// same plan in every block), then takes its work items:
  /// - one wave (a cooperative launch in which every item has a block and the slice fold takes every
  ///   segment): block b takes item b, and every block meets the others once at the grid barrier;
  /// - otherwise tickets: a block that looks back waits only on items of smaller tickets, whose blocks
  ///   have started, so any number of resident blocks makes progress.
  /// Persistent: a grid of the resident blocks, each drawing tickets until the items run out (a graph's
  /// launch, whose bound may be far above the lengths it replays, and a plain one whose bound admits many
  /// waves of items). Else a block per item of the bound, each taking one ticket: no loop around the fold,
  /// which keeps its registers: a loop costs the tensor-core fold 24 registers at head 256 and 51 at head
  /// 128 before the policy's bound (bench/NOTES.md, "Length-aware scheduling: the device plan").
  template <bool Persistent>
  PAGEDATTN_DEVICE void Run()
  {
    PAGEDATTN_TRACE_POINT(TracePoint::block_start);
    Plan plan(temp_.plan(), temp_.cursor, p_.plan);
    Scheduler scheduler(plan, temp_.ticket, p_);
    if constexpr (!Persistent)
    {
      // One call of RunItem, whatever the path: the fold is inlined once (each copy is tens of KB of code).
      const typename Scheduler::Assignment a = scheduler.AssignPlain([&](const ItemPlace& place, int partition_tokens) {
        Fold::Prefetch(temp_.phase.fold, p_, place.seq, place.first_token, partition_tokens);
      });
      if (a.kind == Scheduler::Assignment::fold) { RunItem(a.item, a.place, a.index, a.partition_tokens, a.one_wave, a.prefetched); }
      if constexpr (one_wave_capable)
      {
        if (a.kind == Scheduler::Assignment::barrier_only) { GridBarrier::Sync(); } // every block arrives once
      }
    }
    else { RunPersistent(plan, scheduler); }
  }

private:
  /// A persistent launch (a graph's, or a plain one under a loose bound): the blocks draw tickets until the
  /// items run out. A block draws its next ticket only when it is done with its item: drawn earlier (when
  /// the partition is folded, or when its last tile begins), the item waits for this one's combine while
  /// idle blocks could take it, which measured 3-12 % slower on the skewed batches (bench/NOTES.md,
  /// "Length-aware scheduling: the device plan").
  PAGEDATTN_DEVICE void RunPersistent(Plan& plan, Scheduler& scheduler)
  {
    const PlannedLaunch launch = plan.ChooseLaunch();
    if constexpr (one_wave_capable)
    {
      if (scheduler.CombinesInOneWave(launch))
      {
        PAGEDATTN_TRACE_POINT(TracePoint::work_item_chosen);
        if (static_cast<int>(blockIdx.x) < launch.total_items)
        {
          const PlannedItem item = plan.ItemAt(blockIdx.x);
          RunItem(item, scheduler.PlaceOf(item, launch.partition_tokens), blockIdx.x, launch.partition_tokens, true, false);
        }
        else { GridBarrier::Sync(); } // every block arrives once
        return;
      }
      if (!p_.words_zeroed) { scheduler.ZeroCombineWords(); } // a cooperative launch without an init pass
    }
    if (threadIdx.x == 0) { arch::wait_for_prior_grids(); } // the init pass has zeroed the ticket and the counters (once)
    for (;;)
    {
      if (threadIdx.x == 0) { scheduler.template TakeTicket</*WaitForInit=*/false>(); }
      __syncthreads();
      const unsigned ticket = scheduler.Ticket();
      __syncthreads(); // every thread has the ticket before thread 0 writes the next
      if (ticket >= static_cast<unsigned>(launch.total_items)) { return; }
      PAGEDATTN_TRACE_POINT(TracePoint::work_item_chosen);
      const PlannedItem item = plan.ItemAt(ticket);
      RunItem(item, scheduler.PlaceOf(item, launch.partition_tokens), ticket, launch.partition_tokens, /*one_wave=*/false, false);
      __syncthreads(); // the storage is free for the next item
    }
  }

  /// Fold work item `item` (number `index`: its partial slot), at `place` (the scheduler's PlaceOf; its block
  /// ids prefetched already where `prefetched`), and combine it; with one_wave, the slice fold after the grid
  /// barrier, which this block reaches exactly once.
  PAGEDATTN_DEVICE void RunItem(const PlannedItem item, const ItemPlace place, unsigned index, int partition_tokens, bool one_wave,
                                bool prefetched)
  {
    const int seq = place.seq, kv_head = place.kv_head, first_row = place.first_row, rows = place.rows;
    const int first_token = place.first_token;
    if (!prefetched) { Fold::Prefetch(temp_.phase.fold, p_, seq, first_token, partition_tokens); }
    const int seq_len = item.seq_len; // the length the plan was made for (never seq_lens again)

    if (item.num_partitions <= 0) // an empty sequence (0) or an invalid length (-1): no cache access
    {
      const bool invalid = item.num_partitions < 0;
      const float fill = invalid ? __int_as_float(0x7fc00000) : 0.f;
      for (int i = threadIdx.x; i < rows * head_dim; i += block_threads)
      {
        const QueryRow row = query_row(p_, seq, seq_len, kv_head, first_row + i / head_dim);
        store_output(row.index, row.head, i % head_dim, fill);
      }
      if (invalid && threadIdx.x == 0 && p_.error_count) { arch::atomic_fetch_add(p_.error_count, 1u); }
      if constexpr (one_wave_capable)
      {
        if (one_wave) { GridBarrier::Sync(); }
      }
      return;
    }

    // ---- fold this partition's tokens into the block's partial ---------------------------------------------
    const PartitionWork work{seq,         kv_head, first_row, rows, seq_len, first_token, detail::min_int(first_token + partition_tokens, seq_len),
                             window_first_visible(seq_len, p_.plan.window_left)};
    PartialStorage& own = temp_.partial();
    const bool invalid = Fold::Run(temp_.phase.fold, p_, variant_.score, work, own.stats, own.values);
    __syncthreads(); // the partial is complete, and phase.fold is free for the combine
    PAGEDATTN_TRACE_POINT(TracePoint::partition_folded);
    if (invalid) // a block id outside the cache: this partition's partial (and the output) is NaN
    {
      const float nan = __int_as_float(0x7fc00000);
      for (int i = threadIdx.x; i < rows * head_dim; i += block_threads) { own.values[i] = nan; }
      if (threadIdx.x < rows) { own.stats[2 * threadIdx.x + 1] = nan; }
      if (threadIdx.x == 0 && p_.error_count) { arch::atomic_fetch_add(p_.error_count, 1u); }
      __syncthreads();
    }
    if (variant_.score.HasSinks(p_) && item.partition == 0) { FoldSinks(own, seq, seq_len, kv_head, first_row, rows); }

    // ---- merge the partitions of the segment (or write the single partition) -----------------------------
    // The segment's partials are the slots of its items: the plan lays them out back to back.
    const SegmentSlots slots{index - static_cast<unsigned>(item.partition), static_cast<std::size_t>(item.first_group)};
    if constexpr (one_wave_capable)
    {
      if (one_wave)
      {
        CombineInOneWave(slots, item.partition, item.num_partitions, rows, OutputWriter{this, seq, seq_len, kv_head, first_row});
        return;
      }
    }
    Combine combine(temp_.combine(), rows);
    combine.Run(p_.state, slots, item.partition, item.num_partitions, own.stats, own.values, OutputWriter{this, seq, seq_len, kv_head, first_row});
  }

  TempStorage& temp_;
  const PagedAttentionParams<T, KvT>& p_;
  const Variant& variant_;

  /// Attention sinks: each query row's sink (its head's) joins its partition-0 partial (fold_sink: one more
  /// token, of value 0), so that whichever combine runs (look-back, slices, a single partition) counts it
  /// once. Every thread first rescales its values from the old statistics, then the statistics are replaced.
  PAGEDATTN_DEVICE void FoldSinks(PartialStorage& own, int seq, int seq_len, int kv_head, int first_row, int rows)
  {
    for (int i = threadIdx.x; i < rows * head_dim; i += block_threads)
    {
      const int h = i / head_dim;
      float max_score = own.stats[2 * h], exp_sum = own.stats[2 * h + 1];
      const float sink = variant_.score.Sink(p_, query_row(p_, seq, seq_len, kv_head, first_row + h));
      own.values[i] = detail::mul_rn(fold_sink(max_score, exp_sum, sink), own.values[i]);
    }
    __syncthreads();
    if (static_cast<int>(threadIdx.x) < rows)
    {
      const float sink = variant_.score.Sink(p_, query_row(p_, seq, seq_len, kv_head, first_row + threadIdx.x));
      fold_sink(own.stats[2 * threadIdx.x], own.stats[2 * threadIdx.x + 1], sink);
    }
    __syncthreads();
  }

  /// One-wave combine (AgentSliceCombine): store the aggregate, meet every block of the grid, fold this
  /// block's slice of the segment. A single-partition segment writes its output directly (and arrives).
  template <class WriteOutput>
  PAGEDATTN_DEVICE void CombineInOneWave(const SegmentSlots& slots, int partition, int num_partitions, int heads, WriteOutput write)
  {
    const PartialStorage& own = temp_.partial();
    SliceCombine slice(temp_.slice(), heads);
    if (num_partitions > 1) { slice.StoreAggregate(p_.state, slots, partition, own.stats, own.values); }
    else { Combine(temp_.combine(), heads).Run(p_.state, slots, 0, 1, own.stats, own.values, write); }
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
    const AgentPagedAttention* agent;
    int seq, seq_len, kv_head, first_row;
    /// Elements 4 vector .. 4 vector + 3 of row first_row + h, through the epilogue: one store where the
    /// output is aligned for it (the strides are the caller's), else four.
    PAGEDATTN_DEVICE void operator()(int h, int vector, float4 v) const
    {
      const QueryRow row = query_row(agent->p_, seq, seq_len, kv_head, first_row + h);
      const int index = row.index, head = row.head, d = 4 * vector;
      T* dst = agent->output_ptr(index, head, d);
      const Variant& e = agent->variant_;
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
  /// One output element, through the epilogue.
  PAGEDATTN_DEVICE void store_output(int index, int head, int d, float value) const
  {
    *output_ptr(index, head, d) = ElementTraits<T>::from_float(variant_.Output(value, index, head, d));
  }
};

} // namespace pagedattn
