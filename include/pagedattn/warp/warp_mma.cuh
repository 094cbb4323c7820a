#pragma once
// Level 1 (tensor cores): one warp-wide mma.sync m16n8k16 with fp32 accumulation, for fp16 and bf16
// operands (sm_80 and newer; not available on BI-V100, which has no inline PTX).
//
// Fragment ownership (PTX ISA, "Matrix Fragments for mma.m16n8k16"), with g = lane / 4, q = lane % 4:
//   A (16 x 16, row-major): a0 = A[g][2q..2q+1], a1 = A[g+8][2q..2q+1], a2 = A[g][2q+8..2q+9], a3 = A[g+8][2q+8..2q+9]
//   B (16 x 8, column-major): b0 = B[2q..2q+1][g], b1 = B[2q+8..2q+9][g]
//   C (16 x 8, fp32): c0 = C[g][2q], c1 = C[g][2q+1], c2 = C[g+8][2q], c3 = C[g+8][2q+1]
// Each a/b register holds two consecutive k elements of the 16-bit type.
//
// ldmatrix_x4 loads a whole A fragment from shared memory: lanes 8i .. 8i+7 give the addresses of the 8
// rows (16 bytes each) of 8x8 matrix i, and lane (g, q) receives row g, elements 2q .. 2q+1 of matrix i
// in register i. With matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15),
// (rows 8-15, k 8-15) that is exactly a0 .. a3.
// ldmatrix_x4_trans reads the same 8x8 matrices transposed: lane (g, q) receives elements (rows 2q,
// 2q + 1; column g) of matrix i, so matrices stored with their k index along the rows (V as token rows,
// the A operand of V^T) give the A fragment as well.
#include <cstdint>
#include <type_traits>

#include <pagedattn/util_type.cuh>

namespace pagedattn {

template <class T>
PAGEDATTN_DEVICE void mma_m16n8k16(float (&c)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2, std::uint32_t a3,
                                   std::uint32_t b0, std::uint32_t b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(__ILUVATAR__)
  if constexpr (std::is_same_v<T, __half>)
  {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
#  if PAGEDATTN_HAS_BF16
  else
  {
    static_assert(std::is_same_v<T, __nv_bfloat16>, "mma_m16n8k16: fp16 or bf16 operands");
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
#  endif
#else
  (void)c; (void)a0; (void)a1; (void)a2; (void)a3; (void)b0; (void)b1;
  __trap(); // the dispatch never selects the tensor-core path below sm_80
#endif
}

/// Four 8x8 matrices of 16-bit elements from shared memory (see above); `row` is this lane's row address.
PAGEDATTN_DEVICE void ldmatrix_x4(const void* row, std::uint32_t& r0, std::uint32_t& r1, std::uint32_t& r2, std::uint32_t& r3)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(__ILUVATAR__)
  const unsigned smem = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(smem));
#else
  (void)row; r0 = r1 = r2 = r3 = 0;
  __trap(); // the dispatch never selects the tensor-core path below sm_80
#endif
}

/// The same, each matrix transposed (see above).
PAGEDATTN_DEVICE void ldmatrix_x4_trans(const void* row, std::uint32_t& r0, std::uint32_t& r1, std::uint32_t& r2, std::uint32_t& r3)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(__ILUVATAR__)
  const unsigned smem = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(smem));
#else
  (void)row; r0 = r1 = r2 = r3 = 0;
  __trap(); // the dispatch never selects the tensor-core path below sm_80
#endif
}

} // namespace pagedattn
