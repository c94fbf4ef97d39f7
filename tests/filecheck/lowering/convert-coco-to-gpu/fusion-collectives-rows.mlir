// RUN: coconet-opt %s -p 'convert-coco-to-gpu{world=4 fused_chunk=100}' | filecheck %s
// RUN: coconet-opt %s -p 'convert-coco-to-gpu{world=4 fused_chunk=100}' -t cuda | filecheck %s --check-prefix=CUDA

// A fused collective with a row reduction (an RMSNorm of the reduced rows:
// each row's sum of squares, then the rows scaled by rsqrt of it): ONE
// kernel in two stages, an ordinary launch, no slot for the row boundary
// (docs/gpu/fused.md, "Row reductions: a norm in the kernel").

// Slots: 2 phases x 4 ranks x 2 chunks (100 elements rounded up to 2 rows
// of 64), nothing more.
// CHECK:      builtin.module attributes {{{.*}}coco_gpu.signal_slots = 16 : i64

// The rank's rows buffer (4 rows of 64 on each rank) is a kernel argument.
// CHECK:      gpu.func @rmsnorm_rms_fused_0({{.*}}, %slice0: memref<256xf32>, %rows0: memref<4xf32>) workgroup(%partials : memref<256xf32, #gpu.address_space<workgroup>>) kernel {

// Stage 0, row by row in each chunk: the accumulator starts again at every
// row, the block combines it, thread 0 stores the row's sum.
// CHECK:        scf.for %chunk_1 = %bid to
// CHECK:          scf.for %row = {{.*}} {
// CHECK-NEXT:       %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:       arith.constant 0 : index
// CHECK-NEXT:       memref.store %[[ZERO]], %acc[%{{.*}}] : memref<1xf32>
// CHECK:            scf.if %leader {
// CHECK-NEXT:         memref.store %{{.*}}, %rows0[%row] : memref<4xf32>

// A barrier, then stage 1 of the same chunk reads each element's row.
// CHECK:          gpu.barrier
// CHECK-NEXT:     scf.if %aligned {
// CHECK:            %[[ROW:.*]] = arith.divui %{{.*}}, %{{.*}} : index
// CHECK-NEXT:       memref.load %rows0[%[[ROW]]] : memref<4xf32>
// CHECK-NEXT:       arith.addf
// CHECK-NEXT:       math.sqrt

// The host: the rows buffer next to the carried slice, one launch, not
// cooperative.
// CHECK:        memref.alloc() : memref<4x64xf32>
// CHECK:        memref.alloc() : memref<4x1xf32>
// CHECK:        gpu.launch_func  @kernels::@rmsnorm_rms_fused_0
// CHECK-NOT:    coco_gpu.cooperative
// CHECK-SAME:   {coco_gpu.peer_bytes = 2048 : i64}

// CUDA-NOT:   COCO_LAUNCH_COOPERATIVE
// CUDA:       rows0[row] = 
// CUDA-NOT:   COCO_LAUNCH_COOPERATIVE

func.func @rmsnorm(%p: !coco.tensor<16x64xf32, local>) -> !coco.tensor<16x64xf32, replicated> {
  %eps = coco.constant 1.000000e-05 : !coco.tensor<f32, replicated>
  %y = coco.fusion (%p, %eps) {name = "rms_fused"} : (!coco.tensor<16x64xf32, local>, !coco.tensor<f32, replicated>) -> !coco.tensor<16x64xf32, replicated> {
  ^bb0(%p1: !coco.tensor<16x64xf32, local>, %e: !coco.tensor<f32, replicated>):
    %h = coco.reduce_scatter %p1 reduction = sum dim = 0 : !coco.tensor<16x64xf32, local> -> !coco.tensor<16x64xf32, sliced<0>>
    %sq = coco.mul %h, %h : (!coco.tensor<16x64xf32, sliced<0>>, !coco.tensor<16x64xf32, sliced<0>>) -> !coco.tensor<16x64xf32, sliced<0>>
    %ss = coco.reduce %sq kind = sum dims = [1] keep_dims : (!coco.tensor<16x64xf32, sliced<0>>) -> !coco.tensor<16x1xf32, sliced<0>>
    %v = coco.add %ss, %e : (!coco.tensor<16x1xf32, sliced<0>>, !coco.tensor<f32, replicated>) -> !coco.tensor<16x1xf32, sliced<0>>
    %r = coco.rsqrt %v : (!coco.tensor<16x1xf32, sliced<0>>) -> !coco.tensor<16x1xf32, sliced<0>>
    %n = coco.mul %h, %r : (!coco.tensor<16x64xf32, sliced<0>>, !coco.tensor<16x1xf32, sliced<0>>) -> !coco.tensor<16x64xf32, sliced<0>>
    %g = coco.all_gather %n : !coco.tensor<16x64xf32, sliced<0>> -> !coco.tensor<16x64xf32, replicated>
    coco.yield %g : !coco.tensor<16x64xf32, replicated>
  }
  func.return %y : !coco.tensor<16x64xf32, replicated>
}
