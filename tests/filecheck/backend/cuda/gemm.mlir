// RUN: coconet-opt %s -t cuda | filecheck %s
// coco_gpu.gemm as cuBLAS, row-major through the column-major trick
// (C^T = B^T A^T: B is cuBLAS's first matrix), f32 accumulation; leading dims
// of `a` fold into rows; a batched `b` is a strided batched GEMM.

builtin.module {
  func.func @mm(%a: memref<4x8x64xf16>, %w: memref<64x32xf16>, %c: memref<4x8x32xf16>, %a3: memref<2x8x64xf32>, %b3: memref<2x64x16xf32>, %c3: memref<2x8x16xf32>) {
    coco_gpu.gemm %a, %w, %c : memref<4x8x64xf16>, memref<64x32xf16>, memref<4x8x32xf16>
    coco_gpu.gemm %a3, %b3, %c3 accumulate {coco_gpu.stream = 1 : i64} : memref<2x8x64xf32>, memref<2x64x16xf32>, memref<2x8x16xf32>
    func.return
  }
}

// CHECK-LABEL: extern "C" int coco_mm(coco_context *ctx, __half *a, __half *w, __half *c, float *a3, float *b3, float *c3) {
// CHECK-NEXT:    COCO_CHECK_CUBLAS(cublasSetStream(ctx->cublas, ctx->streams[0]));
// CHECK-NEXT:    const float alpha = 1.0f, beta = 0.0f;
// CHECK-NEXT:    COCO_CHECK_CUBLAS(cublasGemmEx(ctx->cublas, CUBLAS_OP_N, CUBLAS_OP_N, 32, 32, 64, &alpha, w, CUDA_R_16F, 32, a, CUDA_R_16F, 64, &beta, c, CUDA_R_16F, 32, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
// CHECK-NEXT:    COCO_CHECK_CUBLAS(cublasSetStream(ctx->cublas, ctx->streams[1]));
// CHECK-NEXT:    const float alpha_1 = 1.0f, beta_1 = 1.0f;
// CHECK-NEXT:    COCO_CHECK_CUBLAS(cublasGemmStridedBatchedEx(ctx->cublas, CUBLAS_OP_N, CUBLAS_OP_N, 16, 8, 64, &alpha_1, b3, CUDA_R_32F, 16, 1024LL, a3, CUDA_R_32F, 64, 512LL, &beta_1, c3, CUDA_R_32F, 16, 128LL, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
