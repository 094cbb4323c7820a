#pragma once
// What a warp needs to know about the tile of tokens it is folding in (shared by the CUDA-core and the
// tensor-core warp tiles of AgentPagedAttention).
#include <cstdint>

#include <pagedattn/config.cuh>

namespace pagedattn {

struct WarpTileContext {
  int kv_head;
  int token0;        ///< first token of the tile (live: token0 < end_token)
  int end_token;     ///< end of the partition's valid tokens
  int lane_block_id; ///< cache block of token token0 + lane, checked to lie in [0, num_blocks) when live
};

} // namespace pagedattn
