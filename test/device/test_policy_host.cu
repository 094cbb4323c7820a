// Host tests (CI) of the dispatch's host-side logic: the policies' static limits, the GQA head tiling,
// the launch plan and the argument validation.
#include <pagedattn/device/device_paged_attention.cuh>

#include "support/test_support.cuh"

namespace {

template <class Policy, class T, int HeadDim, int MaxHeads>
void check_limits()
{
  INFO(Policy::name << " " << pagedattn::ElementTraits<T>::name << " head " << HeadDim << " max heads " << MaxHeads);
  using Agent = pagedattn::AgentPagedAttention<T, HeadDim, MaxHeads, Policy>;
  using Fold = typename Agent::Fold;
  CHECK(pagedattn::detail::paged_attention_smem_bytes<T, HeadDim, MaxHeads, Policy>() <= Policy::smem_budget_bytes);
  CHECK(Policy::block_threads % pagedattn::warp_threads == 0);
  CHECK(HeadDim % 16 == 0);                  // 16-byte key slices, 16-dim mma steps
  CHECK(Policy::max_partition_tokens >= 64); // partitions (multiples of 32) never split a cache block
  CHECK(Policy::max_partition_tokens % 32 == 0);
  for (int block_size : pagedattn::supported_block_sizes)
  {
    const int limit = pagedattn::detail::partition_token_limit<Policy>(block_size);
    CHECK(limit >= 64);
    CHECK(limit % 32 == 0);
    CHECK(limit / block_size <= Policy::max_partition_blocks); // the staged block ids suffice
  }
  if constexpr (pagedattn::detail::uses_tensor_cores<T, Policy>)
  {
    using Tile = typename Fold::Tile;
    CHECK(MaxHeads <= Tile::max_heads);
    CHECK(Tile::k_steps * 16 == HeadDim);                              // the k-steps (and m-tiles) cover the head
    CHECK(Tile::steps_per_warp * Tile::block_threads / 32 >= Tile::k_steps); // every k-step has a warp
    CHECK(Fold::tile_tokens % 32 == 0);                                // whole 32-token slabs: whole cache blocks
    CHECK((Fold::tile_tokens == 32 || Fold::tile_tokens * HeadDim * 4 <= Policy::tile_bytes)); // at most tile_bytes of K + V
    CHECK(Fold::stages >= 2);
  }
  else
  {
    using Tile = typename Fold::WarpTile;
    CHECK(MaxHeads <= Tile::max_heads);
    CHECK(Tile::chunks * Tile::x == HeadDim);
    CHECK(Fold::tile_tokens % 8 == 0); // V vectors of 8 tokens never straddle a cache block
    CHECK(Policy::max_partition_tokens % Fold::tile_tokens == 0);
  }
}

template <class Policy, class T, int... HeadDims>
void check_policy(std::integer_sequence<int, HeadDims...>)
{
  (check_limits<Policy, T, HeadDims, 1>(), ...);
  (check_limits<Policy, T, HeadDims, 4>(), ...);
  (check_limits<Policy, T, HeadDims, 8>(), ...);
}

template <class Policy>
void check_all_types()
{
  check_policy<Policy, __half>(pagedattn::SupportedHeadDims{});
  check_policy<Policy, __nv_bfloat16>(pagedattn::SupportedHeadDims{});
  check_policy<Policy, float>(pagedattn::SupportedHeadDims{});
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

// A binary built for sm_80 only runs its sm_80 device code on Hopper while the host sizes shared memory
// with the sm_90 policy (tuning_paged_attention.cuh): that must never give the kernel less than it uses.
template <class T, int... HeadDims>
void check_sm80_code_fits_sm90_launch(std::integer_sequence<int, HeadDims...>)
{
  using pagedattn::detail::paged_attention_smem_bytes;
  const bool fits = ((paged_attention_smem_bytes<T, HeadDims, 8, pagedattn::PagedAttentionPolicySm80>() <=
                      paged_attention_smem_bytes<T, HeadDims, 8, pagedattn::PagedAttentionPolicySm90>()) && ...);
  CHECK(fits);
}

TEST_CASE("policies: sm_80 device code under the sm_90 host policy is safe", "[policy][host]")
{
  using Sm80 = pagedattn::PagedAttentionPolicySm80;
  using Sm90 = pagedattn::PagedAttentionPolicySm90;
  CHECK(Sm80::block_threads == Sm90::block_threads);
  CHECK(Sm80::tensor_cores == Sm90::tensor_cores);
  CHECK(Sm80::min_blocks_per_sm <= Sm90::min_blocks_per_sm);
  CHECK(Sm80::max_partition_tokens == Sm90::max_partition_tokens); // with max_partition_blocks, limits ...
  CHECK(Sm80::max_partition_blocks == Sm90::max_partition_blocks);  // ... partitions and sizes the block-id staging
  check_sm80_code_fits_sm90_launch<__half>(pagedattn::SupportedHeadDims{});
  check_sm80_code_fits_sm90_launch<__nv_bfloat16>(pagedattn::SupportedHeadDims{});
  check_sm80_code_fits_sm90_launch<float>(pagedattn::SupportedHeadDims{});
}

TEST_CASE("policy chain: sm_90 from compute capability 9.0, sm_80 below", "[policy][host]")
{
  auto name = [](int cc) { return pagedattn::DefaultPagedAttentionPolicies::invoke(cc, [](auto p) { return std::string(p.name); }); };
  CHECK(name(80) == "sm80");
  CHECK(name(86) == "sm80");
  CHECK(name(89) == "sm80");
  CHECK(name(90) == "sm90");
  CHECK(name(100) == "sm90");
  CHECK(pagedattn::SinglePolicyChain<pagedattn::PagedAttentionPolicyBIV100>::invoke(90, [](auto p) { return std::string(p.name); }) == "bi_v100");
}

TEST_CASE("GQA head tiling: groups of up to 8 heads per block, instantiations 1, 4, 8", "[policy][host]")
{
  for (int ratio = 1; ratio <= 32; ++ratio)
  {
    INFO("ratio " << ratio);
    const auto t = pagedattn::detail::head_tiling(ratio);
    CHECK(t.heads_per_tile <= t.max_heads);
    CHECK(t.max_heads <= pagedattn::max_heads_per_block);
    CHECK(t.head_tiles * t.heads_per_tile >= ratio);
    CHECK((t.head_tiles - 1) * t.heads_per_tile < ratio); // no empty tile
  }
  CHECK(pagedattn::detail::head_tiling(6).head_tiles == 1);
  CHECK(pagedattn::detail::head_tiling(8).head_tiles == 1);
  CHECK(pagedattn::detail::head_tiling(16).head_tiles == 2);
}

TEST_CASE("launch plan: the partition that fills whole waves, or the caller's", "[policy][host]")
{
  using P = pagedattn::PagedAttentionPolicySm90;
  const int sms = 132;
  auto a = valid_arguments(); // 2 sequences x 4 KV heads = 8 segments
  a.max_blocks_per_seq = 1000000 / 16;

  // Automatic: 8 segments, waves of 2 blocks per SM on 132 SMs.
  a.max_seq_len = 1000000;
  auto plan = pagedattn::detail::make_plan<P>(a, sms);
  const int limit = pagedattn::detail::partition_token_limit<P>(16);
  CHECK(limit == P::max_partition_tokens);
  CHECK(plan.partition_tokens <= limit);
  CHECK(plan.partition_tokens >= limit * 7 / 8); // long partitions ...
  CHECK(plan.max_partitions == (1000000 + plan.partition_tokens - 1) / plan.partition_tokens);
  const int blocks = plan.max_partitions * 8;
  const int waves = (blocks + 2 * sms - 1) / (2 * sms);
  CHECK(blocks * 100 >= waves * 2 * sms * 99); // ... in waves at least 99 % full (3808 tokens: 2104 of 8 x 264)
  a.block_size = 8; // at most 256 cache blocks per partition: 2048 tokens
  plan = pagedattn::detail::make_plan<P>(a, sms);
  CHECK(plan.partition_tokens <= 2048);
  CHECK(plan.partition_tokens >= 2048 * 7 / 8);
  a.block_size = 16;
  a.max_seq_len = 16384;
  CHECK(pagedattn::detail::make_plan<P>(a, sms).partition_tokens == 512); // ceil(16384 / 33) = 497, up to 512
  a.num_seqs = 1;
  a.max_seq_len = 100000;
  CHECK(pagedattn::detail::make_plan<P>(a, sms).partition_tokens == 1536); // 66 partitions x 4 KV heads = 264 blocks
  // More segments than one wave holds at the longest partition: whole waves, not one and a half.
  a.num_heads = 32;
  a.num_kv_heads = 8;
  a.head_size = 128;
  plan = pagedattn::detail::make_plan<P>(a, sms);
  CHECK(plan.partition_tokens == 3040); // 33 x 8 = 264 blocks: one wave
  CHECK(plan.max_partitions == 33);
  a.block_size = 8; // partitions of at most 2048 tokens: two whole waves (528 blocks), not 392 of 2048
  CHECK(pagedattn::detail::make_plan<P>(a, sms).partition_tokens == 1536);
  a.block_size = 16;
  a.num_heads = 24;
  a.num_kv_heads = 4;
  a.head_size = 256;
  a.num_seqs = 4;
  a.max_seq_len = 2049;
  plan = pagedattn::detail::make_plan<P>(a, sms);
  CHECK(plan.partition_tokens == 160); // 13 x 16 = 208 blocks in one wave (17 x 128 = 272 would need two)
  CHECK(plan.max_partitions == 13);
  // Shorter partitions only where they save a wave: 64 x 4096 keeps whole sequences (256 blocks).
  a.num_seqs = 64;
  a.max_seq_len = 4096;
  CHECK_FALSE(pagedattn::detail::make_plan<P>(a, sms).partitioned);
  a.num_seqs = 8;
  a.max_seq_len = 32768;
  CHECK(pagedattn::detail::make_plan<P>(a, sms).partition_tokens == 4096); // 8 x 32 = 256 blocks
  a.num_seqs = 256;
  a.max_seq_len = 1024;
  CHECK_FALSE(pagedattn::detail::make_plan<P>(a, sms).partitioned); // 1024 blocks of a whole sequence
  a.num_seqs = 2;
  a.max_seq_len = 1000;
  plan = pagedattn::detail::make_plan<P>(a, sms);
  CHECK(plan.partition_tokens == 32); // ceil(1000 / 33) = 31, up to 32: the smallest automatic partition
  CHECK(plan.partition_tokens == pagedattn::detail::min_auto_partition_tokens);
  CHECK(plan.max_partitions == 32);
  CHECK(plan.partitioned);
  CHECK(plan.num_segments == 2u * 4u);
  CHECK(plan.temp_bytes >= plan.layout.total_bytes);
  a.max_seq_len = 32;
  plan = pagedattn::detail::make_plan<P>(a, sms);
  CHECK(plan.max_partitions == 1);
  CHECK_FALSE(plan.partitioned);

  // Fixed by the caller: independent of the batch and of the device.
  a.partition_tokens = 512;
  a.max_seq_len = 512;
  plan = pagedattn::detail::make_plan<P>(a, sms);
  CHECK_FALSE(plan.partitioned);
  a.max_seq_len = 513;
  plan = pagedattn::detail::make_plan<P>(a, 1);
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

TEST_CASE("validation: each bad argument is named", "[policy][host]")
{
  using pagedattn::SupportedHeadDims;
  auto expect = [](pagedattn::DecodeArguments<__half> a, const char* name) {
    INFO("argument " << name);
    CHECK(pagedattn::detail::validate<__half, SupportedHeadDims>(a) == cudaErrorInvalidValue);
    CHECK(pagedattn::last_error_message().find(name) != std::string::npos);
  };
  CHECK(pagedattn::detail::validate<__half, SupportedHeadDims>(valid_arguments()) == cudaSuccess);
  { auto a = valid_arguments(); a.query = nullptr; expect(a, "query"); }
  { auto a = valid_arguments(); a.partition_tokens = -32; expect(a, "partition_tokens"); }
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
    CHECK(pagedattn::detail::validate<__half, Only256>(a) == cudaErrorInvalidValue);
    CHECK(pagedattn::last_error_message().find("head_size 128") != std::string::npos);
  }
}
