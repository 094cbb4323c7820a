// Host tests (CI) of the dispatch's host-side logic: the policies' static limits, the GQA head tiling,
// the launch plan, the combine decision and the argument validation.
#include <pagedattn/device/device_paged_attention.cuh>

#include "support/test_support.cuh"

namespace {

template <class Policy, class T, int HeadDim, int MaxRows, class KvT = T, class KvLayout = pagedattn::VllmKvLayout>
void check_limits_of_kernel()
{
  INFO(Policy::name << " " << pagedattn::ElementTraits<T>::name << "/" << pagedattn::ElementTraits<KvT>::name << " head " << HeadDim
                    << " max rows " << MaxRows << " token rows " << KvLayout::value_rows);
  using Traits = pagedattn::DecodeTraits<T, HeadDim, MaxRows, Policy, KvT, KvLayout>;
  using Agent = pagedattn::AgentPagedAttention<Traits>;
  using Fold = typename Agent::Mainloop;
  constexpr bool fp8_on_tensor_cores = pagedattn::is_fp8<KvT> && pagedattn::detail::uses_tensor_cores<T, Policy, KvT>;
  // Blocks of up to 8 rows within the policy's budget; the tensor-core tile's blocks of 32 rows (several
  // new tokens per sequence) are larger, and within 99 KB: sm_86's per-block limit, two blocks per SM on
  // Hopper (a 110 KB one was once built before this check existed). So are an fp8 cache's (sm_90 only):
  // its 128-token steps at heads <= 128 take 85 KB, two blocks per SM as 16-bit head 128's 77 KB.
  constexpr std::size_t budget = MaxRows > 8 || fp8_on_tensor_cores ? 99 * 1024 : Policy::smem_budget_bytes;
  CHECK(pagedattn::detail::paged_attention_smem_bytes<Traits>() <= budget);
  CHECK(Policy::block_threads % pagedattn::warp_threads == 0);
  CHECK(pagedattn::head_is_whole_vectors<KvT>(HeadDim)); // 16-byte key slices of the cache
  CHECK(Policy::max_partition_tokens >= 64); // partitions (multiples of 32) never split a cache block
  CHECK(Policy::max_partition_tokens % 32 == 0);
  for (int block_size : pagedattn::supported_block_sizes)
  {
    const int limit = pagedattn::detail::partition_token_limit<Policy>(block_size);
    CHECK(limit >= 64);
    CHECK(limit % 32 == 0);
    CHECK(limit / block_size <= Policy::max_partition_blocks); // the staged block ids suffice
  }
  if constexpr (pagedattn::detail::uses_tensor_cores<T, Policy, KvT>)
  {
    using Tile = typename Fold::Tile;
    CHECK(Fold::Slab::Layout::value_rows == KvLayout::value_rows);
    // The slab the layout gives code with bulk copies (sm_90) fills by that code's copies (this host pass
    // asks for cp.async, and an fp8 cache then gets the bulk slab of the same storage).
    constexpr pagedattn::KvCopy device_copy = KvLayout::kv_copy(Policy::kv_copy, true, HeadDim, sizeof(KvT));
    CHECK(KvLayout::template Slab<KvT, HeadDim, Policy::block_threads, device_copy>::copy == device_copy);
    // token rows: cp.async, or tensor copies of whole 128-byte spans (never plain bulk copies)
    CHECK((!KvLayout::value_rows || Fold::kv_copy == pagedattn::KvCopy::cp_async ||
           (Fold::kv_copy == pagedattn::KvCopy::bulk_tensor && pagedattn::token_rows_tensor_copies_fit(HeadDim, sizeof(KvT)))));
    if constexpr (fp8_on_tensor_cores)
    {
      // At least the 16-bit pipeline's bytes in flight, at most the policy's stages of tile_bytes
      using Fold16 = typename pagedattn::AgentPagedAttention<pagedattn::DecodeTraits<T, HeadDim, MaxRows, Policy>>::Mainloop;
      using Storage16 = typename pagedattn::KvSlabBulk<T, HeadDim, Policy::block_threads>::Storage;
      const std::size_t in_flight = Fold::stages * Fold::slabs * sizeof(typename Fold::Slab::Storage);
      CHECK(in_flight >= Fold16::stages * Fold16::slabs * sizeof(Storage16));
      CHECK(in_flight <= std::size_t(Policy::stages) * Policy::tile_bytes);
    }
    CHECK(MaxRows <= Tile::max_rows);
    CHECK(Tile::k_steps * 16 == pagedattn::tensor_core_head_dim(HeadDim)); // the k-steps (and m-tiles) cover the head,
    CHECK(Tile::k_steps * 16 - HeadDim < 16);                              // padded by less than one step (120: 128)
    CHECK(Tile::steps_per_warp * Tile::block_threads / 32 >= Tile::k_steps); // every k-step has a warp
    CHECK(Fold::tile_tokens % 32 == 0);                                // whole 32-token slabs: whole cache blocks
    CHECK((Fold::tile_tokens == 32 || Fold::tile_tokens * HeadDim * 2 * sizeof(KvT) <= std::size_t(Policy::tile_bytes))); // at most tile_bytes of K + V
    CHECK(Fold::stages >= 2);
  }
  else
  {
    using Tile = typename Fold::WarpTile;
    CHECK(MaxRows <= Tile::max_rows);
    CHECK(Tile::key_vectors * Tile::x == HeadDim);
    CHECK(Fold::tile_tokens % 8 == 0); // V vectors of 8 tokens never straddle a cache block
    CHECK(Policy::max_partition_tokens % Fold::tile_tokens == 0);
  }
}

template <class Policy, class T, int HeadDim, int MaxRows, class KvT = T, class KvLayout = pagedattn::VllmKvLayout>
void check_limits()
{
  // No kernel exists for a key that is not whole 16-byte vectors of the cache (fp8 at head 120): the
  // dispatch refuses it before choosing one.
  if constexpr (pagedattn::head_is_whole_vectors<KvT>(HeadDim)) { check_limits_of_kernel<Policy, T, HeadDim, MaxRows, KvT, KvLayout>(); }
}

template <class Policy, class T, class KvT = T, int... HeadDims>
void check_policy(std::integer_sequence<int, HeadDims...>)
{
  (check_limits<Policy, T, HeadDims, 1, KvT>(), ...);
  (check_limits<Policy, T, HeadDims, 4, KvT>(), ...);
  (check_limits<Policy, T, HeadDims, 8, KvT>(), ...);
  (check_limits<Policy, T, HeadDims, 8, KvT, pagedattn::TokenRowsKvLayout>(), ...); // the kernels of caches in token rows (hnd, nhd)
  (check_limits<Policy, T, HeadDims, 1, KvT, pagedattn::TokenRowsKvLayout>(), ...);
  if constexpr (pagedattn::detail::max_rows_per_block<T, Policy, KvT> == 32) // the tensor-core tile's blocks of up to 32 rows
  {
    (check_limits<Policy, T, HeadDims, 32, KvT>(), ...);
    (check_limits<Policy, T, HeadDims, 32, KvT, pagedattn::TokenRowsKvLayout>(), ...);
  }
}

template <class Policy>
void check_all_types()
{
  check_policy<Policy, __half>(pagedattn::SupportedHeadDims{});
  check_policy<Policy, __nv_bfloat16>(pagedattn::SupportedHeadDims{});
  check_policy<Policy, float>(pagedattn::SupportedHeadDims{});
  check_policy<Policy, __half, pagedattn::fp8_e4m3>(pagedattn::SupportedHeadDims{});
  check_policy<Policy, __nv_bfloat16, pagedattn::fp8_e5m2>(pagedattn::SupportedHeadDims{});
}

pagedattn::DecodeArguments<__half> valid_arguments()
{
  static __half dummy[64] alignas(16);
  static int ints[4];
  pagedattn::DecodeArguments<__half> a;
  a.output = dummy;
  a.query = dummy;
  a.key_cache = dummy;
  a.value_cache = dummy;
  a.num_blocks = 100;
  a.block_tables = ints;
  a.max_blocks_per_seq = 10;
  a.seq_lens = ints;
  a.num_seqs = 2;
  a.max_seq_len = 100;
  a.num_heads = 24;
  a.num_kv_heads = 4;
  a.head_size = 256;
  a.block_size = 16;
  a.scale = 0.0625f;
  return a;
}

} // namespace

TEST_CASE("policies: shared memory within budget, threads a multiple of the warp, tiles divide the head", "[policy][host]")
{
  check_all_types<pagedattn::PagedAttentionPolicyBIV100>();
  check_all_types<pagedattn::PagedAttentionPolicySm80>();
  check_all_types<pagedattn::PagedAttentionPolicySm90>();
  CHECK(pagedattn::PagedAttentionPolicyBIV100::smem_budget_bytes == 48 * 1024);
  CHECK(pagedattn::PagedAttentionPolicyBIV100::max_partition_tokens == 512);
  CHECK_FALSE(pagedattn::PagedAttentionPolicyBIV100::tensor_cores); // no inline PTX there
  CHECK(pagedattn::detail::uses_tensor_cores<__half, pagedattn::PagedAttentionPolicySm90>);
  CHECK_FALSE(pagedattn::detail::uses_tensor_cores<float, pagedattn::PagedAttentionPolicySm90>);
}

TEST_CASE("policies: sm_90 is sm_80 with a third of Hopper's shared memory per block", "[policy][host]")
{
  using Sm80 = pagedattn::PagedAttentionPolicySm80;
  using Sm90 = pagedattn::PagedAttentionPolicySm90;
  static_assert(std::is_base_of_v<Sm80, Sm90> && std::is_base_of_v<pagedattn::AgentPagedAttentionPolicy, Sm80>);
  CHECK(Sm80::block_threads == Sm90::block_threads);
  CHECK(Sm80::max_partition_tokens == Sm90::max_partition_tokens);
  CHECK(Sm80::max_partition_blocks == Sm90::max_partition_blocks);
  CHECK(Sm90::smem_budget_bytes == 227 * 1024 / 3); // three blocks per SM
}

// The kernel's side of the same chain, checked wherever this file's device code is compiled.
__global__ void device_policy_follows_the_chain()
{
#if defined(__CUDA_ARCH__)
  using Expected = std::conditional_t<(__CUDA_ARCH__ >= 900), pagedattn::PagedAttentionPolicySm90, pagedattn::PagedAttentionPolicySm80>;
  static_assert(std::is_same_v<pagedattn::DefaultPagedAttentionPolicies::device_policy, Expected>);
#endif
}

TEST_CASE("policy chain: sm_90 for code of PTX version 9.0 and later, sm_80 below", "[policy][host]")
{
#if !defined(__CUDA_ARCH__)
  static_assert(std::is_same_v<pagedattn::DefaultPagedAttentionPolicies::device_policy, pagedattn::PagedAttentionPolicySm80>); // host code
#endif
  auto name = [](int ptx) { return pagedattn::DefaultPagedAttentionPolicies::invoke(ptx, [](auto p) { return std::string(p.name); }); };
  CHECK(name(80) == "sm80");
  CHECK(name(86) == "sm80");
  CHECK(name(89) == "sm80");
  CHECK(name(90) == "sm90");
  CHECK(name(100) == "sm90");
  CHECK(pagedattn::SinglePolicyChain<pagedattn::PagedAttentionPolicyBIV100>::invoke(90, [](auto p) { return std::string(p.name); }) == "bi_v100");
  // A user's link in front of the default chain.
  using Chain = pagedattn::ChainedPolicy<100, pagedattn::PagedAttentionPolicyBIV100, pagedattn::DefaultPagedAttentionPolicies>;
  CHECK(Chain::invoke(100, [](auto p) { return std::string(p.name); }) == "bi_v100");
  CHECK(Chain::invoke(90, [](auto p) { return std::string(p.name); }) == "sm90");
  CHECK(Chain::invoke(80, [](auto p) { return std::string(p.name); }) == "sm80");
}

TEST_CASE("GQA head tiling: groups of up to 8 heads per block, instantiations 1, 4, 8", "[policy][host]")
{
  for (int ratio = 1; ratio <= 32; ++ratio)
  {
    INFO("ratio " << ratio);
    const auto t = pagedattn::detail::head_split(ratio, pagedattn::detail::CudaCoreRowCounts{});
    CHECK(t.rows_per_part <= t.kernel_rows);
    CHECK(t.kernel_rows <= pagedattn::max_cuda_core_rows);
    CHECK(t.head_parts * t.rows_per_part >= ratio);
    CHECK((t.head_parts - 1) * t.rows_per_part < ratio); // no empty tile
  }
  CHECK(pagedattn::detail::head_split(6, pagedattn::detail::CudaCoreRowCounts{}).head_parts == 1);
  CHECK(pagedattn::detail::head_split(8, pagedattn::detail::CudaCoreRowCounts{}).head_parts == 1);
  CHECK(pagedattn::detail::head_split(16, pagedattn::detail::CudaCoreRowCounts{}).head_parts == 2);
  // Each part's kernel: the smallest instantiation of the path that holds it.
  const int cuda_core[][2] = {{1, 1}, {2, 4}, {4, 4}, {5, 8}, {7, 8}, {9, 8}, {12, 8}};        // (rows, kernel rows)
  const int tensor_core[][2] = {{1, 8}, {8, 8}, {9, 32}, {24, 32}, {33, 32}, {64, 32}, {65, 32}}; // (rows, kernel rows)
  for (const auto& [rows, kernel] : cuda_core) { CHECK(pagedattn::detail::head_split(rows, pagedattn::detail::CudaCoreRowCounts{}).kernel_rows == kernel); }
  for (const auto& [rows, kernel] : tensor_core) { CHECK(pagedattn::detail::head_split(rows, pagedattn::detail::TensorCoreRowCounts{}).kernel_rows == kernel); }
}

TEST_CASE("several new tokens per sequence: the rows' window, the plan's span and head parts", "[policy][host][q_len]")
{
  // The plan lays out the union of the new tokens' windows: the first token's reaches q_len - 1 further back.
  CHECK(pagedattn::rows_window_left(-1, 4) == -1);
  CHECK(pagedattn::rows_window_left(0, 1) == 0);
  CHECK(pagedattn::rows_window_left(100, 4) == 103);
  CHECK(pagedattn::rows_window_left(0x7fffffff - 2, 8) == 0x7fffffff); // (no overflow)
  // Each row's visible positions (QueryRow): causal among the new tokens, none before the sequence.
  pagedattn::PagedAttentionParams<__half> p{};
  p.q_len = 4;
  p.gqa_ratio = 6;
  p.window_left = 10;
  for (int row = 0; row < 24; ++row)
  {
    const pagedattn::QueryRow r = pagedattn::query_row(p, pagedattn::query_span(nullptr, /*seq=*/3, p.q_len, 0), /*seq_len=*/100, /*kv_head=*/2, row);
    INFO("row " << row);
    CHECK(r.token == row / 6);
    CHECK(r.head == 12 + row % 6);
    CHECK(r.index == 3 * 4 + row / 6);
    CHECK(r.end == 97 + row / 6);
    CHECK(r.first_visible == r.end - 11);
    const pagedattn::QueryRow short_row = pagedattn::query_row(p, pagedattn::query_span(nullptr, 0, p.q_len, 0), /*seq_len=*/2, 0, row);
    CHECK(short_row.end == std::max(0, 2 - 3 + row / 6));
    CHECK(short_row.first_visible == 0);
    // A sequence of two new tokens in rows 7 and 8 (query offsets): its rows see as a q_len-2 launch's.
    if (row < 12)
    {
      const pagedattn::QueryRow two = pagedattn::query_row(p, pagedattn::QuerySpan{7, 2, true}, /*seq_len=*/100, 2, row);
      CHECK(two.index == 7 + row / 6);
      CHECK(two.end == 99 + row / 6);
      CHECK(two.head == 12 + row % 6);
    }
  }
  // q_len x GQA rows per KV head (Qwen3.6 with 4 drafts: 24 rows): one block of the tensor-core tile's 32
  // rows, which reads the cache once for them all; the CUDA-core fold (fp32) in parts of up to 8 rows.
  pagedattn::DecodeArguments<__half> a = valid_arguments();
  a.num_heads = 24;
  a.num_kv_heads = 4;
  a.q_len = 4;
  const auto plan = pagedattn::detail::make_plan<pagedattn::PagedAttentionPolicySm90>(a, 132);
  CHECK(plan.head_split.head_parts == 1);
  CHECK(plan.head_split.rows_per_part == 24);
  CHECK(plan.head_split.kernel_rows == 32);
  const auto plan_1 = pagedattn::detail::make_plan<pagedattn::PagedAttentionPolicySm90>(valid_arguments(), 132);
  CHECK(plan_1.head_split.kernel_rows == 8); // one new token, a group of up to 8: the tile of 8 rows, as before
  CHECK(pagedattn::detail::head_split(24, pagedattn::detail::CudaCoreRowCounts{}).head_parts == 3);
  CHECK(pagedattn::detail::head_split(24, pagedattn::detail::CudaCoreRowCounts{}).kernel_rows == 8);
  CHECK(pagedattn::detail::head_split(64, pagedattn::detail::TensorCoreRowCounts{}).head_parts == 2);
  CHECK(pagedattn::detail::head_split(64, pagedattn::detail::TensorCoreRowCounts{}).kernel_rows == 32);
}

namespace {
/// The host's schedule of a launch: its partition size at max_seq_len and the partitions of the longest
/// sequence (what the planning pass gives a batch of max_seq_len sequences).
struct HostSchedule {
  int partition_tokens, max_partitions;
  bool partitioned;
};
template <class P, class Args>
HostSchedule host_schedule(const Args& a, int sms)
{
  const auto plan = pagedattn::detail::make_plan<P>(a, sms);
  const int t = pagedattn::detail::choose_partition_tokens<P>(a, plan.num_segments, sms);
  const int n = std::max(1, pagedattn::partitions_of(a.max_seq_len, t));
  return {t, n, n > 1};
}
} // namespace

TEST_CASE("launch plan: the partition that fills whole waves, or the caller's", "[policy][host]")
{
  using P = pagedattn::PagedAttentionPolicySm90;
  const int sms = 132;
  auto a = valid_arguments(); // 2 sequences x 4 KV heads = 8 segments
  a.max_blocks_per_seq = 1000000 / 16;

  // Automatic: 8 segments, waves of 2 blocks per SM on 132 SMs.
  a.max_seq_len = 1000000;
  auto plan = host_schedule<P>(a, sms);
  const int limit = pagedattn::detail::partition_token_limit<P>(16);
  CHECK(limit == P::max_partition_tokens);
  CHECK(plan.partition_tokens <= limit);
  CHECK(plan.partition_tokens >= limit * 7 / 8); // long partitions ...
  CHECK(plan.max_partitions == (1000000 + plan.partition_tokens - 1) / plan.partition_tokens);
  const int blocks = plan.max_partitions * 8;
  const int waves = (blocks + 2 * sms - 1) / (2 * sms);
  CHECK(blocks * 100 >= waves * 2 * sms * 99); // ... in waves at least 99 % full (3808 tokens: 2104 of 8 x 264)
  a.block_size = 8; // at most 256 cache blocks per partition: 2048 tokens
  plan = host_schedule<P>(a, sms);
  CHECK(plan.partition_tokens <= 2048);
  CHECK(plan.partition_tokens >= 2048 * 7 / 8);
  a.block_size = 16;

  // The bench shapes (132 SMs): one wave where it holds the longest sequence, else whole waves of
  // partitions as long as possible (0: one partition, the launch is not partitioned).
  struct Expected {
    int seqs, len, heads, kv_heads, head, block_size, partition_tokens, partitions;
    const char* why;
  };
  const Expected table[] = {
      {2, 16384, 24, 4, 256, 16, 512, 32, "8 segments x 32 = 256 blocks"},
      {1, 100000, 24, 4, 256, 16, 1536, 66, "4 x 66 = 264 blocks"},
      {1, 100000, 32, 8, 128, 16, 3040, 33, "8 x 33 = 264 blocks"},
      {1, 100000, 32, 8, 128, 8, 1536, 66, "at most 2048 tokens: two whole waves (528 blocks), not 392 of 2048"},
      {4, 2049, 24, 4, 256, 16, 160, 13, "16 x 13 = 208 blocks in one wave (17 x 128 = 272 would need two)"},
      {8, 32768, 24, 4, 256, 16, 4096, 8, "32 x 8 = 256 blocks"},
      {64, 4096, 24, 4, 256, 16, 0, 1, "256 blocks of a whole sequence"},
      {64, 4096, 32, 8, 128, 16, 0, 1, "512 blocks of a whole sequence, two waves"},
      {256, 1024, 24, 4, 256, 16, 0, 1, "1024 blocks of a whole sequence"},
  };
  for (const Expected& e : table)
  {
    INFO(e.seqs << "x" << e.len << " " << e.heads << "/" << e.kv_heads << " head " << e.head << " block " << e.block_size << ": " << e.why);
    auto b = a;
    b.num_seqs = e.seqs;
    b.max_seq_len = e.len;
    b.num_heads = e.heads;
    b.num_kv_heads = e.kv_heads;
    b.head_size = e.head;
    b.block_size = e.block_size;
    b.max_blocks_per_seq = (e.len + e.block_size - 1) / e.block_size;
    const auto shape_plan = host_schedule<P>(b, sms);
    CHECK(shape_plan.max_partitions == e.partitions);
    CHECK(shape_plan.partitioned == (e.partitions > 1));
    if (e.partition_tokens > 0) { CHECK(shape_plan.partition_tokens == e.partition_tokens); }
  }

  a.num_seqs = 2;
  a.max_seq_len = 1000;
  plan = host_schedule<P>(a, sms);
  CHECK(plan.partition_tokens == 32); // ceil(1000 / 33) = 31, up to 32: the smallest automatic partition
  CHECK(plan.partition_tokens == pagedattn::min_auto_partition_tokens);
  CHECK(plan.max_partitions == 32);
  CHECK(plan.partitioned);
  CHECK(pagedattn::detail::make_plan<P>(a, sms).num_segments == 2u * 4u);
  a.max_seq_len = 32;
  plan = host_schedule<P>(a, sms);
  CHECK(plan.max_partitions == 1);
  CHECK_FALSE(plan.partitioned);

  // Fixed by the caller: independent of the batch and of the device.
  a.partition_tokens = 512;
  a.max_seq_len = 512;
  plan = host_schedule<P>(a, sms);
  CHECK_FALSE(plan.partitioned);
  a.max_seq_len = 513;
  plan = host_schedule<P>(a, 1);
  CHECK(plan.partitioned);
  CHECK(plan.max_partitions == 2);
  CHECK(plan.partition_tokens == 512);
  CHECK(pagedattn::detail::validate_partition_tokens<P>(a) == cudaSuccess);
  for (int bad : {16, 48 + 1, 2 * P::max_partition_tokens})
  {
    a.partition_tokens = bad;
    CHECK(pagedattn::detail::validate_partition_tokens<P>(a) == cudaErrorInvalidValue);
    CHECK(pagedattn::last_error_message().find("partition_tokens") != std::string::npos);
  }
  a.partition_tokens = 4096; // the longest partition at block size 16 ...
  CHECK(pagedattn::detail::validate_partition_tokens<P>(a) == cudaSuccess);
  a.block_size = 8; // ... spans 512 cache blocks of 8 tokens: more than a thread block stages
  CHECK(pagedattn::detail::validate_partition_tokens<P>(a) == cudaErrorInvalidValue);
  CHECK(pagedattn::last_error_message().find("2048") != std::string::npos);
  CHECK(pagedattn::last_error_message().find("block_size 8") != std::string::npos);
}

namespace {
/// A caller's policy: it overrides the partition length and inherits the rest.
struct LongPartitions : pagedattn::AgentPagedAttentionPolicy {
  static constexpr int max_partition_tokens = 2048;
  static constexpr int max_partition_blocks = 64;
};
} // namespace

TEST_CASE("policies: a policy derived from AgentPagedAttentionPolicy inherits its defaults", "[policy][host]")
{
  CHECK(LongPartitions::block_threads == pagedattn::AgentPagedAttentionPolicy::block_threads);
  CHECK_FALSE(LongPartitions::tensor_cores);
  CHECK_FALSE(LongPartitions::one_wave_combine);
  // The limit is the smaller of max_partition_tokens and max_partition_blocks cache blocks.
  CHECK(pagedattn::detail::partition_token_limit<LongPartitions>(8) == 512);
  CHECK(pagedattn::detail::partition_token_limit<LongPartitions>(16) == 1024);
  CHECK(pagedattn::detail::partition_token_limit<LongPartitions>(32) == 2048);
  // The base's defaults allow its max_partition_tokens at every block size.
  for (int block_size : pagedattn::supported_block_sizes)
  {
    CHECK(pagedattn::detail::partition_token_limit<pagedattn::AgentPagedAttentionPolicy>(block_size) ==
          pagedattn::AgentPagedAttentionPolicy::max_partition_tokens);
  }
}

TEST_CASE("launch plan: storage for any lengths under the bound, a persistent grid", "[policy][host]")
{
  using P = pagedattn::PagedAttentionPolicySm90;
  auto a = valid_arguments(); // 2 sequences x 4 KV heads = 8 segments
  a.max_seq_len = 1000;
  a.max_blocks_per_seq = 1000 / 16 + 1;
  auto plan = pagedattn::detail::make_plan<P>(a, 132);
  // Items: at least 8 x 32 partitions of 32 tokens (the host's own choice at 1000), at most what 32-token
  // partitions give: both are 256 here.
  CHECK(plan.capacity.items == 256u);
  CHECK(plan.capacity.groups >= 8u * 4u);
  CHECK(plan.layout.partial_slots == plan.capacity.items);
  CHECK(plan.layout.group_slots == plan.capacity.groups);
  CHECK(plan.temp_bytes == plan.layout.total_bytes);
  CHECK(plan.max_partitions_bound == 32); // 1000 tokens in 32-token partitions

  pagedattn::detail::choose_grid(plan, 3 * 132, true, false);
  CHECK(plan.grid == 256u); // a block per item of the bound
  CHECK(plan.cooperative);
  CHECK_FALSE(plan.init_pass); // every batch under the bound has a block per item and <= 128 partitions
  pagedattn::detail::choose_grid(plan, 200, true, false);
  CHECK(plan.grid == 256u);
  CHECK_FALSE(plan.cooperative); // the grid does not fit at once: tickets
  CHECK(plan.init_pass);
  pagedattn::detail::choose_grid(plan, 100, false, true);
  CHECK(plan.grid == 100u); // persistent: the resident blocks take tickets
  CHECK_FALSE(plan.cooperative);
  CHECK(plan.init_pass);
  pagedattn::detail::choose_grid(plan, 200, true, true);
  CHECK(plan.grid == 200u);
  CHECK(plan.cooperative);
  CHECK_FALSE(plan.init_pass); // some batch needs tickets, but a persistent cooperative launch zeroes the words itself
  pagedattn::detail::choose_grid(plan, 3 * 132, true, true);
  CHECK(plan.grid == 256u); // no more blocks than items
  CHECK_FALSE(plan.init_pass);
  pagedattn::detail::choose_grid(plan, 0, false, true);
  CHECK(plan.grid == 1u);

  // A looser bound (a graph captured at 65536) sizes more storage, never less.
  a.max_seq_len = 65536;
  a.max_blocks_per_seq = 65536 / 16;
  const auto loose = pagedattn::detail::make_plan<P>(a, 132);
  CHECK(loose.capacity.items >= plan.capacity.items);
  CHECK(loose.temp_bytes >= plan.temp_bytes);
  // A fixed partition size: every sequence's partitions at the bound.
  a.partition_tokens = 1024;
  CHECK(pagedattn::detail::make_plan<P>(a, 132).capacity.items == 8u * 64u);
  CHECK(pagedattn::detail::validate_plan(pagedattn::detail::make_plan<P>(a, 132)) == cudaSuccess);
}

TEST_CASE("launch plan: a plain launch goes persistent past four waves of items, eight for the 32-row kernel", "[policy][host]")
{
  using P = pagedattn::PagedAttentionPolicySm90;
  auto a = valid_arguments(); // 24 / 4 heads of 256
  a.max_seq_len = 100000;
  a.max_blocks_per_seq = 100000 / 16;
  auto plan_of = [&](int num_seqs, int q_len) {
    a.num_seqs = num_seqs;
    a.q_len = q_len;
    return pagedattn::detail::make_plan<P>(a, 132);
  };
  // 16 sequences of 4 new tokens (the 32-row kernel) under a bound of 100000: 2112 items, 8 waves of 264.
  const auto q4 = plan_of(16, 4);
  const std::size_t wave = static_cast<std::size_t>(q4.model.wave_blocks);
  REQUIRE(q4.head_split.kernel_rows == 32);
  CHECK(q4.capacity.items > 4 * wave);
  CHECK(q4.capacity.items <= 8 * wave);
  CHECK_FALSE(pagedattn::detail::loose_bound(q4)); // a block per item of the bound
  const auto q4_more = plan_of(24, 4);
  CHECK(q4_more.capacity.items > 8 * wave);
  CHECK(pagedattn::detail::loose_bound(q4_more));
  // One new token (the 8-row kernel), the same bound: persistent past four waves.
  const auto q1 = plan_of(16, 1);
  REQUIRE(q1.head_split.kernel_rows == 8);
  CHECK(q1.capacity.items > 4 * static_cast<std::size_t>(q1.model.wave_blocks));
  CHECK(pagedattn::detail::loose_bound(q1));
}

TEST_CASE("validation: each bad argument is named", "[policy][host]")
{
  using pagedattn::SupportedHeadDims;
  auto expect = [](pagedattn::DecodeArguments<__half> a, const char* name) {
    INFO("argument " << name);
    CHECK(pagedattn::detail::validate_arguments<__half, SupportedHeadDims>(a) == cudaErrorInvalidValue);
    CHECK(pagedattn::last_error_message().find(name) != std::string::npos);
  };
  CHECK(pagedattn::detail::validate_arguments<__half, SupportedHeadDims>(valid_arguments()) == cudaSuccess);
  { auto a = valid_arguments(); a.query = nullptr; expect(a, "query"); }
  { auto a = valid_arguments(); a.partition_tokens = -32; expect(a, "partition_tokens"); }
  { auto a = valid_arguments(); a.q_len = 0; expect(a, "q_len"); }
  { auto a = valid_arguments(); a.q_len = pagedattn::max_q_len + 1; expect(a, "q_len"); }
  { auto a = valid_arguments(); a.output = nullptr; expect(a, "output"); }
  { auto a = valid_arguments(); a.key_cache = nullptr; expect(a, "key_cache"); }
  { auto a = valid_arguments(); a.value_cache = nullptr; expect(a, "value_cache"); }
  { auto a = valid_arguments(); a.block_tables = nullptr; expect(a, "block_tables"); }
  { auto a = valid_arguments(); a.seq_lens = nullptr; expect(a, "seq_lens"); }
  { auto a = valid_arguments(); a.head_size = 48; expect(a, "head_size"); }
  { auto a = valid_arguments(); a.block_size = 64; expect(a, "block_size"); }
  { auto a = valid_arguments(); a.num_heads = 25; expect(a, "num_heads"); }
  { auto a = valid_arguments(); a.num_kv_heads = 0; expect(a, "num_kv_heads"); }
  { auto a = valid_arguments(); a.max_seq_len = -5; expect(a, "max_seq_len"); }
  { auto a = valid_arguments(); a.max_seq_len = 161; expect(a, "max_seq_len"); } // > 10 blocks * 16
  { auto a = valid_arguments(); a.num_seqs = -1; expect(a, "num_seqs"); }
  { auto a = valid_arguments(); a.scale = INFINITY; expect(a, "scale"); }
  { auto a = valid_arguments(); a.value_cache = reinterpret_cast<const __half*>(reinterpret_cast<const char*>(a.value_cache) + 8); expect(a, "value_cache"); }
  {
    using Only256 = std::integer_sequence<int, 256>;
    auto a = valid_arguments();
    a.head_size = 128; // supported by the library, not by this instantiation
    CHECK(pagedattn::detail::validate_arguments<__half, Only256>(a) == cudaErrorInvalidValue);
    CHECK(pagedattn::last_error_message().find("head_size 128") != std::string::npos);
  }
}
