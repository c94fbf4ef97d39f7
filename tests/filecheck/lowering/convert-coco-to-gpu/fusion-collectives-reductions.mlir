// RUN: coconet-opt %s -p 'convert-coco-to-gpu{world=4}' | filecheck %s
// RUN: coconet-opt %s -p 'convert-coco-to-gpu{world=4}' -t cuda | filecheck %s --check-prefix=CUDA

// A fused collective with a slice reduction (the norm of the reduced
// gradient, then the gradient divided by it): ONE kernel in two stages and a
// cooperative launch on an occupancy-sized grid (docs/gpu/fused.md, "Reductions
// inside a fused kernel").

// Slots: 2 phases x 4 ranks x 1 chunk, then 4 scalars slots, 3 arrival slots
// (max(C, (N-1) C) blocks) and one flag.
// CHECK:      builtin.module attributes {{{.*}}coco_gpu.symmetric_bytes = 1280 : i64, coco_gpu.signal_slots = 16 : i64

// The kernel's extra arguments: the block partials, the ranks' partials and
// the all_reduce's result; a workgroup buffer for block reductions.
// CHECK:      gpu.func @normalize_fused_0({{.*}}, %slice0: memref<16xf32>, %partials2: memref<3xf32>, %exchange3: memref<4xf32>, %result4: memref<1xf32>) workgroup(%partials : memref<256xf32, #gpu.address_space<workgroup>>) kernel {

// Stage 0: a per-thread accumulator of the squares; the reduced gradient,
// read again in stage 1, is stored in the slice buffer.
// CHECK:        %acc = memref.alloca() : memref<1xf32>
// CHECK:        scf.for %chunk = %bid to
// CHECK:          coco_gpu.wait_signal
// CHECK:          memref.store %{{.*}}, %acc[
// The boundary's slots, from the fusion's first (the `slots` argument): the
// arrival slots after 2 x 4 phase slots and 4 scalars slots (8 + 4 = 12),
// the flag after the 3 arrival slots.
// CHECK:        %[[TWELVE:.*]] = arith.constant 12 : index
// CHECK-NEXT:   %arrival_slots = arith.addi %slots, %[[TWELVE]] : index
// CHECK:        %[[FIFTEEN:.*]] = arith.constant 15 : index
// CHECK-NEXT:   %flag_slot = arith.addi %slots, %[[FIFTEEN]] : index
// CHECK:        gpu.barrier

// Boundary step 1: the block's partial and its arrival slot.
// CHECK:        scf.if %leader {
// CHECK-NEXT:     memref.store %{{.*}}, %partials2[%bid] : memref<3xf32>
// CHECK-NEXT:     %{{.*}} = arith.addi %arrival_slots, %bid : index
// CHECK-NEXT:     coco_gpu.signal %peers, %rank, %{{.*}}, %epoch
// Step 2: block 0 waits for every block, combines, pushes to every peer.
// CHECK:        scf.if %{{.*}} {
// CHECK-NEXT:     scf.for %block = %tid to %{{.*}} step %{{.*}} {
// CHECK:            coco_gpu.wait_signal %peers, %{{.*}}, %epoch
// CHECK:          memref.store %{{.*}}, %exchange3[%rank] : memref<4xf32>
// CHECK:            coco_gpu.peer_view %peers, %exchange3, %{{.*}} : memref<4xf32>
// CHECK:            coco_gpu.count_peer_bytes %peers, %{{.*}}, %{{.*}}
// CHECK:            coco_gpu.signal %peers, %{{.*}}, %{{.*}}, %epoch
// Step 3: block 0 combines the ranks' partials in rank order and raises the
// flag; the others wait for it.
// CHECK:        scf.if %{{.*}} {
// CHECK:            scf.for %q{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(
// CHECK:          memref.store %{{.*}}, %result4[%{{.*}}] : memref<1xf32>
// CHECK:          coco_gpu.signal %peers, %rank, %flag_slot, %epoch
// CHECK:        } else {
// CHECK:            coco_gpu.wait_signal %peers, %flag_slot, %epoch
// Step 4: every thread reads the scalar.
// CHECK:        gpu.barrier
// CHECK-NEXT:   %s = memref.load %result4[%{{.*}}] : memref<1xf32>
// Stage 1 reads the reduced gradient back from the slice buffer.
// CHECK:        scf.for %chunk{{.*}} = %bid to
// CHECK:          memref.load %slice0[

// The host: the symmetric buffers, the resident grid, a cooperative launch.
// CHECK:      func.func @normalize(
// CHECK:        %partials = coco_gpu.symmetric_buffer offset = 512 : memref<3xf32>
// CHECK-NEXT:   %exchange = coco_gpu.symmetric_buffer offset = 768 : memref<4xf32>
// CHECK-NEXT:   %result = coco_gpu.symmetric_buffer offset = 1024 : memref<1xf32>
// CHECK-NEXT:   %blocks = coco_gpu.grid_blocks %c768, %c256 resident @kernels::@normalize_fused_0
// CHECK:        gpu.launch_func  @kernels::@normalize_fused_0 {{.*}} {coco_gpu.peer_bytes = 132 : i64, coco_gpu.cooperative}
// CHECK-NOT:    gpu.launch_func

// CUDA:       COCO_SHARED(float, partials, 256);
// CUDA:       float acc[1];
// CUDA:       COCO_LAUNCH_COOPERATIVE(normalize_fused_0, dim3((unsigned)coco::resident_blocks(ctx, normalize_fused_0, 768, 256), 1u, 1u), dim3(256u, 1u, 1u), 0,

func.func @normalize(%g: !coco.tensor<64xf32, local>, %w: !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated> {
  %out = coco.fusion (%g, %w) : (!coco.tensor<64xf32, local>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated> {
  ^bb0(%g1: !coco.tensor<64xf32, local>, %w1: !coco.tensor<64xf32, replicated>):
    %gs = coco.reduce_scatter %g1 reduction = sum dim = 0 : !coco.tensor<64xf32, local> -> !coco.tensor<64xf32, sliced<0>>
    %sq = coco.mul %gs, %gs : (!coco.tensor<64xf32, sliced<0>>, !coco.tensor<64xf32, sliced<0>>) -> !coco.tensor<64xf32, sliced<0>>
    %p = coco.reduce %sq kind = sum dims = [0] : (!coco.tensor<64xf32, sliced<0>>) -> !coco.tensor<f32, local>
    %s = coco.all_reduce %p reduction = sum : !coco.tensor<f32, local> -> !coco.tensor<f32, replicated>
    %n = coco.sqrt %s : (!coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
    %u = coco.div %gs, %n : (!coco.tensor<64xf32, sliced<0>>, !coco.tensor<f32, replicated>) -> !coco.tensor<64xf32, sliced<0>>
    %ws = coco.all_slice %w1 dim = 0 : (!coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, sliced<0>>
    %d = coco.sub %ws, %u : (!coco.tensor<64xf32, sliced<0>>, !coco.tensor<64xf32, sliced<0>>) -> !coco.tensor<64xf32, sliced<0>>
    %dg = coco.all_gather %d : !coco.tensor<64xf32, sliced<0>> -> !coco.tensor<64xf32, replicated>
    coco.yield %dg : !coco.tensor<64xf32, replicated>
  }
  func.return %out : !coco.tensor<64xf32, replicated>
}
