// GPU tests of DevicePagedAttention::Decode over caches in token rows (layout_cases.cuh), fp16 on the
// tensor-core fold (KvSlabRows: tensor copies on sm_90 where rows are whole 128-byte spans, else
// cp.async): the matrix at heads 64 to 112. test_decode_layouts_fp16.cu has the larger heads,
// test_decode_layouts_types.cu the other element types.
#include "device/layout_cases.cuh"

using namespace layout_test;

TEST_CASE("decode layouts: fp16 over hnd and nhd, heads 64 to 112 x block size x GQA, packed and views", "[decode][gpu][layouts]")
{
  GPU_TEST_SEED(seed, 2500);
  test::report("matrix hnd/nhd, heads 64-112", "fp16", fp16_matrix<64, 80, 96, 112>(seed, 0));
}
