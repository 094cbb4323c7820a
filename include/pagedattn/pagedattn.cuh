#pragma once
// Umbrella header: the whole library.
#include <pagedattn/version.cuh>
#include <pagedattn/util_arch.cuh>
#include <pagedattn/util_error.cuh>
#include <pagedattn/util_type.cuh>
#include <pagedattn/warp/warp_reduce_shfl.cuh>
#include <pagedattn/warp/warp_dot_product.cuh>
#include <pagedattn/warp/warp_attention_partial.cuh>
#include <pagedattn/block/attention_partial.cuh>
#include <pagedattn/block/online_softmax_combine.cuh>
#include <pagedattn/block/block_reduce_partials.cuh>
#include <pagedattn/agent/partition_tile_state.cuh>
#include <pagedattn/agent/agent_partition_combine.cuh>
#include <pagedattn/agent/agent_paged_attention.cuh>
#include <pagedattn/device/device_combine_partials.cuh>
#include <pagedattn/device/device_paged_attention.cuh>
