// coco_tile_mma.h — one block computes one output tile of a bf16 GEMM on the
// tensor cores (issue 26 item 2; docs/performance.md, "The tensor-core tile,
// alone").
//
//   coco::tile_mma<BM, BN>::run(A, lda, B, ldb, K, C, ldc, m0, n0)
//
// C[m0 : m0+BM, n0 : n0+BN] = A[m0 : m0+BM, 0:K] @ B[0:K, n0 : n0+BN], every
// matrix row-major bf16 (A's rows `lda` elements apart, B's `ldb`, C's `ldc`:
// int strides, K too; the tile's offsets m0 and n0 64-bit),
// accumulated in f32 and rounded once. The block (256 threads: 8 warps, 2
// along M by 4 along N, each a (BM/2) x (BN/4) sub-tile of 16x16 fragments)
// stages A and B in shared memory 32 columns of K at a time, STAGES deep with
// cp.async, and multiplies with WMMA (mma.sync: HMMA in SASS, sm_80 and
// later). Requirements, checked by the caller: K % 32 == 0, lda, ldb and ldc
// multiples of 8, A, B and C 16-byte aligned. This is the first building
// block of the tile kernels' tensor-core path; the CPU emulation's twin is a
// plain loop (to come with its use in the tile kernels).
#pragma once

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <mma.h>

namespace coco {

__device__ __forceinline__ void cp_async16(void *shared, const void *global) {
  const unsigned to = (unsigned)__cvta_generic_to_shared(shared);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(global));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int Pending> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

template <int BM = 128, int BN = 128, int STAGES = 3>
struct tile_mma {
  static constexpr int threads = 256;
  static constexpr int BK = 32;
  static constexpr int WM = BM / 2, WN = BN / 4;  // one warp's sub-tile
  static constexpr int FM = WM / 16, FN = WN / 16;  // its fragments
  static constexpr int AS = BK + 8, BS = BN + 8;  // padded rows (banks)
  static constexpr int A_STAGE = BM * AS, B_STAGE = BK * BS;
  // Shared memory in bytes: STAGES stages of A and B (the epilogue reuses
  // it); above 48 KiB the kernel needs cudaFuncAttributeMaxDynamicSharedMemorySize.
  static constexpr int shared_bytes = STAGES * (A_STAGE + B_STAGE) * 2;
  static_assert(BM % 32 == 0 && BN % 64 == 0 && STAGES >= 2, "tile shape");
  static_assert(BM * BK / 8 % threads == 0 && BK * BN / 8 % threads == 0, "copy split");
  static_assert(8 * 16 * 16 * 4 <= shared_bytes, "epilogue staging fits");

  // Stage at (a, b) <- the K columns [k0, k0 + BK) of A's rows and B's rows.
  // `A` and `B` point at the tile's first row and column already.
  static __device__ __forceinline__ void load(__nv_bfloat16 *a, __nv_bfloat16 *b,
                                              const __nv_bfloat16 *A, int lda,
                                              const __nv_bfloat16 *B, int ldb, int k0) {
    const int tid = threadIdx.x;
#pragma unroll
    for (int c = tid; c < BM * BK / 8; c += threads) {  // 8 bf16 = 16 bytes a copy
      const int row = c / (BK / 8), col = c % (BK / 8) * 8;
      cp_async16(a + row * AS + col, A + row * lda + k0 + col);
    }
#pragma unroll
    for (int c = tid; c < BK * BN / 8; c += threads) {
      const int row = c / (BN / 8), col = c % (BN / 8) * 8;
      cp_async16(b + row * BS + col, B + (long long)k0 * ldb + row * ldb + col);
    }
  }

  // Two floats rounded to bf16, as one 32-bit word (the first in the low half).
  static __device__ __forceinline__ unsigned pack(float first, float second) {
    const __nv_bfloat162 two = __floats2bfloat162_rn(first, second);
    return *reinterpret_cast<const unsigned *>(&two);
  }

  static __device__ void run(const __nv_bfloat16 *A, int lda, const __nv_bfloat16 *B, int ldb,
                             int K, __nv_bfloat16 *C, int ldc, long long m0, long long n0,
                             __nv_bfloat16 *shared) {
    using namespace nvcuda;
    A += m0 * lda;  // the tile's rows of A, its columns of B and C
    B += n0;
    C += m0 * ldc + n0;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = warp / 4, wn = warp % 4;
    // Stage s: A at shared + s * A_STAGE, B at b_base + s * B_STAGE (offsets,
    // not an array of pointers, which would live in local memory).
    __nv_bfloat16 *const b_base = shared + STAGES * A_STAGE;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
      for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    // STAGES - 1 steps of K in flight ahead of the one multiplied; a commit
    // group every step (empty past the end), so waiting for all but the
    // newest STAGES - 2 groups waits exactly for step t.
    const int steps = K / BK;
#pragma unroll
    for (int p = 0; p < STAGES - 1; ++p) {
      if (p < steps) load(shared + p * A_STAGE, b_base + p * B_STAGE, A, lda, B, ldb, p * BK);
      cp_async_commit();
    }
    for (int t = 0; t < steps; ++t) {
      cp_async_wait<STAGES - 2>();
      __syncthreads();  // step t landed for every thread; step t - 1 is consumed
      const int next = t + STAGES - 1;
      if (next < steps) {
        const int s = next % STAGES;
        load(shared + s * A_STAGE, b_base + s * B_STAGE, A, lda, B, ldb, next * BK);
      }
      cp_async_commit();
      const int s = t % STAGES;
      const __nv_bfloat16 *a_now = shared + s * A_STAGE;
      const __nv_bfloat16 *b_now = b_base + s * B_STAGE;
#pragma unroll
      for (int kk = 0; kk < BK; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a[FM];
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b[FN];
#pragma unroll
        for (int i = 0; i < FM; ++i)
          wmma::load_matrix_sync(a[i], a_now + (wm * WM + i * 16) * AS + kk, AS);
#pragma unroll
        for (int j = 0; j < FN; ++j)
          wmma::load_matrix_sync(b[j], b_now + kk * BS + wn * WN + j * 16, BS);
#pragma unroll
        for (int i = 0; i < FM; ++i)
#pragma unroll
          for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
      }
    }
    cp_async_wait<0>();
    __syncthreads();  // every warp is done with the stages: the epilogue reuses them

    // Epilogue: each fragment through the warp's 16x16 f32 staging square,
    // rounded to bf16, 8 elements (16 bytes) a lane.
    float *staging = reinterpret_cast<float *>(shared) + warp * 256;
    const int row = lane / 2, col = lane % 2 * 8;
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
      for (int j = 0; j < FN; ++j) {
        wmma::store_matrix_sync(staging, acc[i][j], 16, wmma::mem_row_major);
        __syncwarp();
        const float4 lo = *reinterpret_cast<const float4 *>(staging + row * 16 + col);
        const float4 hi = *reinterpret_cast<const float4 *>(staging + row * 16 + col + 4);
        const uint4 packed = make_uint4(pack(lo.x, lo.y), pack(lo.z, lo.w), pack(hi.x, hi.y),
                                        pack(hi.z, hi.w));
        const int r = wm * WM + i * 16 + row, c = wn * WN + j * 16 + col;
        *reinterpret_cast<uint4 *>(C + r * ldc + c) = packed;
        __syncwarp();
      }
  }
};

}  // namespace coco
#endif
