// RUN: coconet-opt %s -p 'coco-fuse-collective,convert-coco-to-gpu{world=4}' | filecheck %s
// RUN: coconet-opt %s -p 'coco-fuse-collective,convert-coco-to-gpu{world=4}' -t cuda | filecheck %s --check-prefix=CUDA
// The experts' GEMM + all_to_all (mixture of experts) becomes ONE
// tile-granular kernel (docs/gpu/tile-kernels.md, "GEMM + all_to_all"): each tile of a
// destination's tokens is computed (a K loop with the expert's weights),
// stored into that rank's receive buffer and signalled at once,
// destinations r+1, r+2, ..., own last; the tail copies tiles as they land.

// Rank block [2, 8, 4, 24]; destination p's part [2, 2, 4, 24]: 16 x 24, one
// tile. 4 READY + 4 x 1 TILE slots; the receive buffer is the block, 6144 B.
// CHECK:      builtin.module attributes {{{.*}}coco_gpu.symmetric_bytes = 6144 : i64, coco_gpu.signal_slots = 8 : i64
// CHECK:      gpu.func @moe_experts_fused_0(%rank: index, %epoch: i64, %peers: !coco_gpu.peers, %slots: index, %x: memref<2048xf32>, %w: memref<1536xf32>, %recv: memref<1536xf32>, %out: memref<1536xf32>) kernel attributes {coco_gpu.tile_plan = {kind = "gemm_all_to_all", world = 4 : i64, rows = 16 : i64, columns = 24 : i64, depth = 32 : i64, tile_rows = 16 : i64, tile_columns = 24 : i64, per_peer = 1 : i64, part = array<i64: 2, 2, 4, 24>, block = array<i64: 2, 8, 4, 24>, dim = 1 : i64, grouped = 1 : i64, prologue = 0 : i64}} {
// 1. Block 0 opens this rank's receive buffer to every peer.
// CHECK:        %tile_slots = arith.addi %slots, %{{.*}} : index
// CHECK:          %[[READY:.*]] = arith.addi %slots, %rank : index
// CHECK-NEXT:     coco_gpu.signal %peers, %{{.*}}, %[[READY]], %epoch
// 2. The tiles, own last: wait for the destination's READY, compute, store.
// CHECK:        scf.for %item = %bid to %{{.*}} step %{{.*}} {
// CHECK:          %peer = arith.remui
// CHECK:            %[[OPEN:.*]] = arith.addi %slots, %peer : index
// CHECK-NEXT:       coco_gpu.wait_signal %peers, %[[OPEN]], %epoch
// CHECK:          gpu.barrier
// CHECK:          %[[VIEW:.*]] = coco_gpu.peer_view %peers, %recv, %peer : memref<1536xf32>
// CHECK:          scf.for %e = %tid to %{{.*}} step %{{.*}} {
// The row moves to block `peer` of the source dim; its expert's weights.
// CHECK:            arith.muli %peer, %{{.*}} : index
// CHECK:            %{{.*}} = scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%acc = %{{.*}}) -> (f32) {
// CHECK:              memref.load %x[
// CHECK:              memref.load %w[
// CHECK:              arith.mulf
// CHECK:              arith.addf %acc
// CHECK:            scf.if %{{.*}} {
// CHECK-NEXT:         memref.store %{{.*}}, %out[
// CHECK:            scf.if %{{.*}} {
// CHECK-NEXT:         memref.store %{{.*}}, %[[VIEW]][
// CHECK:          gpu.barrier
// CHECK:            coco_gpu.count_peer_bytes %peers, %peer, %{{.*}}
// CHECK:            %[[TILE:.*]] = arith.addi %tile_slots, %{{.*}} : index
// CHECK-NEXT:       coco_gpu.signal %peers, %peer, %[[TILE]], %epoch
// 3. The tail: wait for each (source, tile) counter, copy the tile.
// CHECK:        scf.for %copy = %bid to %{{.*}} step %{{.*}} {
// CHECK:            coco_gpu.wait_signal %peers, %{{.*}}, %epoch
// CHECK:            memref.load %recv[
// CHECK:            memref.store %{{.*}}, %out[
// The host: one launch, no NCCL, 1536 bytes per peer.
// CHECK:      func.func @moe(
// CHECK-NOT:    coco_gpu.nccl
// CHECK:        %recv = coco_gpu.symmetric_buffer offset = 0 : memref<1536xf32>
// CHECK:        gpu.launch_func @kernels::@moe_experts_fused_0 {{.*}} {coco_gpu.peer_bytes = 1536 : i64, coco_gpu.work = array<i64: 98304, 20480>}
// CHECK-NOT:    coco_gpu.nccl
// CHECK-NOT:    gpu.launch_func

// CUDA:       __global__ void {{.*}}moe_experts_fused_0(int64_t rank, int64_t epoch, coco_peers peers, int64_t slots, const float *__restrict__ x, const float *__restrict__ w, float *recv, float *__restrict__ out)
// CUDA:         coco::count_peer_bytes(peers, peer, (unsigned long long)1536);
// CUDA:       COCO_LAUNCH(moe_experts_fused_0,
// CUDA-NOT:   nccl

func.func @moe(%x: !coco.tensor<8x8x4x32xf32, sliced<0>>, %w: !coco.tensor<8x32x24xf32, sliced<0>>) -> !coco.tensor<8x8x4x24xf32, sliced<1>> {
  %h = coco.batch_matmul %x, %w {name = "experts"} : (!coco.tensor<8x8x4x32xf32, sliced<0>>, !coco.tensor<8x32x24xf32, sliced<0>>) -> !coco.tensor<8x8x4x24xf32, sliced<0>>
  %o = coco.all_to_all %h dim = 1 {name = "combine"} : !coco.tensor<8x8x4x24xf32, sliced<0>> -> !coco.tensor<8x8x4x24xf32, sliced<1>>
  func.return %o : !coco.tensor<8x8x4x24xf32, sliced<1>>
}
