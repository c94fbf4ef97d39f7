// RUN: coconet-opt %s -p convert-coco-to-gpu | filecheck %s
// Compute ops that are not elementwise: reductions and norms are kernels with
// one thread per output element (f32 accumulation for halves), all_slice
// copies the rank's block, matmul is a cuBLAS gemm of the per-rank buffers.

// sum over dim 1 of a [4, 2, 16] block (sliced<1> on 4 ranks): output
// (p, q) = i / 16, i % 16 starts at p * 32 + q; element j of the loop adds
// j * 16.
// CHECK:      ^bb0(%n: index, %src: memref<128xf16>, %dst: memref<64xf16>):
// CHECK:        scf.for %i = %start to %n step %step {
// CHECK-NEXT:     %5 = arith.constant 16 : index
// CHECK-NEXT:     %6 = arith.divui %i, %5 : index
// CHECK-NEXT:     %7 = arith.constant 16 : index
// CHECK-NEXT:     %8 = arith.remui %i, %7 : index
// CHECK-NEXT:     %9 = arith.constant 32 : index
// CHECK-NEXT:     %10 = arith.muli %6, %9 : index
// CHECK-NEXT:     %11 = arith.addi %10, %8 : index
// CHECK-NEXT:     %12 = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:     %13 = arith.constant 2 : index
// CHECK-NEXT:     %14 = arith.constant 0 : index
// CHECK-NEXT:     %15 = arith.constant 1 : index
// CHECK-NEXT:     %16 = scf.for %j = %14 to %13 step %15 iter_args(%acc = %12) -> (f32) {
// CHECK-NEXT:       %17 = arith.constant 16 : index
// CHECK-NEXT:       %18 = arith.muli %j, %17 : index
// CHECK-NEXT:       %19 = arith.addi %11, %18 : index
// CHECK-NEXT:       %20 = memref.load %src[%19] : memref<128xf16>
// CHECK-NEXT:       %21 = arith.extf %20 : f16 to f32
// CHECK-NEXT:       %22 = arith.addf %acc, %21 : f32
// CHECK-NEXT:       scf.yield %22 : f32
// CHECK-NEXT:     }
// CHECK-NEXT:     %23 = arith.truncf %16 : f32 to f16
// CHECK-NEXT:     memref.store %23, %dst[%i] : memref<64xf16>
// CHECK:      {sym_name = "reduce_reduce_0", gpu.kernel}

// CHECK:          %20 = arith.mulf %19, %19 : f32
// CHECK-NEXT:     %21 = arith.addf %acc, %20 : f32
// CHECK-NEXT:     scf.yield %21 : f32
// CHECK-NEXT:   }
// CHECK-NEXT:   %22 = math.sqrt %10 : f32
// CHECK-NEXT:   memref.store %22, %dst[] : memref<f32>
// CHECK:      {sym_name = "norm_norm_0", gpu.kernel}

// CHECK:      ^bb0(%n: index, %offset: index, %src: memref<32xf32>, %dst: memref<8xf32>):
// CHECK:          %[[COL:.*]] = arith.addi %{{.*}}, %offset : index
// CHECK:          memref.load %src
// CHECK:      {sym_name = "slice_all_slice_0", gpu.kernel}

// CHECK-LABEL: func.func @row_parallel(%x: memref<2x8x4xf32>, %w: memref<4x8xf32>, %result0: memref<2x8x8xf32>)
// CHECK-NEXT:    coco_gpu.gemm %x, %w, %result0 : memref<2x8x4xf32>, memref<4x8xf32>, memref<2x8x8xf32>
// CHECK-NEXT:    func.return

// The unused max reduction is dead and goes.
// CHECK-LABEL: func.func @reduce(%x: memref<4x2x16xf16>, %result0: memref<4x16xf16>)
// CHECK-NOT:     reduce_reduce_1
// CHECK:         "gpu.launch_func"({{.*}}) <{kernel = @kernels::@reduce_reduce_0
// CHECK-NEXT:    func.return

// CHECK-LABEL: func.func @norm(
// CHECK:         %n = arith.constant 1 : index
// CHECK:         "gpu.launch_func"({{.*}}, %n, %x_flat, %result0) <{kernel = @kernels::@norm_norm_0

// CHECK-LABEL: func.func @slice(%x: memref<4x8xf32>, %result0: memref<4x2xf32>)
// CHECK-NEXT:    %rank = coco_gpu.rank
// CHECK-NEXT:    %block = arith.constant 2 : index
// CHECK-NEXT:    %offset = arith.muli %rank, %block : index
// CHECK:         "gpu.launch_func"({{.*}}, %n, %offset, %x_flat, %result0_flat) <{kernel = @kernels::@slice_all_slice_0

module attributes {coco.world_size = 4 : i64} {
  func.func @row_parallel(%x: !coco.tensor<2x8x16xf32, sliced<2>>, %w: !coco.tensor<16x8xf32, sliced<0>>) -> !coco.tensor<2x8x8xf32, local> {
    %y = coco.matmul %x, %w : (!coco.tensor<2x8x16xf32, sliced<2>>, !coco.tensor<16x8xf32, sliced<0>>) -> !coco.tensor<2x8x8xf32, local>
    func.return %y : !coco.tensor<2x8x8xf32, local>
  }
  func.func @reduce(%x: !coco.tensor<4x8x16xf16, sliced<1>>) -> !coco.tensor<4x16xf16, local> {
    %s = coco.reduce %x kind = max dims = [0, 1] : (!coco.tensor<4x8x16xf16, sliced<1>>) -> !coco.tensor<16xf16, local>
    %t = coco.reduce %x kind = sum dims = [1] : (!coco.tensor<4x8x16xf16, sliced<1>>) -> !coco.tensor<4x16xf16, local>
    func.return %t : !coco.tensor<4x16xf16, local>
  }
  func.func @norm(%x: !coco.tensor<4x8xf32, replicated>) -> !coco.tensor<f32, replicated> {
    %n = coco.norm %x : (!coco.tensor<4x8xf32, replicated>) -> !coco.tensor<f32, replicated>
    func.return %n : !coco.tensor<f32, replicated>
  }
  func.func @slice(%x: !coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xf32, sliced<1>> {
    %s = coco.all_slice %x dim = 1 : (!coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xf32, sliced<1>>
    func.return %s : !coco.tensor<4x8xf32, sliced<1>>
  }
}
