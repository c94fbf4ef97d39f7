// RUN: coconet-opt %s -p convert-coco-to-gpu | filecheck %s
// Compute ops that are not elementwise: reductions and norms are kernels
// (f32 accumulation for halves) with one thread per output element when an
// output reduces fewer elements than a block has threads (256), else one block
// per output that ends in a shared-memory tree; all_slice copies the rank's
// block; matmul is a cuBLAS gemm of the per-rank buffers (a kernel for
// integers, which cuBLAS has no GEMM for).

// sum over dim 1 of a [4, 2, 16] block (sliced<1> on 4 ranks): output
// (p, q) = i / 16, i % 16 starts at p * 32 + q; element j of the loop adds
// j * 16.
// CHECK:      gpu.func @reduce_reduce_0(%n: index, %src: memref<128xf16>, %dst: memref<64xf16>) kernel {
// CHECK:        scf.for %i = %start to %n step %step {
// CHECK-NEXT:     %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-NEXT:     %[[ONE:.*]] = arith.constant 1 : index
// CHECK-NEXT:     %7 = arith.constant 16 : index
// CHECK-NEXT:     %8 = arith.divui %i, %7 : index
// CHECK-NEXT:     %9 = arith.constant 16 : index
// CHECK-NEXT:     %10 = arith.remui %i, %9 : index
// CHECK-NEXT:     %11 = arith.constant 32 : index
// CHECK-NEXT:     %12 = arith.muli %8, %11 : index
// CHECK-NEXT:     %13 = arith.addi %12, %10 : index
// CHECK-NEXT:     %14 = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:     %15 = arith.constant 2 : index
// CHECK-NEXT:     %16 = scf.for %j = %[[ZERO]] to %15 step %[[ONE]] iter_args(%acc = %14) -> (f32) {
// CHECK-NEXT:       %17 = arith.constant 16 : index
// CHECK-NEXT:       %18 = arith.muli %j, %17 : index
// CHECK-NEXT:       %19 = arith.addi %13, %18 : index
// CHECK-NEXT:       %20 = memref.load %src[%19] : memref<128xf16>
// CHECK-NEXT:       %21 = arith.extf %20 : f16 to f32
// CHECK-NEXT:       %22 = arith.addf %acc, %21 : f32
// CHECK-NEXT:       scf.yield %22 : f32
// CHECK-NEXT:     }
// CHECK-NEXT:     %23 = arith.truncf %16 : f32 to f16
// CHECK-NEXT:     memref.store %23, %dst[%i] : memref<64xf16>

// A norm of 32 elements: a thread sums the contiguous run.
// CHECK:      gpu.func @norm_norm_0(%n: index, %src: memref<32xf32>, %dst: memref<f32>) kernel {
// CHECK:        %[[BASE:.*]] = arith.muli %i, %{{.*}} : index
// CHECK:        %[[SUM:.*]] = scf.for %j = %{{.*}} iter_args(%acc = %{{.*}}) -> (f32) {
// CHECK-NEXT:     %[[AT:.*]] = arith.addi %[[BASE]], %j : index
// CHECK-NEXT:     %[[X:.*]] = memref.load %src[%[[AT]]] : memref<32xf32>
// CHECK-NEXT:     %[[SQ:.*]] = arith.mulf %[[X]], %[[X]] : f32
// CHECK-NEXT:     %[[ACC:.*]] = arith.addf %acc, %[[SQ]] : f32
// CHECK-NEXT:     scf.yield %[[ACC]] : f32
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[ROOT:.*]] = math.sqrt %[[SUM]] : f32
// CHECK-NEXT:   memref.store %[[ROOT]], %dst[] : memref<f32>

// A norm of 4096 elements: one block strides over them, then halves its 256
// partials in shared memory (thread t takes t + step's partial if the block
// has that thread; a barrier after each step), and thread 0 stores.
// CHECK:      gpu.func @big_norm_norm_0(%n: index, %src: memref<4096xf32>, %dst: memref<f32>) workgroup(%partials : memref<256xf32, #gpu.address_space<workgroup>>) kernel {
// CHECK:        %[[BID:.*]] = gpu.block_id  x
// CHECK-NEXT:   %[[GDIM:.*]] = gpu.grid_dim  x
// CHECK-NEXT:   scf.for %o = %[[BID]] to %n step %[[GDIM]] {
// CHECK-NEXT:     %[[TID:.*]] = gpu.thread_id  x
// CHECK-NEXT:     %[[BDIM:.*]] = gpu.block_dim  x
// CHECK:          %[[PART:.*]] = scf.for %j = %[[TID]] to %{{.*}} step %[[BDIM]] iter_args(%acc = %{{.*}}) -> (f32) {
// CHECK:          memref.store %[[PART]], %partials[%[[TID]]] : memref<256xf32, #gpu.address_space<workgroup>>
// CHECK-NEXT:     gpu.barrier
// CHECK-NEXT:     %[[HALF:.*]] = arith.constant 128 : index
// CHECK-NEXT:     %[[PARTNER:.*]] = arith.addi %[[TID]], %[[HALF]] : index
// CHECK-NEXT:     %[[HALF2:.*]] = arith.constant 128 : index
// CHECK-NEXT:     %[[LOW:.*]] = arith.cmpi ult, %[[TID]], %[[HALF2]] : index
// CHECK-NEXT:     %[[IN:.*]] = arith.cmpi ult, %[[PARTNER]], %[[BDIM]] : index
// CHECK-NEXT:     %[[TAKES:.*]] = arith.andi %[[LOW]], %[[IN]] : i1
// CHECK-NEXT:     scf.if %[[TAKES]] {
// CHECK-NEXT:       %[[A:.*]] = memref.load %partials[%[[TID]]]
// CHECK-NEXT:       %[[B:.*]] = memref.load %partials[%[[PARTNER]]]
// CHECK-NEXT:       %[[AB:.*]] = arith.addf %[[A]], %[[B]] : f32
// CHECK-NEXT:       memref.store %[[AB]], %partials[%[[TID]]]
// CHECK-NEXT:     }
// CHECK-NEXT:     gpu.barrier
// CHECK-COUNT-7:  gpu.barrier
// CHECK-NEXT:     %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-NEXT:     %[[TOTAL:.*]] = memref.load %partials[%[[ZERO]]]
// CHECK-NEXT:     gpu.barrier
// CHECK:          %[[FIRST:.*]] = arith.cmpi eq, %[[TID]], %{{.*}} : index
// CHECK-NEXT:     scf.if %[[FIRST]] {
// CHECK-NEXT:       %[[ROOT:.*]] = math.sqrt %[[TOTAL]] : f32
// CHECK-NEXT:       memref.store %[[ROOT]], %dst[] : memref<f32>

// A max over dim 0 of [300, 3] with 300 >= 256: a block per output, the
// elements strided by 3 (not contiguous).
// CHECK:      gpu.func @column_max_reduce_0(%n: index, %src: memref<900xf32>, %dst: memref<3xf32>) workgroup(%partials : memref<256xf32, #gpu.address_space<workgroup>>) kernel {
// CHECK:          arith.constant 0xff800000 : f32
// CHECK:          arith.maximumf
// CHECK:          gpu.barrier

// CHECK:      gpu.func @slice_all_slice_0(%n: index, %offset: index, %src: memref<32xf32>, %dst: memref<8xf32>) kernel {
// CHECK:          %[[COL:.*]] = arith.addi %{{.*}}, %offset : index
// CHECK:          memref.load %src

// CHECK-LABEL: func.func @row_parallel(%x: memref<2x8x4xf32>, %w: memref<4x8xf32>, %result0: memref<2x8x8xf32>)
// CHECK-NEXT:    coco_gpu.gemm %x, %w, %result0 : memref<2x8x4xf32>, memref<4x8xf32>, memref<2x8x8xf32>
// CHECK-NEXT:    func.return

// The unused max reduction is dead and goes.
// CHECK-LABEL: func.func @reduce(%x: memref<4x2x16xf16>, %result0: memref<4x16xf16>)
// CHECK-NOT:     reduce_reduce_1
// CHECK:         gpu.launch_func  @kernels::@reduce_reduce_0 blocks in
// CHECK-NEXT:    func.return

// CHECK-LABEL: func.func @norm(
// CHECK:         %c1 = arith.constant 1 : index
// CHECK:         gpu.launch_func  @kernels::@norm_norm_0 blocks in {{.*}}  args({{(.*, )?}}%c1 : {{[^,]*}}, %x_flat : {{[^,]*}}, %result0 : {{[^,]*}})

// The grid of a block-per-output kernel is sized for outputs x threads (one
// output: 256 items of 256 threads).
// CHECK-LABEL: func.func @big_norm(
// CHECK:         %c256 = arith.constant 256 : index
// CHECK-NEXT:    %blocks = coco_gpu.grid_blocks %c256, %c256
// CHECK-NEXT:    %c1 = arith.constant 1 : index
// CHECK-NEXT:    gpu.launch_func  @kernels::@big_norm_norm_0 blocks in (%blocks, %c1, %c1) threads in (%c256, %c1, %c1)  args(%c1 : index,

// CHECK-LABEL: func.func @slice(%x: memref<4x8xf32>, %result0: memref<4x2xf32>)
// CHECK-NEXT:    %rank = coco_gpu.rank
// CHECK-NEXT:    %c2 = arith.constant 2 : index
// CHECK-NEXT:    %offset = arith.muli %rank, %c2 : index
// CHECK:         gpu.launch_func  @kernels::@slice_all_slice_0 blocks in {{.*}}  args({{(.*, )?}}%c8 : {{[^,]*}}, %offset : {{[^,]*}}, %x_flat : {{[^,]*}}, %result0_flat : {{[^,]*}})

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
  func.func @big_norm(%x: !coco.tensor<64x64xf32, replicated>) -> !coco.tensor<f32, replicated> {
    %n = coco.norm %x : (!coco.tensor<64x64xf32, replicated>) -> !coco.tensor<f32, replicated>
    func.return %n : !coco.tensor<f32, replicated>
  }
  func.func @column_max(%x: !coco.tensor<300x3xf32, replicated>) -> !coco.tensor<3xf32, replicated> {
    %m = coco.reduce %x kind = max dims = [0] : (!coco.tensor<300x3xf32, replicated>) -> !coco.tensor<3xf32, replicated>
    func.return %m : !coco.tensor<3xf32, replicated>
  }
  func.func @slice(%x: !coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xf32, sliced<1>> {
    %s = coco.all_slice %x dim = 1 : (!coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xf32, sliced<1>>
    func.return %s : !coco.tensor<4x8xf32, sliced<1>>
  }
}
