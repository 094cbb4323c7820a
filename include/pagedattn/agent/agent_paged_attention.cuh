#pragma once
// The thread block's share of the paged decode, as three types: the tile scheduler (DecodeTileScheduler:
// which (sequence, KV head, group of query rows, KV partition) work items the block takes), the mainloop
// (the partition fold: each K/V vector is loaded once and used for every query row of the group, GQA) and
// the epilogue (DecodeEpilogue: the combine of the segment's partitions and the output).
//
// The mainloop is one of two folds: PartitionFoldTensorCore (mma.sync on a shared-memory pipeline; fp16/bf16
// on sm_80+, when the policy asks for tensor cores) or PartitionFoldCudaCore (fp32 FMAs; every type, and
// BI-V100).
//
// Invalid input never causes an out-of-range read: a block id outside [0, num_blocks) is not
// dereferenced; the partition's partial becomes NaN (so the sequence's output is NaN) and the error
// counter is incremented. A sequence whose seq_len is negative, exceeds max_seq_len or exceeds its block
// table gets a NaN output without any cache access.
#include <pagedattn/agent/agent_decode_plan.cuh>
#include <pagedattn/agent/agent_paged_attention_params.cuh>
#include <pagedattn/agent/agent_paged_attention_policy.cuh>
#include <pagedattn/agent/decode_epilogue.cuh>
#include <pagedattn/agent/decode_tile_scheduler.cuh>
#include <pagedattn/agent/decode_traits.cuh>
#include <pagedattn/agent/decode_variant.cuh>
#include <pagedattn/agent/kv_cache_layout.cuh>
#include <pagedattn/agent/partition_fold_cuda_core.cuh>
#include <pagedattn/agent/partition_fold_tensor_core.cuh>
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
  /// The mainloop: the partition fold (Prefetch, then Run: a work item's tokens into the block's partial).
  using Mainloop = std::conditional_t<detail::uses_tensor_cores<T, Policy, KvT>,
                                      PartitionFoldTensorCore<T, head_dim, max_rows, Policy, KvT, KvLayout, typename Variant::Score>,
                                      PartitionFoldCudaCore<T, head_dim, max_rows, Policy, KvT, KvLayout, typename Variant::Score>>;
  using Plan = AgentDecodePlan<block_threads>;
  /// The one-wave combine (cooperative launches) needs room for its staging beside the partial: the
  /// tensor-core fold's storage has it (it is done with it by then), the CUDA-core fold's does not.
  static constexpr bool one_wave_capable = Mainloop::partial_after_storage;
  template <bool QueryOffsets>
  using Scheduler = DecodeTileScheduler<PagedAttentionParams<T, KvT>, block_threads, one_wave_capable, QueryOffsets>;
  using Epilogue = DecodeEpilogue<Traits, block_threads, one_wave_capable>;
  using Combine = typename Epilogue::Combine;
  using SliceCombine = typename Epilogue::SliceCombine;
  using PartialStorage = typename Epilogue::PartialStorage;

  static_assert(head_is_whole_vectors<KvT>(head_dim), "a key is whole 16-byte vectors of the cache");
  static_assert(block_threads % warp_threads == 0, "block_threads must be a multiple of the warp width");

  /// The tensor-core fold is done with its storage (the K/V stages) before it writes the partial, so the
  /// partial and the combine's scratch reuse it: 8 KB less per block at head 256 (a third block per SM
  /// fits with two stages). The CUDA-core fold writes the partial from its block-reduce storage.
  struct AliasedStorage {
    union {
      typename Mainloop::TempStorage fold; ///< while the partition is folded (first: its alignment is the smem base's)
      struct {
        typename Combine::TempStorage combine;
        PartialStorage partial;
        typename SliceCombine::TempStorage slice;
      } after; ///< from Mainloop::Run's partial on
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
      typename Mainloop::TempStorage fold;
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
  using TempStorage = std::conditional_t<Mainloop::partial_after_storage, AliasedStorage, SeparateStorage>;

  PAGEDATTN_DEVICE AgentPagedAttention(TempStorage& temp, const PagedAttentionParams<T, KvT>& p,
                                       const Variant& variant = Variant{})
      : temp_(temp), p_(p), variant_(variant)
  {
  }

  /// The block's share of the launch. Every block plans the launch from the lengths (AgentDecodePlan: the
  /// same plan in every block), then takes its work items from the scheduler (DecodeTileScheduler::Run):
  /// - one wave (a cooperative launch in which every item has a block and the slice fold takes every
  ///   segment): block b takes item b, and every block meets the others once at the grid barrier;
  /// - otherwise tickets: a block that looks back waits only on items of smaller tickets, whose blocks
  ///   have started, so any number of resident blocks makes progress.
  /// Persistent: a grid of the resident blocks, each drawing tickets until the items run out; else a block
  /// per item of the bound, each taking one ticket. QueryOffsets: the launch has query offsets (false: none of
  /// their code is compiled in, bench/NOTES.md, "Per-sequence query rows").
  template <bool Persistent, bool QueryOffsets>
  PAGEDATTN_DEVICE void Run()
  {
    PAGEDATTN_TRACE_POINT(TracePoint::block_start);
    typename Scheduler<QueryOffsets>::Plan plan(temp_.plan(), temp_.cursor, p_.plan);
    Scheduler<QueryOffsets> scheduler(plan, temp_.ticket, p_);
    scheduler.template Run<Persistent>(
        [&](const ItemPlace& place, int partition_tokens) { Mainloop::Prefetch(temp_.phase.fold, p_, place.seq, place.first_token, partition_tokens); },
        [&](const PlannedItem& item, const ItemPlace& place, unsigned index, int partition_tokens, bool one_wave, bool prefetched) {
          RunItem(item, place, index, partition_tokens, one_wave, prefetched);
        });
  }

private:
  /// Fold work item `item` (number `index`: its partial slot), at `place` (the scheduler's PlaceOf; its block
  /// ids prefetched already where `prefetched`): the mainloop, then the epilogue.
  PAGEDATTN_DEVICE void RunItem(const PlannedItem item, const ItemPlace place, unsigned index, int partition_tokens, bool one_wave,
                                bool prefetched)
  {
    const int seq = place.seq, kv_head = place.kv_head, first_row = place.first_row, rows = place.rows;
    const int first_token = place.first_token;
    if (!prefetched) { Mainloop::Prefetch(temp_.phase.fold, p_, seq, first_token, partition_tokens); }
    const int seq_len = item.seq_len; // the length the plan was made for (never seq_lens again)
    Epilogue epilogue(EpilogueStorage(), p_, variant_);
    // An empty sequence (0), an invalid length or query offsets (-1), or a head part past the sequence's
    // query rows: no cache access.
    if (item.num_partitions <= 0 || rows <= 0)
    {
      epilogue.WriteWithoutFold(item, place, one_wave);
      return;
    }

    // ---- the mainloop: fold this partition's tokens into the block's partial --------------------------------
    const PartitionWork work{seq,         place.span, kv_head, first_row, rows, seq_len, first_token,
                             detail::min_int(first_token + partition_tokens, seq_len), window_first_visible(seq_len, p_.plan.window_left)};
    PartialStorage& own = temp_.partial();
    const bool invalid = Mainloop::Run(temp_.phase.fold, p_, variant_.score, work, own.stats, own.values);
    __syncthreads(); // the partial is complete, and phase.fold is free for the combine
    PAGEDATTN_TRACE_POINT(TracePoint::partition_folded);

    // ---- the epilogue: merge the partitions of the segment (or write the single partition) -----------------
    epilogue.Run(invalid, item, place, index, one_wave);
  }

  PAGEDATTN_DEVICE typename Epilogue::Storage EpilogueStorage()
  {
    if constexpr (one_wave_capable) { return {temp_.partial(), temp_.combine(), &temp_.slice()}; }
    else { return {temp_.partial(), temp_.combine(), nullptr}; }
  }

  TempStorage& temp_;
  const PagedAttentionParams<T, KvT>& p_;
  const Variant& variant_;
};

} // namespace pagedattn
