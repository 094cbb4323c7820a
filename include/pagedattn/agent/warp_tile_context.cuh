#pragma once
// What a warp needs to know about the tile of tokens it is folding in: the CUDA-core fold's per-warp tile
// (WarpTileCudaCore, called by PartitionFoldCudaCore). The tensor-core fold does not use it: its block tile
// (BlockTileTensorCore) takes the PartitionWork.
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
