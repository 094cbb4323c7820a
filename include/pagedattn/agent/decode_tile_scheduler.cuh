#pragma once
// The decode's tile scheduler: which work items each thread block of a launch folds, and in which combine. It
// draws the tickets (the init pass zeroes them, or ZeroCombineWords in a cooperative launch without one),
// decides once per plan whether a launch combines in one wave, says where an item lies (ItemPlace), assigns
// a plain launch's block its item (AssignPlain: the uniform fast path and its speculation, or the device
// plan's item) and runs a persistent launch's loop of tickets. Run hands each item to the agent's callback,
// which folds it (the mainloop) and combines and writes it (DecodeEpilogue).
#include <pagedattn/agent/agent_decode_plan.cuh>
#include <pagedattn/agent/agent_slice_combine.cuh>
#include <pagedattn/agent/decode_schedule.cuh>
#include <pagedattn/grid/grid_barrier.cuh>
#include <pagedattn/util_arch.cuh>

#include <cstddef>

namespace pagedattn {

/// Where a work item lies: its sequence, KV head, query rows (QueryRow: rows first_row .. first_row + rows - 1
/// of the KV head's, of the sequence's span; rows <= 0: a head part past the sequence's rows, nothing to do)
/// and first token (integer divisions by runtime values: worked out while the block waits for a load where it
/// can). Under a sliding window the partitions start at the rows' fold start (window_fold_start; an invalid
/// length has none). PlaceOf gives the span of q_len rows; WithQueryOffsets the sequence's own, from the
/// offsets, once the item is taken (the offsets stay off the path to the first copies).
struct ItemPlace {
  int seq, kv_head, first_row, rows, first_token;
  QuerySpan span;
};

/// Params: the kernel's PagedAttentionParams. BlockThreads: the block's threads. OneWaveCapable: whether the
/// kernel may combine in one wave (its agent's storage has room for the slice fold, and its policy asks).
/// QueryOffsets: the launch may have query offsets; false (a launch without them) compiles none of their code.
template <class Params, int BlockThreads, bool OneWaveCapable, bool QueryOffsets = true>
class DecodeTileScheduler {
public:
  using Plan = AgentDecodePlan<BlockThreads, QueryOffsets>;

  /// plan: the block's plan of the launch; ticket: a shared word for the drawn ticket.
  PAGEDATTN_DEVICE DecodeTileScheduler(Plan& plan, unsigned& ticket, const Params& p) : plan_(plan), ticket_(ticket), p_(p) {}

  /// The block's share of the launch: run_item(item, place, index, partition_tokens, one_wave, prefetched)
  /// for each work item it takes (index: the item's partial slot; one_wave: it combines in one wave, and
  /// meets the grid's other blocks exactly once; prefetched: its block ids were staged by prefetch(place,
  /// partition_tokens), the fold's Prefetch, during the assignment).
  /// - Plain (a block per item of the bound): one item at most (AssignPlain), so that the fold is inlined
  ///   once (each copy is tens of KB of code) and no loop surrounds it, which keeps its registers: a loop
  ///   costs the tensor-core fold 24 registers at head 256 and 51 at head 128 before the policy's bound
  ///   (bench/NOTES.md, "Length-aware scheduling: the device plan").
  /// - Persistent (a grid of the resident blocks: a graph's launch, whose bound may be far above the lengths
  ///   it replays, and a plain one whose bound admits many waves of items): the one-wave launch's item b,
  ///   or tickets until the items run out (RunTickets).
  template <bool Persistent, class Prefetch, class RunItem>
  PAGEDATTN_DEVICE void Run(Prefetch&& prefetch, RunItem&& run_item)
  {
    // Every item reaches the callback with its sequence's own query rows (WithQueryOffsets).
    auto run_placed = [&](const PlannedItem& item, const ItemPlace& place, unsigned index, int partition_tokens, bool one_wave,
                          bool prefetched) { run_item(item, WithQueryOffsets(place), index, partition_tokens, one_wave, prefetched); };
    if constexpr (!Persistent)
    {
      const Assignment a = AssignPlain(prefetch);
      if (a.kind == Assignment::fold) { run_placed(a.item, a.place, a.index, a.partition_tokens, a.one_wave, a.prefetched); }
      if constexpr (OneWaveCapable)
      {
        if (a.kind == Assignment::barrier_only) { GridBarrier::Sync(); } // every block arrives once
      }
    }
    else { RunTickets(run_placed); }
  }

private:
  /// Whether a launch combines in one wave: a cooperative launch in which every item has a block and the
  /// slice fold takes every segment (block b folds item b, the blocks meet once at the grid barrier).
  PAGEDATTN_DEVICE bool CombinesInOneWave(const PlannedLaunch& launch) const
  {
    return OneWaveCapable && p_.cooperative && launch.total_items <= static_cast<int>(gridDim.x) &&
           launch.max_partitions <= one_wave_max_partitions;
  }

  /// Thread 0: the block's next ticket into the shared word, which the block reads (Ticket()) after a barrier. WaitForInit:
  /// first wait for the init pass, which zeroes the ticket and the counters (programmatic dependent launch).
  template <bool WaitForInit>
  PAGEDATTN_DEVICE void TakeTicket()
  {
    if constexpr (WaitForInit) { arch::wait_for_prior_grids(); }
    ticket_ = arch::atomic_fetch_add(p_.state.ticket, 1u);
  }

  /// The ticket drawn last (after the barrier that follows TakeTicket).
  PAGEDATTN_DEVICE unsigned Ticket() const { return ticket_; }

  /// A cooperative launch without an init pass whose lengths need the look-back: every block zeroes its
  /// share of the ticket, arrival counters and statuses, then all meet at the grid barrier (which publishes
  /// the zeros) before any ticket is drawn.
  PAGEDATTN_DEVICE void ZeroCombineWords()
  {
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * BlockThreads;
    for (std::size_t i = blockIdx.x * static_cast<std::size_t>(BlockThreads) + threadIdx.x; i < p_.reset_words; i += stride)
    {
      p_.state.ticket[i] = 0u;
    }
    GridBarrier::Sync();
  }

  /// Where work item `item` lies (ItemPlace).
  PAGEDATTN_DEVICE ItemPlace PlaceOf(const PlannedItem& item, int partition_tokens) const
  {
    const int seq = p_.by_segments_per_seq.quotient(item.segment);
    const int k = item.segment - seq * p_.head_parts * p_.num_kv_heads; // kv_head * head_parts + head_part
    const int kv_head = p_.head_parts == 1 ? k : p_.by_head_parts.quotient(k);
    const int head_part = k - kv_head * p_.head_parts;
    const int fold_start = item.num_partitions > 0 ? window_fold_start(item.seq_len, p_.plan.window_left, p_.block_size) : 0;
    const int first_row = head_part * p_.rows_per_part;
    return {seq, kv_head, first_row, detail::min_int(p_.rows_per_part, p_.q_len * p_.gqa_ratio - first_row),
            fold_start + item.partition * partition_tokens, query_span(nullptr, seq, p_.q_len, 0)};
  }

  /// `place` with its sequence's own query rows where the launch has query offsets (PlannedLength: the plan
  /// has read them too).
  PAGEDATTN_DEVICE ItemPlace WithQueryOffsets(ItemPlace place) const
  {
    if (QueryOffsets && p_.plan.query_start_loc)
    {
      place.span = query_span(p_.plan.query_start_loc, place.seq, p_.q_len, p_.plan.num_query_rows);
      place.rows = detail::min_int(place.rows, place.span.count * p_.gqa_ratio - place.first_row);
    }
    return place;
  }

  /// A persistent launch: the blocks draw tickets until the items run out. A block draws its next ticket
  /// only when it is done with its item: drawn earlier (when the partition is folded, or when its last tile
  /// begins), the item waits for this one's combine while idle blocks could take it, which measured 3-12 %
  /// slower on the skewed batches (bench/NOTES.md, "Length-aware scheduling: the device plan").
  template <class RunItem>
  PAGEDATTN_DEVICE void RunTickets(RunItem& run_item)
  {
    const PlannedLaunch launch = plan_.ChooseLaunch();
    if constexpr (OneWaveCapable)
    {
      if (CombinesInOneWave(launch))
      {
        PAGEDATTN_TRACE_POINT(TracePoint::work_item_chosen);
        if (static_cast<int>(blockIdx.x) < launch.total_items)
        {
          const PlannedItem item = plan_.ItemAt(blockIdx.x);
          run_item(item, PlaceOf(item, launch.partition_tokens), blockIdx.x, launch.partition_tokens, true, false);
        }
        else { GridBarrier::Sync(); } // every block arrives once
        return;
      }
      if (!p_.words_zeroed) { ZeroCombineWords(); } // a cooperative launch without an init pass
    }
    if (threadIdx.x == 0) { arch::wait_for_prior_grids(); } // the init pass has zeroed the ticket and the counters (once)
    for (;;)
    {
      if (threadIdx.x == 0) { TakeTicket</*WaitForInit=*/false>(); }
      __syncthreads();
      const unsigned ticket = Ticket();
      __syncthreads(); // every thread has the ticket before thread 0 writes the next
      if (ticket >= static_cast<unsigned>(launch.total_items)) { return; }
      PAGEDATTN_TRACE_POINT(TracePoint::work_item_chosen);
      const PlannedItem item = plan_.ItemAt(ticket);
      run_item(item, PlaceOf(item, launch.partition_tokens), ticket, launch.partition_tokens, /*one_wave=*/false, false);
      __syncthreads(); // the storage is free for the next item
    }
  }

  /// What a block of a plain launch does: fold one item, only arrive at the grid barrier (a one-wave launch
  /// with fewer items than blocks), or nothing.
  struct Assignment {
    enum Kind { none, fold, barrier_only } kind;
    PlannedItem item;
    ItemPlace place;
    unsigned index;
    int partition_tokens;
    bool one_wave, prefetched;
  };

  /// A plain launch: a block per item of the bound. A batch without query offsets whose every length is
  /// max_seq_len (the batch the host planned for: its partition size, its grid, its one-wave decision) takes
  /// the host's plan with no planning at all: the block reads the lengths while it prefetches its item's
  /// block ids and draws its ticket, and one barrier says whether every length is the bound. Any other batch
  /// is planned (AgentDecodePlan: with offsets every sequence at the bound still gets the host's plan,
  /// PlannedLength), its first ticket the one drawn with the check (a second draw would leave an item
  /// without a block).
  ///
  /// prefetch(place, partition_tokens) stages the guessed item's block ids (the fold's Prefetch) while the
  /// lengths load.
  template <class Prefetch>
  PAGEDATTN_DEVICE Assignment AssignPlain(Prefetch&& prefetch)
  {
    const DecodePlanParams& q = p_.plan;
    // The lengths first: their round trip overlaps everything up to the check.
    const bool has_first = static_cast<int>(threadIdx.x) < q.num_seqs;
    const int first_len = has_first ? q.seq_lens[threadIdx.x] : q.max_seq_len;
    const PlannedLaunch uniform = plan_.UniformLaunchOf();
    const bool uniform_one_wave = CombinesInOneWave(uniform);
    // Speculation: the item of this block's index (the one-wave item, and mostly the ticket's too).
    const bool speculate = static_cast<int>(blockIdx.x) < uniform.total_items;
    PlannedItem guess{};
    ItemPlace guess_place{};
    if (speculate)
    {
      guess = plan_.UniformItemAt(blockIdx.x);
      guess_place = PlaceOf(guess, uniform.partition_tokens);
      prefetch(guess_place, uniform.partition_tokens);
    }
    // Blocks past the plan's item budget draw theirs after the check: a batch that is not uniform may let
    // them leave without one (ChooseLaunch's exit_from).
    const bool within_budget = static_cast<unsigned long long>(blockIdx.x) < q.item_budget;
    const bool drew_ticket = !uniform_one_wave && (within_budget || p_.cooperative);
    if (threadIdx.x == 0 && drew_ticket) { TakeTicket</*WaitForInit=*/true>(); } // with the check: its atomic overlaps the lengths' loads
    // A launch with query offsets is always planned (a batch at the bound gets the host's plan there too), so
    // the check compares lengths alone: the offsets' reading inlined here, even unexecuted, cost 1x1000 at
    // head 256 ~0.3 us (bench/NOTES.md, "Per-sequence query rows").
    bool mine = (!QueryOffsets || !q.query_start_loc) && (!has_first || first_len == q.max_seq_len);
    for (int i = threadIdx.x + BlockThreads; i < q.num_seqs; i += BlockThreads) { mine &= q.seq_lens[i] == q.max_seq_len; }
    if (__syncthreads_and(mine))
    {
      PAGEDATTN_TRACE_POINT(TracePoint::work_item_chosen);
      if (uniform_one_wave)
      {
        if (!speculate) { return {Assignment::barrier_only, {}, {}, 0, 0, false, false}; }
        return {Assignment::fold, guess, guess_place, blockIdx.x, uniform.partition_tokens, true, true};
      }
      if (!drew_ticket)
      {
        if (threadIdx.x == 0) { TakeTicket</*WaitForInit=*/true>(); }
        __syncthreads();
      }
      const unsigned ticket = ticket_;
      if (ticket >= static_cast<unsigned>(uniform.total_items)) { return {Assignment::none, {}, {}, 0, 0, false, false}; }
      if (speculate && ticket == blockIdx.x) { return {Assignment::fold, guess, guess_place, ticket, uniform.partition_tokens, false, true}; }
      const PlannedItem item = plan_.UniformItemAt(ticket); // (its block ids staged again: nobody has read the guess's)
      return {Assignment::fold, item, PlaceOf(item, uniform.partition_tokens), ticket, uniform.partition_tokens, false, false};
    }

    const PlannedLaunch launch = plan_.ChooseLaunch(p_.cooperative ? -1 : static_cast<long long>(q.item_budget));
    if (launch.partition_tokens == 0) { return {Assignment::none, {}, {}, 0, 0, false, false}; } // past the budget
    if (CombinesInOneWave(launch))
    {
      PAGEDATTN_TRACE_POINT(TracePoint::work_item_chosen);
      if (static_cast<int>(blockIdx.x) >= launch.total_items) { return {Assignment::barrier_only, {}, {}, 0, 0, false, false}; }
      const PlannedItem item = plan_.ItemAt(blockIdx.x);
      return {Assignment::fold, item, PlaceOf(item, launch.partition_tokens), blockIdx.x, launch.partition_tokens, true, false};
    }
    if (threadIdx.x == 0 && !drew_ticket) { TakeTicket</*WaitForInit=*/true>(); }
    __syncthreads();
    const unsigned ticket = ticket_;
    if (ticket >= static_cast<unsigned>(launch.total_items)) { return {Assignment::none, {}, {}, 0, 0, false, false}; }
    PAGEDATTN_TRACE_POINT(TracePoint::work_item_chosen);
    const PlannedItem item = plan_.ItemAt(ticket);
    return {Assignment::fold, item, PlaceOf(item, launch.partition_tokens), ticket, launch.partition_tokens, false, false};
  }

  Plan& plan_;
  unsigned& ticket_;
  const Params& p_;
};

} // namespace pagedattn
