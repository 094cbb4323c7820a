// The whole CUDA-core decode (planning pass, then the persistent decode kernel with its atomic tickets,
// partition folds and decoupled look-back combine) run on the host by the emulated CUDA machine of
// test/emulation (one std::thread per CUDA thread, every block of the grid at once), in fp32, against an
// fp64 reference. CI has no GPU: this is where the device logic of a launch is checked there.
//
// Build (test/CMakeLists.txt does the same):
//   g++ -std=c++20 -pthread -O2 -fno-strict-aliasing -I test/emulation -I include test/emulated/test_decode_emulated_host.cpp
// test/emulation first: <cuda_runtime.h>, <cuda_fp16.h> and <cooperative_groups.h> resolve to the stand-ins. Add
// -D__ILUVATAR__ for BI-V100's 64-lane warps. -fno-strict-aliasing: the device code puns types as CUDA allows.
#include <pagedattn/device/dispatch/decode_device.cuh>
#include <pagedattn/device/dispatch/decode_params.cuh>
#include <pagedattn/device/dispatch/decode_plan.cuh>
#include <pagedattn/device/dispatch/tuning/tuning_paged_attention.cuh>

#include <emulated_launch.h>

#include "agent/decode_schedule_reference.cuh"
#include "query_temperature.cuh"

#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <type_traits>
#include <vector>

namespace {

using namespace pagedattn;

/// The default policy's CUDA-core decode: 4 warps of 32 lanes, no tensor cores, no one-wave launch.
struct EmulatedPolicy : AgentPagedAttentionPolicy {
  static constexpr const char* name = "emulated";
};

// ---- the problem --------------------------------------------------------------------------------------------
struct Shape {
  std::vector<int> seq_lens;
  int num_heads = 4, num_kv_heads = 2, head_size = 64, block_size = 16;
  int partition_tokens = 32;
  bool alibi = false;
  CacheLayout layout = CacheLayout::vllm; ///< the caches' layout (packed)
  float softcap = 0.f;                    ///< DecodeArguments::logit_softcap
  bool sinks = false;                     ///< attention sinks per head: -inf, 0.5, 3, 1e4 in turn
  int window_left = -1;                   ///< DecodeArguments::window_left; blocks wholly before a window get
                                          ///< the table entry -1 (reading one gives NaN and an error count)
  int q_len = 1;                          ///< DecodeArguments::q_len: rows [num_seqs * q_len][num_heads][head_size]
  std::vector<int> query_rows;            ///< per sequence, 0 .. q_len new tokens (DecodeArguments::query_start_loc,
                                          ///< packed in order, one spare row after them); empty: q_len each

  int rows_of(int q) const { return query_rows.empty() ? q_len : query_rows[std::size_t(q)]; }
  /// DecodeArguments::query_start_loc: the sequences' first rows, then their end.
  std::vector<int> query_offsets() const
  {
    std::vector<int> o{0};
    for (std::size_t q = 0; q < seq_lens.size(); ++q) { o.push_back(o.back() + rows_of(int(q))); }
    return o;
  }
  int first_row_of(int q) const { return query_offsets()[std::size_t(q)]; }
  int total_rows() const { return query_offsets().back() + (query_rows.empty() ? 0 : 1); }
  /// What the plan reads of each sequence (planned_length): its length, 0 without rows.
  std::vector<int> planned_lens() const
  {
    std::vector<int> lens = seq_lens;
    for (std::size_t q = 0; q < lens.size(); ++q) { lens[q] = rows_of(int(q)) > 0 ? lens[q] : 0; }
    return lens;
  }
};

struct Problem {
  Shape shape;
  int num_seqs = 0, max_blocks_per_seq = 0, max_seq_len = 0;
  std::int64_t num_blocks = 0;
  float scale = 0;
  std::vector<float> query, key, value, alibi, sinks; // key/value: in shape.layout (DecodeArguments)
  std::vector<int> block_tables;
  /// A score variant's factor on the scaled score of the query at a position (before the soft-cap; the
  /// reference's, for a variant such as QueryTemperature); empty: 1.
  std::function<double(int)> logit_factor;

  explicit Problem(const Shape& s, std::uint64_t seed) : shape(s)
  {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> uniform(-1.f, 1.f);
    num_seqs = static_cast<int>(s.seq_lens.size());
    max_seq_len = *std::max_element(s.seq_lens.begin(), s.seq_lens.end());
    max_blocks_per_seq = std::max(1, (max_seq_len + s.block_size - 1) / s.block_size);
    int used = 0;
    for (int len : s.seq_lens) { used += (len + s.block_size - 1) / s.block_size; }
    num_blocks = used + 3; // spare blocks, NaN
    scale = 1.f / std::sqrt(float(s.head_size));
    query.resize(std::size_t(s.total_rows()) * s.num_heads * s.head_size);
    for (float& q : query) { q = 3.f * uniform(rng); }
    const std::size_t cache = std::size_t(num_blocks) * s.num_kv_heads * s.head_size * s.block_size;
    key.assign(cache, std::numeric_limits<float>::quiet_NaN()); // NaN wherever no token lives
    value.assign(cache, std::numeric_limits<float>::quiet_NaN());
    std::vector<int> ids(static_cast<std::size_t>(num_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng); // scattered over the cache
    block_tables.assign(std::size_t(num_seqs) * max_blocks_per_seq, -1); // never read past a sequence's blocks
    int next = 0;
    for (int q = 0; q < num_seqs; ++q)
    {
      const int first_visible = window_first_visible(s.seq_lens[q], rows_window_left(s.window_left, s.q_len)); // (the new tokens' first)
      for (int b = 0; b < (s.seq_lens[q] + s.block_size - 1) / s.block_size; ++b)
      {
        const bool before_window = (b + 1) * s.block_size <= first_visible;
        block_tables[std::size_t(q) * max_blocks_per_seq + b] = before_window ? -1 : ids[next];
        ++next;
      }
      for (int t = first_visible / s.block_size * s.block_size; t < s.seq_lens[q]; ++t)
      {
        for (int h = 0; h < s.num_kv_heads; ++h)
        {
          for (int d = 0; d < s.head_size; ++d)
          {
            key[key_offset(q, t, h, d)] = uniform(rng);
            value[value_offset(q, t, h, d)] = uniform(rng);
          }
        }
      }
    }
    if (s.alibi)
    {
      alibi.resize(s.num_heads);
      for (int h = 0; h < s.num_heads; ++h) { alibi[h] = -std::ldexp(1.f, -(h + 1)); }
    }
    if (s.sinks)
    {
      const float cycle[] = {-std::numeric_limits<float>::infinity(), 0.5f, 3.f, 1e4f}; // 1e4: the sink takes it all (output 0)
      for (int h = 0; h < s.num_heads; ++h) { sinks.push_back(cycle[h % 4]); }
    }
  }

  static constexpr int x = elements_per_vector<float>;
  std::size_t block_of(int q, int t) const { return std::size_t(block_tables[std::size_t(q) * max_blocks_per_seq + t / shape.block_size]); }
  /// Token rows, packed: HND [block][kv head][token][dim], NHD [block][token][kv head][dim].
  std::size_t row_offset(int q, int t, int h, int d) const
  {
    const std::size_t block = block_of(q, t), slot = std::size_t(t % shape.block_size), H = shape.num_kv_heads, D = shape.head_size;
    return shape.layout == CacheLayout::hnd ? ((block * H + h) * shape.block_size + slot) * D + d : ((block * shape.block_size + slot) * H + h) * D + d;
  }
  std::size_t key_offset(int q, int t, int h, int d) const
  {
    if (shape.layout != CacheLayout::vllm) { return row_offset(q, t, h, d); }
    const std::size_t head_base = block_of(q, t) * shape.num_kv_heads + h;
    return ((head_base * (shape.head_size / x) + d / x) * shape.block_size + t % shape.block_size) * x + d % x;
  }
  std::size_t value_offset(int q, int t, int h, int d) const
  {
    if (shape.layout != CacheLayout::vllm) { return row_offset(q, t, h, d); }
    const std::size_t head_base = block_of(q, t) * shape.num_kv_heads + h;
    return (head_base * shape.head_size + d) * shape.block_size + t % shape.block_size;
  }

  /// fp64 attention of (seq, head) for new token i of the sequence's n (Shape::q_len, query_rows), which sees
  /// its first seq_len - n + 1 + i positions; zeros when it sees none.
  std::vector<double> reference(int q, int head, int i = 0) const
  {
    const int D = shape.head_size, kvh = head / (shape.num_heads / shape.num_kv_heads), len = shape.seq_lens[q] - shape.rows_of(q) + 1 + i;
    const std::size_t row = std::size_t(shape.first_row_of(q)) + i;
    std::vector<double> out(D, 0.0);
    if (len <= 0) { return out; }
    const int first = window_first_visible(len, shape.window_left);
    std::vector<double> score(len, -INFINITY);
    for (int t = first; t < len; ++t)
    {
      double acc = 0;
      for (int d = 0; d < D; ++d) { acc += double(query[(row * shape.num_heads + head) * D + d]) * key[key_offset(q, t, kvh, d)]; }
      const double scaled = acc * scale * (logit_factor ? logit_factor(len - 1) : 1.0);
      const double logit = shape.softcap > 0 ? shape.softcap * std::tanh(scaled / shape.softcap) : scaled;
      score[t] = logit + (alibi.empty() ? 0.0 : double(alibi[head]) * (t - len + 1));
    }
    const double sink = sinks.empty() ? -INFINITY : double(sinks[head]);
    const double m = std::max(sink, *std::max_element(score.begin(), score.end()));
    double sum = std::exp(sink - m);
    for (int t = first; t < len; ++t)
    {
      const double p = std::exp(score[t] - m);
      sum += p;
      for (int d = 0; d < D; ++d) { out[d] += p * value[value_offset(q, t, kvh, d)]; }
    }
    for (double& v : out) { v /= sum; }
    return out;
  }
};

// Stalled tickets: the block that draws one of them sleeps before it folds the item, so that later combine
// groups of its segment finish first and look back past a group that is not yet published.
const unsigned* stall_ticket_address = nullptr;
std::vector<bool> stall_tickets;
int stall_ms = 0;
void stall_after_ticket(const unsigned* address, unsigned old)
{
  if (address == stall_ticket_address && old < stall_tickets.size() && stall_tickets[old])
  {
    // At least stall_ms, then until some block's look-back has polled (a back-off sleep) or 20 s have
    // passed: on a loaded machine the other blocks may reach their look-back only after a fixed sleep.
    const unsigned long long polls = emu::fence_block_calls.load();
    const auto start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(stall_ms));
    while (emu::fence_block_calls.load() == polls && std::chrono::steady_clock::now() - start < std::chrono::seconds(20))
    {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

/// Turns every schedule perturbation off when a test case ends (however it ends).
struct ChaosOff {
  ~ChaosOff()
  {
    emu::chaos_permille = 0;
    emu::chaos_stall_per_100k = 0;
    emu::chaos_store_permille = 0;
  }
};

struct RunResult {
  std::vector<float> output;
  PlannedLaunch launch;
  unsigned errors;
  double seconds;
};

/// A launch's inputs: the query and the caches in their element types, and an fp8 cache's scales.
template <class T, class KvT>
struct Inputs {
  std::vector<T> query;
  std::vector<KvT> key, value;
  std::vector<float> k_scale, v_scale;
  std::int64_t scale_head_stride = 0;
};

/// Plan on the host as dispatch_paged_attention does, then the init pass and the decode (whose blocks plan
/// the launch from the lengths) on the emulated machine with a persistent grid of `grid_blocks` blocks.
/// persistent = false: the plain launch instead (a block per item of the bound, `grid_blocks` of them
/// resident at once), whose blocks first try the uniform fast path (AgentPagedAttention::RunIfUniform).
/// QueryOffsets: the kernels of launches with query offsets (the problem's query_rows), as the dispatch
/// runs them; else those without.
template <class Policy, int HeadDim, bool QueryOffsets = false, class T, class KvT, class Epilogue = IdentityOutputEpilogue,
          class ScoreVariant = DefaultScoreVariant>
RunResult run_emulated(const Problem& prob, const Inputs<T, KvT>& in, int grid_blocks, int sm_count, unsigned chaos_seed = 0,
                       int stall_milliseconds = 0, bool persistent = true, const Epilogue& epilogue = {},
                       const ScoreVariant& score_variant = {})
{
  using Variant = DecodeVariant<ScoreVariant, Epilogue>;
  const Shape& s = prob.shape;
  std::vector<T> output(prob.query.size(), ElementTraits<T>::from_float(std::numeric_limits<float>::quiet_NaN()));
  unsigned error_count = 0;
  DecodeArguments<T, KvT, Epilogue, ScoreVariant> a;
  a.output_epilogue = epilogue;
  a.score_variant = score_variant;
  a.output = output.data();
  a.query = in.query.data();
  a.key_cache = in.key.data();
  a.value_cache = in.value.data();
  a.cache_layout = s.layout;
  a.logit_softcap = s.softcap;
  a.sinks = prob.sinks.empty() ? nullptr : prob.sinks.data();
  a.window_left = s.window_left;
  a.q_len = s.q_len;
  const std::vector<int> query_offsets = s.query_offsets();
  if (!s.query_rows.empty())
  {
    a.query_start_loc = query_offsets.data();
    a.num_query_rows = s.total_rows();
  }
  a.k_scale = in.k_scale.empty() ? nullptr : in.k_scale.data();
  a.v_scale = in.v_scale.empty() ? nullptr : in.v_scale.data();
  a.scale_head_stride = in.scale_head_stride;
  a.num_blocks = prob.num_blocks;
  a.block_tables = prob.block_tables.data();
  a.max_blocks_per_seq = prob.max_blocks_per_seq;
  a.seq_lens = s.seq_lens.data();
  a.num_seqs = prob.num_seqs;
  a.max_seq_len = prob.max_seq_len;
  a.num_heads = s.num_heads;
  a.num_kv_heads = s.num_kv_heads;
  a.head_size = s.head_size;
  a.block_size = s.block_size;
  a.scale = prob.scale;
  a.alibi_slopes = prob.alibi.empty() ? nullptr : prob.alibi.data();
  a.error_count = &error_count;
  a.partition_tokens = s.partition_tokens;

  REQUIRE((detail::validate_arguments<T, SupportedHeadDims>(a)) == cudaSuccess);
  REQUIRE(QueryOffsets == (a.query_start_loc != nullptr));
  REQUIRE((detail::validate_partition_tokens<Policy>(a)) == cudaSuccess);
  detail::DecodePlan plan = detail::make_plan<Policy>(a, sm_count);
  REQUIRE(detail::validate_plan(plan) == cudaSuccess);
  // The temporary storage starts as garbage: the init pass zeroes what the combine needs zeroed.
  std::vector<unsigned char, std::allocator<unsigned char>> temp_bytes(plan.temp_bytes + 256, 0xa5);
  void* temp = temp_bytes.data() + (256 - reinterpret_cast<std::uintptr_t>(temp_bytes.data()) % 256) % 256;

  RunResult result{};
  const auto start = std::chrono::steady_clock::now();
  auto run = [&](auto kernel_tag) {
    using Kernel = decltype(kernel_tag);
    static_assert(!Kernel::one_wave_capable, "the emulation has no cooperative launch");
    detail::choose_grid(plan, static_cast<std::size_t>(grid_blocks), /*cooperative_capable=*/false, persistent);
    REQUIRE(plan.init_pass); // no cooperative launch here: the look-back words always come from the init pass
    // The init pass, as launch_decode runs it before a launch that may combine by look-back.
    emu::LaunchConfig init_launch{1, 256, 0};
    init_launch.chaos_seed = chaos_seed;
    emu::launch_kernel(init_launch, detail::reset_partition_state_kernel<unsigned>, static_cast<unsigned*>(temp),
                       plan.layout.reset_bytes / sizeof(unsigned));
    const PagedAttentionParams<T, KvT> params = detail::make_params(a, plan, temp);
    // The plan every block makes, from the host reference (its items name the tickets to stall).
    const test::HostPlan reference = test::plan_on_host(s.planned_lens(), plan.segments_per_seq, a.max_seq_len,
                                                        static_cast<long long>(a.max_blocks_per_seq) * a.block_size, plan.model,
                                                        plan.capacity, a.partition_tokens, partition_group_size);
    if (stall_milliseconds > 0) // the last partition of group 1 of every segment with 3 groups or more
    {
      stall_tickets.assign(reference.items.size(), false);
      for (std::size_t i = 0; i < reference.items.size(); ++i)
      {
        const PlannedItem& item = reference.items[i];
        stall_tickets[i] = item.num_partitions > 2 * partition_group_size && item.partition == 2 * partition_group_size - 1;
      }
      stall_ticket_address = params.state.ticket;
      stall_ms = stall_milliseconds;
      emu::after_atomic_add = stall_after_ticket;
    }
    emu::LaunchConfig decode_launch{static_cast<unsigned>(plan.grid), Kernel::block_threads, Kernel::smem_bytes};
    decode_launch.chaos_seed = chaos_seed + 1;
    if (!persistent) { decode_launch.resident_blocks = static_cast<unsigned>(grid_blocks); }
    emu::launch_kernel(decode_launch, Kernel::function(), params, Variant{a.score_variant, a.output_epilogue});
    emu::after_atomic_add = nullptr;
    result.launch = reference.launch;
  };
  using Chain = SinglePolicyChain<Policy>;
  auto run_heads = [&](auto persistent_tag, auto layout) {
    constexpr bool P = decltype(persistent_tag)::value;
    using KvLayout = decltype(layout);
    with_one_of(detail::KernelRowCounts<T, Policy, KvT>{}, plan.head_split.kernel_rows, [&](auto rows) {
      using Traits = DecodeTraits<T, HeadDim, decltype(rows)::value, Policy, KvT, KvLayout, Variant>;
      run(detail::DecodeKernel<Traits, Chain, P, QueryOffsets>{});
    });
  };
  auto run_layout = [&](auto persistent_tag) {
    if (prob.shape.layout != CacheLayout::vllm) { run_heads(persistent_tag, TokenRowsKvLayout{}); }
    else { run_heads(persistent_tag, VllmKvLayout{}); }
  };
  if (persistent) { run_layout(std::true_type{}); }
  else { run_layout(std::false_type{}); }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.output.resize(output.size());
  for (std::size_t i = 0; i < output.size(); ++i) { result.output[i] = ElementTraits<T>::to_float(output[i]); }
  result.errors = error_count;
  return result;
}

/// The fp32 launch of the problem as it is.
template <class Policy, int HeadDim = 64, bool QueryOffsets = false>
RunResult run_emulated(const Problem& prob, int grid_blocks, int sm_count, unsigned chaos_seed = 0, int stall_milliseconds = 0,
                       bool persistent = true)
{
  const Inputs<float, float> in{prob.query, prob.key, prob.value, {}, {}, 0};
  return run_emulated<Policy, HeadDim, QueryOffsets>(prob, in, grid_blocks, sm_count, chaos_seed, stall_milliseconds, persistent);
}

/// An fp8 cache for the problem's tokens: every element a random byte of the format below 2 in magnitude
/// (zeros and subnormals included), the format's NaN byte where no token lives; queries of type Q; scales
/// per KV head (scale_head_stride 1) or one for all (0). Returns the inputs, and the problem that the fp64
/// reference sees: the same bytes dequantized as float(fp8) * scale, the queries rounded to Q.
template <Fp8Format Format, class Q = __half>
std::pair<Inputs<Q, Fp8Storage<Format>>, Problem> fp8_problem(const Problem& base, std::int64_t scale_head_stride, std::uint64_t seed)
{
  using KvT = Fp8Storage<Format>;
  const Shape& s = base.shape;
  std::mt19937_64 rng(seed);
  Inputs<Q, KvT> in;
  Problem ref = base;
  for (std::size_t i = 0; i < base.query.size(); ++i)
  {
    in.query.push_back(ElementTraits<Q>::from_float(base.query[i]));
    ref.query[i] = ElementTraits<Q>::to_float(in.query.back());
  }
  for (int h = 0; h < s.num_kv_heads; ++h)
  {
    in.k_scale.push_back(scale_head_stride ? 0.5f + h : 0.75f); // differ per head when they are per head
    in.v_scale.push_back(scale_head_stride ? 2.f - 0.75f * h : 1.25f);
  }
  in.scale_head_stride = scale_head_stride;
  const auto random_byte = [&] {
    const unsigned sign = rng() & 1u, mantissa_bits = Format == Fp8Format::e4m3 ? 3 : 2;
    const unsigned exponent = rng() % (Format == Fp8Format::e4m3 ? 8 : 16); // below 2: exponent <= bias
    return KvT{static_cast<std::uint8_t>(sign << 7 | exponent << mantissa_bits | (rng() & ((1u << mantissa_bits) - 1)))};
  };
  const KvT nan_byte{0x7f};
  const std::size_t cache = base.key.size();
  in.key.assign(cache, nan_byte);
  in.value.assign(cache, nan_byte);
  constexpr int fx = elements_per_vector<float>, bx = elements_per_vector<KvT>; // the two key layouts' x
  for (std::int64_t b = 0; b < base.num_blocks; ++b)
  {
    for (int h = 0; h < s.num_kv_heads; ++h)
    {
      const std::size_t run = std::size_t(b) * s.num_kv_heads + h;
      for (int d = 0; d < s.head_size; ++d)
      {
        for (int t = 0; t < s.block_size; ++t)
        {
          // Token rows (packed) hold both caches alike, in either element type.
          const std::size_t row = s.layout == CacheLayout::hnd ? (run * s.block_size + t) * s.head_size + d
                                                               : ((std::size_t(b) * s.block_size + t) * s.num_kv_heads + h) * s.head_size + d;
          const bool rows = s.layout != CacheLayout::vllm;
          const std::size_t kf = rows ? row : ((run * (s.head_size / fx) + d / fx) * s.block_size + t) * fx + d % fx;
          const std::size_t kb = rows ? row : ((run * (s.head_size / bx) + d / bx) * s.block_size + t) * bx + d % bx;
          const std::size_t v = rows ? row : (run * s.head_size + d) * s.block_size + t;
          if (!std::isnan(base.key[kf]))
          {
            in.key[kb] = random_byte();
            ref.key[kf] = fp8_to_float<Format>(in.key[kb].bits) * in.k_scale[h * scale_head_stride];
          }
          if (!std::isnan(base.value[v]))
          {
            in.value[v] = random_byte();
            ref.value[v] = fp8_to_float<Format>(in.value[v].bits) * in.v_scale[h * scale_head_stride];
          }
        }
      }
    }
  }
  return {std::move(in), std::move(ref)};
}

/// Relative L2 error of the output against the fp64 reference, over every (sequence, new token, head) of the
/// sequences `only` (all when empty); the output of every row that sees nothing exactly 0.
double relative_error(const Problem& prob, const std::vector<float>& output, const std::vector<int>& only = {})
{
  const Shape& s = prob.shape;
  double err = 0, norm = 0;
  for (int q = 0; q < prob.num_seqs; ++q)
  {
    if (!only.empty() && std::find(only.begin(), only.end(), q) == only.end()) { continue; }
    for (int i = 0; i < s.rows_of(q); ++i)
    {
      for (int h = 0; h < s.num_heads; ++h)
      {
        const std::vector<double> ref = prob.reference(q, h, i);
        for (int d = 0; d < s.head_size; ++d)
        {
          const float got = output[((std::size_t(s.first_row_of(q)) + i) * s.num_heads + h) * s.head_size + d];
          INFO("sequence " << q << " (length " << s.seq_lens[q] << "), new token " << i << ", head " << h << ", dim " << d);
          REQUIRE(std::isfinite(got));
          if (s.seq_lens[q] - s.rows_of(q) + 1 + i <= 0) { REQUIRE(got == 0.f); }
          err += (got - ref[d]) * (got - ref[d]);
          norm += ref[d] * ref[d];
        }
      }
    }
  }
  return std::sqrt(err / norm);
}

} // namespace

// The 64-lane build (__ILUVATAR__) runs the BI-V100 cases alone ("[biv100]"): the others are compiled only
// at 32 lanes.
#if !defined(__ILUVATAR__)
TEST_CASE("decode, emulated on the host: planning pass + persistent CUDA-core decode + look-back combine vs fp64",
          "[decode][emulated][host]")
{
  const int partition_tokens = GENERATE(32, 64);
  const int grid_blocks = GENERATE(2, 4);
  const bool alibi = GENERATE(false, true);
  // 300 tokens: 10 or 5 partitions; 1000: 32 or 16 partitions, 4 or 2 combine groups (look-back).
  Shape shape{{37, 0, 300, 1000}};
  shape.partition_tokens = partition_tokens;
  shape.alibi = alibi;
  const Problem prob(shape, 20260601 + partition_tokens + grid_blocks);
  INFO("partition_tokens " << partition_tokens << ", grid " << grid_blocks << ", alibi " << alibi);

  const RunResult r = run_emulated<EmulatedPolicy>(prob, grid_blocks, /*sm_count=*/2);
  REQUIRE(r.launch.partition_tokens == partition_tokens);
  REQUIRE(r.launch.max_partitions == (1000 + partition_tokens - 1) / partition_tokens);
  const auto parts = [&](int len) { return (len + partition_tokens - 1) / partition_tokens; };
  REQUIRE(r.launch.total_items == 2 * (parts(37) + 1 + parts(300) + parts(1000))); // 2 KV heads; the empty sequence 1 item
  REQUIRE(r.errors == 0u);
  const double err = relative_error(prob, r.output);
  WARN("relative L2 error " << err << ", " << r.seconds << " s emulated");
  REQUIRE(err < 1e-4);

  // Bitwise reproducible whatever the grid (the same fixed partition size: the same fold tree).
  const RunResult other = run_emulated<EmulatedPolicy>(prob, grid_blocks == 2 ? 3 : 1, 2);
  REQUIRE(std::memcmp(other.output.data(), r.output.data(), r.output.size() * sizeof(float)) == 0);
}

TEST_CASE("decode, emulated on the host: logit soft-cap and attention sinks vs fp64, look-back and single partitions",
          "[decode][emulated][host][variants]")
{
  // Scores up to about 3 * 3 * 64 / 8 = 72: a cap of 5 bends them hard. Sinks of -inf (none), 0.5, 3 and 1e4
  // (which takes the whole softmax: an output of exactly 0), with and without the cap and ALiBi; lengths
  // of one partition and of several combine groups (the sink joins partition 0 only).
  const float softcap = GENERATE(0.f, 5.f);
  const bool alibi = GENERATE(false, true);
  Shape shape{{37, 0, 300, 1000, 1}};
  shape.softcap = softcap;
  shape.sinks = true;
  shape.alibi = alibi;
  INFO("softcap " << softcap << ", alibi " << alibi);
  const Problem prob(shape, 17);
  const RunResult r = run_emulated<EmulatedPolicy>(prob, 4, 2);
  REQUIRE(r.errors == 0u);
  REQUIRE(relative_error(prob, r.output) < 1e-4);
  for (int q = 0; q < prob.num_seqs; ++q)
  {
    for (int d = 0; d < shape.head_size; ++d) { REQUIRE(r.output[(std::size_t(q) * shape.num_heads + 3) * shape.head_size + d] == 0.f); }
  }
  // Off, the options leave the bits alone: a cap of 0 and sinks of -inf are the plain decode.
  Shape plain = shape;
  plain.softcap = 0.f;
  plain.sinks = false;
  if (softcap == 0.f)
  {
    Problem none(plain, 17);
    none.sinks.assign(std::size_t(shape.num_heads), -std::numeric_limits<float>::infinity());
    const RunResult with_minus_inf = run_emulated<EmulatedPolicy>(none, 4, 2);
    none.sinks.clear();
    const RunResult without = run_emulated<EmulatedPolicy>(none, 4, 2);
    REQUIRE(std::memcmp(with_minus_inf.output.data(), without.output.data(), without.output.size() * sizeof(float)) == 0);
  }
}

/// Run the problem emulated on the default policy (the persistent grid of 4 blocks, or the plain launch with 3
/// resident) and require no error count and the fp64 reference's output.
static void require_reference_output(const Problem& prob, bool persistent = true)
{
  const RunResult r = run_emulated<EmulatedPolicy>(prob, persistent ? 4 : 3, 2, 0, 0, persistent);
  REQUIRE(r.errors == 0u);
  REQUIRE(relative_error(prob, r.output) < 1e-4);
}

TEST_CASE("decode, emulated on the host: sliding windows vs fp64, blocks before the window never read",
          "[decode][emulated][host][variants][window]")
{
  // Windows through cache blocks and partitions (32 tokens), longer than the sequences, 0; the table entries
  // of the blocks wholly before a window are -1 (a read would give NaN and an error count); ALiBi, soft-cap
  // and sinks on top; the persistent launch, and the plain launch and HND token rows once each (CI time:
  // an emulated run takes seconds).
  const auto [window_left, block_size] = GENERATE(table<int, int>({{0, 8}, {5, 16}, {40, 32}, {299, 16}, {5000, 8}}));
  Shape shape{{37, 0, 300, 1000, 1}};
  shape.block_size = block_size;
  shape.window_left = window_left;
  shape.alibi = window_left % 2 == 1;
  shape.softcap = window_left == 40 ? 5.f : 0.f;
  shape.sinks = window_left == 299;
  INFO("window_left " << window_left << ", block_size " << block_size);
  const Problem prob(shape, 23);
  require_reference_output(prob);
  if (window_left == 40) { require_reference_output(prob, /*persistent=*/false); }
  if (window_left != 299) { return; }
  Shape rows = shape;
  rows.layout = CacheLayout::hnd;
  require_reference_output(Problem(rows, 23));
}

TEST_CASE("decode, emulated on the host: several new tokens per sequence (q_len) vs fp64, causal among them",
          "[decode][emulated][host][variants][q_len]")
{
  // Lengths shorter than q_len (rows that see nothing: 0), not multiples of the block or the partition; GQA 2
  // and 6 (rows in two head parts); a window that cuts through blocks on top, with ALiBi and sinks.
  const auto [q_len, window_left] = GENERATE(table<int, int>({{2, -1}, {4, 37}, {8, -1}, {3, 0}}));
  Shape shape{{1, 3, 0, 301, 70, 5}};
  shape.q_len = q_len;
  shape.window_left = window_left;
  shape.num_heads = q_len == 4 ? 12 : 4;
  shape.alibi = q_len == 4;
  shape.sinks = q_len == 8;
  INFO("q_len " << q_len << ", window_left " << window_left);
  const Problem prob(shape, 31);
  require_reference_output(prob);
  if (q_len == 2) { require_reference_output(prob, /*persistent=*/false); }
}

TEST_CASE("decode, emulated on the host: per-sequence new tokens (query_start_loc) vs fp64, rows past them untouched",
          "[decode][emulated][host][variants][q_len]")
{
  // Sequences of 0 .. q_len new tokens (0: no rows, nothing read or written), lengths shorter than their rows;
  // GQA 2 and 6 (several head parts, some past a sequence's rows); a window, ALiBi and sinks on top; the
  // spare row after the last sequence's keeps its NaN.
  const auto [q_len, window_left] = GENERATE(table<int, int>({{4, -1}, {8, 37}, {3, -1}}));
  Shape shape{{1, 3, 0, 301, 70, 5, 40}};
  shape.q_len = q_len;
  shape.query_rows = {q_len, 0, 2, 1, q_len, 0, q_len - 1};
  shape.window_left = window_left;
  shape.num_heads = q_len == 8 ? 12 : 4;
  shape.alibi = q_len == 8;
  shape.sinks = q_len == 3;
  INFO("q_len " << q_len << ", window_left " << window_left);
  const Problem prob(shape, 37);
  for (bool persistent : {true, false})
  {
    const RunResult r = run_emulated<EmulatedPolicy, 64, /*QueryOffsets=*/true>(prob, persistent ? 4 : 3, 2, 0, 0, persistent);
    REQUIRE(r.errors == 0u);
    REQUIRE(relative_error(prob, r.output) < 1e-4);
    const std::size_t spare = std::size_t(shape.total_rows() - 1) * shape.num_heads * shape.head_size;
    for (std::size_t i = spare; i < r.output.size(); ++i) { REQUIRE(std::isnan(r.output[i])); }
  }
}

/// A test epilogue: each element becomes 2 value + seq + head / 8 + dim / 64 (its place shows in the result).
struct PlaceEpilogue {
  float operator()(float value, int seq, int head, int dim) const { return 2.f * value + float(seq) + float(head) / 8.f + float(dim) / 64.f; }
};

TEST_CASE("decode, emulated on the host: the output epilogue sees every element once, with its place", "[decode][emulated][host][variants]")
{
  // A single partition, several combine groups, an empty sequence (0 through the epilogue), the persistent
  // and the plain launch: each element is the epilogue of the plain decode's, bit for bit (the epilogue is
  // exact here: 2x, and sums of small dyadic numbers, in float).
  Shape shape{{37, 0, 300, 1000, 1}};
  const Problem prob(shape, 29);
  const Inputs<float, float> in{prob.query, prob.key, prob.value, {}, {}, 0};
  const RunResult plain = run_emulated<EmulatedPolicy, 64>(prob, in, 4, 2);
  for (const bool persistent : {true, false})
  {
    const RunResult r = run_emulated<EmulatedPolicy, 64>(prob, in, 4, 2, 0, 0, persistent, PlaceEpilogue{});
    REQUIRE(r.errors == 0u);
    for (std::size_t i = 0; i < r.output.size(); ++i)
    {
      const int dim = int(i % shape.head_size), head = int(i / shape.head_size) % shape.num_heads;
      const int seq = int(i / (std::size_t(shape.head_size) * shape.num_heads));
      INFO("element " << i << " persistent " << persistent);
      REQUIRE(r.output[i] == PlaceEpilogue{}(plain.output[i], seq, head, dim));
    }
  }
}

TEST_CASE("decode, emulated on the host: a score variant of one's own (QueryTemperature) with the default's modifiers",
          "[decode][emulated][host][variants]")
{
  // Llama 4's temperature tuning at a floor scale of 16, so that the temperature changes along these lengths;
  // with the soft-cap, ALiBi, a window, sinks and several new tokens, each row at its own position.
  QueryTemperature variant;
  variant.floor_scale = 16.f;
  variant.attn_scale = 0.5f;
  const auto [q_len, window_left] = GENERATE(table<int, int>({{1, -1}, {3, 50}}));
  Shape shape{{301, 5, 170, 64}};
  shape.q_len = q_len;
  shape.window_left = window_left;
  shape.softcap = 20.f;
  shape.alibi = true;
  shape.sinks = q_len == 3;
  INFO("q_len " << q_len << ", window_left " << window_left);
  Problem prob(shape, 41);
  prob.logit_factor = [&](int position) { return double(variant.temperature(position)); };
  const Inputs<float, float> in{prob.query, prob.key, prob.value, {}, {}, 0};
  for (const bool persistent : {true, false})
  {
    INFO("persistent " << persistent);
    const RunResult r = run_emulated<EmulatedPolicy, 64>(prob, in, persistent ? 4 : 3, 2, 0, 0, persistent, IdentityOutputEpilogue{}, variant);
    REQUIRE(r.errors == 0u);
    REQUIRE(relative_error(prob, r.output) < 1e-4);
  }
  // The temperature matters here: the default variant's output is far from this reference.
  const RunResult plain = run_emulated<EmulatedPolicy, 64>(prob, in, 4, 2);
  REQUIRE(relative_error(prob, plain.output) > 1e-2);
}

TEST_CASE("decode, emulated on the host: the plain launch, uniform batches by the host's plan, others planned",
          "[decode][emulated][host]")
{
  const int partition_tokens = GENERATE(0, 64);
  const int resident = GENERATE(2, 3);
  INFO("partition_tokens " << partition_tokens << " (0: automatic), resident blocks " << resident);
  // Every length max_seq_len: the fast path (its tickets drawn with the check); then one length shorter:
  // the general path, whose first ticket is the one drawn with the check.
  for (const std::vector<int>& lens : {std::vector<int>{300, 300, 300}, std::vector<int>{300, 299, 300}, std::vector<int>{300, 0, 17}})
  {
    INFO("lengths " << lens[0] << ", " << lens[1] << ", " << lens[2]);
    Shape shape{lens};
    shape.partition_tokens = partition_tokens;
    const Problem prob(shape, 20261202 + partition_tokens + resident);
    const RunResult plain = run_emulated<EmulatedPolicy>(prob, resident, /*sm_count=*/2, 0, 0, /*persistent=*/false);
    REQUIRE(plain.errors == 0u);
    REQUIRE(relative_error(prob, plain.output) < 1e-4);
    // The persistent launch plans the same way (the uniform batch by UniformLaunch): the same bits.
    const RunResult persistent = run_emulated<EmulatedPolicy>(prob, resident, 2);
    REQUIRE(std::memcmp(persistent.output.data(), plain.output.data(), plain.output.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("decode, emulated on the host: head 128, block sizes 8 and 32, GQA 12 in two head parts, invalid device data",
          "[decode][emulated][host]")
{
  for (int block_size : {8, 32})
  {
    INFO("block size " << block_size);
    Shape shape{{100, 700, 33, 250}, 24, 2, 128, block_size}; // 12 query heads per KV head: two parts of 6
    shape.partition_tokens = 64;
    Problem prob(shape, 20261201 + block_size);
    // Sequence 2's length exceeds max_seq_len (the plan gives each of its 4 segments one item that writes
    // NaN and counts an error), and sequence 3's second cache block id lies past the cache (partition 0 of
    // its 4 segments: NaN, an error per block): NaN for those two sequences only, 8 errors, no read outside.
    prob.shape.seq_lens[2] = prob.max_seq_len + 1;
    prob.block_tables[std::size_t(3) * prob.max_blocks_per_seq + 1] = static_cast<int>(prob.num_blocks) + 5;
    const RunResult r = run_emulated<EmulatedPolicy, 128>(prob, 4, 2);
    REQUIRE(r.errors == 8u);
    for (int q : {2, 3})
    {
      for (int i = 0; i < shape.num_heads * shape.head_size; ++i)
      {
        INFO("sequence " << q << ", element " << i);
        REQUIRE(std::isnan(r.output[std::size_t(q) * shape.num_heads * shape.head_size + i]));
      }
    }
    const double err = relative_error(prob, r.output, {0, 1});
    WARN("block size " << block_size << ": relative L2 error " << err);
    REQUIRE(err < 1e-4);
  }
}

#endif // !defined(__ILUVATAR__)

TEST_CASE("decode, emulated on the host: head 120 (not whole 16-dim steps) on the CUDA-core decode, BI-V100's included",
          "[decode][emulated][host][biv100]")
{
  const CacheLayout layout = GENERATE(CacheLayout::vllm, CacheLayout::hnd);
  Shape shape{{37, 0, 301, 700}, 6, 1, 120, 16}; // 6 query heads per KV head
  shape.partition_tokens = 64;
  shape.alibi = layout == CacheLayout::hnd;
  shape.layout = layout;
  INFO("layout " << int(layout));
  const Problem prob(shape, 120 + int(layout));
  for (int policy = 0; policy < 2; ++policy)
  {
    const RunResult r = policy == 0 ? run_emulated<EmulatedPolicy, 120>(prob, 3, 2) : run_emulated<PagedAttentionPolicyBIV100, 120>(prob, 3, 2);
    REQUIRE(r.errors == 0u);
    const double err = relative_error(prob, r.output);
    WARN((policy == 0 ? "emulated policy" : "BI-V100 policy") << ", head 120: relative L2 error " << err);
    REQUIRE(err < 1e-4);
  }
}

TEST_CASE("decode, emulated on the host: the BI-V100 policy's CUDA-core decode", "[decode][emulated][host][biv100]")
{
  Shape shape{{37, 0, 300, 1000}, 8, 2, 64, 16}; // 4 query heads per KV head
  shape.partition_tokens = 64;
  const Problem prob(shape, 7);
  const RunResult r = run_emulated<PagedAttentionPolicyBIV100>(prob, 3, 2);
  REQUIRE(r.errors == 0u);
  const double err = relative_error(prob, r.output);
  WARN("BI-V100 policy (" << warp_threads << "-lane warps): relative L2 error " << err << ", " << r.seconds << " s emulated");
  REQUIRE(err < 1e-4);
}

TEST_CASE("decode, emulated on the host: caches in token rows (HND, NHD) on the CUDA-core decode, BI-V100's included",
          "[decode][emulated][host][biv100][layouts]")
{
  const CacheLayout layout = GENERATE(CacheLayout::hnd, CacheLayout::nhd);
  const int block_size = GENERATE(8, 32);
  Shape shape{{37, 0, 300, 1000}, 8, 2, 64, block_size};
  shape.partition_tokens = 64;
  shape.alibi = block_size == 8;
  shape.layout = layout;
  INFO("layout " << int(layout) << ", block size " << block_size);
  const Problem prob(shape, 31 + block_size);
  {
    const RunResult r = run_emulated<PagedAttentionPolicyBIV100>(prob, 3, 2);
    REQUIRE(r.errors == 0u);
    const double err = relative_error(prob, r.output);
    WARN("BI-V100 policy (" << warp_threads << "-lane warps), token rows: relative L2 error " << err);
    REQUIRE(err < 1e-4);
  }
  const auto [in, ref] = fp8_problem<Fp8Format::e4m3>(prob, 1, 37);
  const RunResult r = run_emulated<EmulatedPolicy, 64>(ref, in, 3, 2);
  REQUIRE(r.errors == 0u);
  const double err = relative_error(ref, r.output);
  WARN("fp16/fp8_e4m3 in token rows: relative L2 error " << err);
  REQUIRE(err < 2e-3);
}

#if !defined(__ILUVATAR__) // (the 32-lane cases)
TEST_CASE("decode, emulated on the host: fp8 caches (e4m3, e5m2) with fp16 queries, scales per KV head or shared",
          "[decode][emulated][host][fp8]")
{
  const std::int64_t stride = GENERATE(0, 1);
  const int block_size = GENERATE(8, 16);
  Shape shape{{37, 0, 300, 1000}, 8, 2, 64, block_size}; // 4 query heads per KV head
  shape.partition_tokens = 64;
  shape.alibi = stride == 1;
  const Problem base(shape, 20261202 + block_size + stride);
  INFO("scale_head_stride " << stride << ", block size " << block_size);
  {
    const auto [in, ref] = fp8_problem<Fp8Format::e4m3>(base, stride, 11 + block_size);
    const RunResult r = run_emulated<EmulatedPolicy, 64>(ref, in, 3, 2);
    REQUIRE(r.errors == 0u);
    const double err = relative_error(ref, r.output);
    WARN("fp16/fp8_e4m3: relative L2 error " << err);
    REQUIRE(err < 2e-3); // the fp16 output's rounding (2^-11) dominates
  }
  {
    const auto [in, ref] = fp8_problem<Fp8Format::e5m2>(base, stride, 13 + block_size);
    const RunResult r = run_emulated<EmulatedPolicy, 64>(ref, in, 3, 2);
    REQUIRE(r.errors == 0u);
    const double err = relative_error(ref, r.output);
    WARN("fp16/fp8_e5m2: relative L2 error " << err);
    REQUIRE(err < 2e-3);
  }
}

TEST_CASE("decode, emulated on the host: fp8 caches (e4m3, e5m2) with fp32 queries and output", "[decode][emulated][host][fp8]")
{
  Shape shape{{37, 0, 300, 1000}, 8, 2, 64, 16};
  shape.partition_tokens = 64;
  const Problem base(shape, 31);
  {
    const auto [in, ref] = fp8_problem<Fp8Format::e4m3, float>(base, 1, 41);
    const RunResult r = run_emulated<EmulatedPolicy, 64>(ref, in, 3, 2);
    REQUIRE(r.errors == 0u);
    const double err = relative_error(ref, r.output);
    WARN("fp32/fp8_e4m3: relative L2 error " << err);
    REQUIRE(err < 1e-5); // every value the fold reads is exact: only its fp32 arithmetic differs from fp64
  }
  {
    const auto [in, ref] = fp8_problem<Fp8Format::e5m2, float>(base, 0, 43);
    const RunResult r = run_emulated<EmulatedPolicy, 64>(ref, in, 3, 2);
    REQUIRE(r.errors == 0u);
    const double err = relative_error(ref, r.output);
    WARN("fp32/fp8_e5m2: relative L2 error " << err);
    REQUIRE(err < 1e-5);
  }
}

#endif // !defined(__ILUVATAR__)

TEST_CASE("decode, emulated on the host: an fp8 cache on the BI-V100 policy", "[decode][emulated][host][biv100][fp8]")
{
  Shape shape{{37, 0, 300, 1000}, 8, 2, 64, 16};
  shape.partition_tokens = 64;
  const Problem base(shape, 17);
  {
    const auto [in, ref] = fp8_problem<Fp8Format::e4m3>(base, 1, 19);
    const RunResult r = run_emulated<PagedAttentionPolicyBIV100, 64>(ref, in, 3, 2);
    REQUIRE(r.errors == 0u);
    const double err = relative_error(ref, r.output);
    WARN("BI-V100 policy (" << warp_threads << "-lane warps), fp16/fp8_e4m3: relative L2 error " << err);
    REQUIRE(err < 2e-3);
  }
  {
    const auto [in, ref] = fp8_problem<Fp8Format::e5m2, float>(base, 1, 23);
    const RunResult r = run_emulated<PagedAttentionPolicyBIV100, 64>(ref, in, 3, 2);
    REQUIRE(r.errors == 0u);
    const double err = relative_error(ref, r.output);
    WARN("BI-V100 policy (" << warp_threads << "-lane warps), fp32/fp8_e5m2: relative L2 error " << err);
    REQUIRE(err < 1e-5);
  }
}

#if !defined(__ILUVATAR__) // (the 32-lane cases)
TEST_CASE("decode, emulated on the host: fp8 arguments that cannot work are refused, named", "[decode][emulated][host][fp8]")
{
  Shape shape{{37, 300}, 8, 2, 64, 16};
  const Problem base(shape, 23);
  auto [in, ref] = fp8_problem<Fp8Format::e4m3>(base, 1, 29);
  std::vector<__half> output(base.query.size());
  DecodeArguments<__half, fp8_e4m3> a;
  a.output = output.data();
  a.query = in.query.data();
  a.key_cache = in.key.data();
  a.value_cache = in.value.data();
  a.num_blocks = base.num_blocks;
  a.block_tables = base.block_tables.data();
  a.max_blocks_per_seq = base.max_blocks_per_seq;
  a.seq_lens = shape.seq_lens.data();
  a.num_seqs = base.num_seqs;
  a.max_seq_len = base.max_seq_len;
  a.num_heads = shape.num_heads;
  a.num_kv_heads = shape.num_kv_heads;
  a.head_size = shape.head_size;
  a.block_size = shape.block_size;
  a.scale = base.scale;
  a.k_scale = in.k_scale.data();
  a.v_scale = in.v_scale.data();
  a.scale_head_stride = 1;
  REQUIRE((detail::validate_arguments<__half, SupportedHeadDims>(a)) == cudaSuccess);
  auto refused = [&](DecodeArguments<__half, fp8_e4m3> bad, const char* named) {
    CHECK((detail::validate_arguments<__half, SupportedHeadDims>(bad)) == cudaErrorInvalidValue);
    CHECK(last_error_message().find(named) != std::string::npos);
  };
  auto no_k_scale = a;
  no_k_scale.k_scale = nullptr;
  refused(no_k_scale, "k_scale is null");
  auto no_v_scale = a;
  no_v_scale.v_scale = nullptr;
  refused(no_v_scale, "v_scale is null");
  auto negative = a;
  negative.scale_head_stride = -1;
  refused(negative, "scale_head_stride");
  auto head_120 = a; // a key of 120 fp8 elements is 7.5 of vLLM's 16-byte vectors
  head_120.head_size = 120;
  refused(head_120, "head_size 120 is not supported with a 1-byte cache element");

  // Scales given for a cache that is not fp8.
  DecodeArguments<float> scaled_fp32 = {};
  scaled_fp32.num_heads = 8;
  scaled_fp32.num_kv_heads = 2;
  scaled_fp32.head_size = 64;
  scaled_fp32.block_size = 16;
  scaled_fp32.max_blocks_per_seq = 1;
  scaled_fp32.num_blocks = 1;
  scaled_fp32.scale = 1.f;
  const float one = 1.f;
  scaled_fp32.k_scale = &one;
  CHECK((detail::validate_arguments<float, SupportedHeadDims>(scaled_fp32)) == cudaErrorInvalidValue);
  CHECK(last_error_message().find("k_scale and v_scale apply to fp8 caches only") != std::string::npos);
}

TEST_CASE("decode, emulated on the host: the look-back under perturbed schedules gives the same bits", "[decode][emulated][host][chaos]")
{
  // Random sleeps at barriers, fences, atomics and cache-global accesses (emu::perturb): blocks finish their
  // partitions, publish and look back in orders a fair schedule seldom produces (a group published before an
  // earlier one, a block that stalls between its stores and its release).
  Shape shape{{37, 0, 300, 1000}};
  shape.partition_tokens = 32;
  const Problem prob(shape, 11);
  const RunResult calm = run_emulated<EmulatedPolicy>(prob, 4, 2);
  REQUIRE(relative_error(prob, calm.output) < 1e-4);
  const ChaosOff off;
  emu::chaos_permille = 20;
  emu::chaos_stall_per_100k = 20;
  const unsigned long long polls_before = emu::fence_block_calls.load();
  for (unsigned seed = 1; seed <= 6; ++seed)
  {
    const int grid = seed % 2 ? 4 : 8;
    INFO("chaos seed " << seed << ", grid " << grid);
    const RunResult r = run_emulated<EmulatedPolicy>(prob, grid, 2, 100 * seed);
    REQUIRE(r.errors == 0u);
    REQUIRE(std::memcmp(calm.output.data(), r.output.data(), r.output.size() * sizeof(float)) == 0);
  }
  WARN("look-back back-off sleeps under perturbation: " << emu::fence_block_calls.load() - polls_before);
}

TEST_CASE("decode, emulated on the host: a group that publishes late (the look-back waits for it)", "[decode][emulated][host][chaos]")
{
  // The block holding the last partition of group 1 of each 1000-token segment stalls: groups 2 and 3 finish
  // first and look back past group 1 (INVALID, then AGGREGATE) to group 0 (INCLUSIVE). Light perturbation on
  // top (a thread that lags between its value stores and the block's release shows as wrong bits).
  Shape shape{{37, 0, 300, 1000}};
  shape.partition_tokens = 32;
  const Problem prob(shape, 13);
  const RunResult calm = run_emulated<EmulatedPolicy>(prob, 4, 2);
  const ChaosOff off;
  emu::chaos_permille = 20;
  emu::chaos_store_permille = 50;
  const unsigned long long polls_before = emu::fence_block_calls.load();
  for (unsigned seed = 1; seed <= 4; ++seed)
  {
    const int grid = seed % 2 ? 4 : 8;
    INFO("chaos seed " << seed << ", grid " << grid);
    const RunResult r = run_emulated<EmulatedPolicy>(prob, grid, 2, 1000 * seed, /*stall_milliseconds=*/300);
    REQUIRE(r.errors == 0u);
    REQUIRE(relative_error(prob, r.output) < 1e-4);
    REQUIRE(std::memcmp(calm.output.data(), r.output.data(), r.output.size() * sizeof(float)) == 0);
  }
  const unsigned long long polls = emu::fence_block_calls.load() - polls_before;
  WARN("look-back back-off sleeps while group 1 was late: " << polls);
  REQUIRE(polls > 0); // the look-back did wait
}
#endif // !defined(__ILUVATAR__)
