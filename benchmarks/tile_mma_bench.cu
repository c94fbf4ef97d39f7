// The tensor-core tile building block (runtime/coco_tile_mma.h) alone, on the
// MoE expert GEMM's shape, beside cuBLAS on the same GPU (issue 26 item 2).
//
//   nvcc -arch=sm_90 -O3 -std=c++17 -I coconet_ir/backend/cuda/runtime \
//     benchmarks/tile_mma_bench.cu -lcublas -o tile_mma_bench
//   ./tile_mma_bench [E M N K] [iters]     (default 64 2048 4096 14336, 5)
//
// Several tile shapes and pipeline depths, each checked and timed.
//
// C[e] = A[e] @ B[e] for E experts, A [M, K], B [K, N], C [M, N], bf16
// row-major, f32 accumulation: one block per BM x BN tile of C (grid N/BN x
// M/BM x E). Checks two experts against a plain f32 loop on the GPU
// (relative error of the norm) and times it and cublasGemmStridedBatchedEx
// (the same product, what torch.bmm calls) with CUDA events.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "coco_tile_mma.h"

#define CHECK(x)                                                                 \
  do {                                                                           \
    cudaError_t e_ = (x);                                                        \
    if (e_ != cudaSuccess) {                                                     \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

template <class Tile, int MinBlocks>
__global__ void __launch_bounds__(Tile::threads, MinBlocks)
    experts(const __nv_bfloat16 *A, const __nv_bfloat16 *B, __nv_bfloat16 *C, long long M,
            long long N, long long K, int bm, int bn) {
  extern __shared__ __align__(128) unsigned char shared[];
  const long long e = blockIdx.z;
  Tile::run(A + e * M * K, (int)K, B + e * K * N, (int)N, (int)K, C + e * M * N, (int)N,
            blockIdx.y * (long long)bm,
            blockIdx.x * (long long)bn, reinterpret_cast<__nv_bfloat16 *>(shared));
}

__global__ void fill(__nv_bfloat16 *out, long long n, unsigned seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed * 40503u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    out[i] = __float2bfloat16((float)(h % 2048) / 1024.0f - 1.0f);
  }
}

// Expert e's product in f32, one thread per output.
__global__ void reference(const __nv_bfloat16 *A, const __nv_bfloat16 *B, float *C, long long M,
                          long long N, long long K, long long e) {
  for (long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x; o < M * N;
       o += (long long)gridDim.x * blockDim.x) {
    const long long r = o / N, c = o % N;
    float sum = 0.0f;
    for (long long k = 0; k < K; ++k)
      sum += __bfloat162float(A[(e * M + r) * K + k]) * __bfloat162float(B[(e * K + k) * N + c]);
    C[o] = sum;
  }
}

int main(int argc, char **argv) {
  long long E = 64, M = 2048, N = 4096, K = 14336;
  int iters = 5;
  if (argc >= 5) E = atoll(argv[1]), M = atoll(argv[2]), N = atoll(argv[3]), K = atoll(argv[4]);
  if (argc >= 6) iters = atoi(argv[5]);
  if (M % 256 || N % 256 || K % 32) {
    fprintf(stderr, "M and N must be multiples of 256, K of 32\n");
    return 2;
  }
  __nv_bfloat16 *A, *B, *C, *D;
  CHECK(cudaMalloc(&A, E * M * K * 2));
  CHECK(cudaMalloc(&B, E * K * N * 2));
  CHECK(cudaMalloc(&C, E * M * N * 2));
  CHECK(cudaMalloc(&D, E * M * N * 2));
  fill<<<4096, 256>>>(A, E * M * K, 1);
  fill<<<4096, 256>>>(B, E * K * N, 2);

  // The f32 reference of experts 0 and E-1.
  float *ref;
  CHECK(cudaMalloc(&ref, M * N * 4));
  float *host_ref = (float *)malloc(2 * M * N * 4);
  __nv_bfloat16 *host_c = (__nv_bfloat16 *)malloc(M * N * 2);
  const long long checked[2] = {0, E - 1};
  for (int x = 0; x < 2; ++x) {
    reference<<<8192, 256>>>(A, B, ref, M, N, K, checked[x]);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(host_ref + x * M * N, ref, M * N * 4, cudaMemcpyDeviceToHost));
  }
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  const double flops = 2.0 * E * M * N * K;
  float ms = 0.0f;
  bool all_ok = true;

  // One variant: check, then time.
  auto variant = [&](const char *name, auto kernel, int bytes, int bm, int bn) {
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    dim3 grid((unsigned)(N / bn), (unsigned)(M / bm), (unsigned)E);
    CHECK(cudaMemset(C, 0xff, E * M * N * 2));  // NaN: an unwritten output fails
    kernel<<<grid, 256, bytes>>>(A, B, C, M, N, K, bm, bn);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    double worst = 0.0;
    for (int x = 0; x < 2; ++x) {
      CHECK(cudaMemcpy(host_c, C + checked[x] * M * N, M * N * 2, cudaMemcpyDeviceToHost));
      double diff = 0.0, norm = 0.0;
      for (long long i = 0; i < M * N; ++i) {
        const double r = host_ref[x * M * N + i];
        const double d = (double)__bfloat162float(host_c[i]) - r;
        diff += d * d;
        norm += r * r;
      }
      const double rel = sqrt(diff / norm);
      if (!(rel <= worst)) worst = rel;  // NaN sticks
    }
    CHECK(cudaEventRecord(start));
    for (int i = 0; i < iters; ++i) kernel<<<grid, 256, bytes>>>(A, B, C, M, N, K, bm, bn);
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    const double us = ms * 1000.0 / iters;
    all_ok = all_ok && worst < 1e-2;
    printf("tile_mma %-12s %8.0f us %5.0f TFLOP/s  error %.2e %s\n", name, us,
           flops / us * 1e-6, worst, worst < 1e-2 ? "ok" : "WRONG");
  };
  printf("E=%lld M=%lld N=%lld K=%lld\n", E, M, N, K);
  using T1 = coco::tile_mma<128, 128, 2>;
  using T2 = coco::tile_mma<128, 128, 3>;
  using T3 = coco::tile_mma<128, 256, 3>;
  using T4 = coco::tile_mma<256, 128, 3>;
  using T5 = coco::tile_mma<128, 128, 4>;
  variant("128x128 s2", experts<T1, 2>, T1::shared_bytes, 128, 128);
  variant("128x128 s3", experts<T2, 2>, T2::shared_bytes, 128, 128);
  variant("128x128 s4", experts<T5, 2>, T5::shared_bytes, 128, 128);
  variant("128x256 s3", experts<T3, 1>, T3::shared_bytes, 128, 256);
  variant("256x128 s3", experts<T4, 1>, T4::shared_bytes, 256, 128);

  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return 1;
  const float one = 1.0f, zero = 0.0f;
  auto gemm = [&]() {  // row-major C = A B as column-major C^T = B^T A^T
    return cublasGemmStridedBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, (int)N, (int)M, (int)K,
                                      &one, B, CUDA_R_16BF, (int)N, K * N, A, CUDA_R_16BF,
                                      (int)K, M * K, &zero, D, CUDA_R_16BF, (int)N, M * N,
                                      (int)E, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  };
  if (gemm() != CUBLAS_STATUS_SUCCESS) return 1;
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaEventRecord(start));
  for (int i = 0; i < iters; ++i) gemm();
  CHECK(cudaEventRecord(stop));
  CHECK(cudaEventSynchronize(stop));
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  const double cublas = ms * 1000.0 / iters;
  printf("cuBLAS strided batched   %8.0f us %5.0f TFLOP/s\n", cublas, flops / cublas * 1e-6);
  return all_ok ? 0 : 1;
}
