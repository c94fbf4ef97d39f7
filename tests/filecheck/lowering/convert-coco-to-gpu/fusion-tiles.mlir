// RUN: coconet-opt %s -p 'coco-fuse-collective,convert-coco-to-gpu{world=4}' | filecheck %s
// RUN: coconet-opt %s -p 'coco-fuse-collective,convert-coco-to-gpu{world=4}' -t cuda | filecheck %s --check-prefix=CUDA
// The embedding + all_to_all fusion becomes ONE tile-granular kernel
// (docs/gpu/tile-kernels.md): no NCCL call; each
// tile (one table's bags for one destination) is stored into the peer's
// receive buffer and signalled at once; the tail copies tiles as they land.

// 4 READY slots + 4 x 2 tile slots; the receive buffer holds N x T' x B' x D.
// CHECK:      builtin.module attributes {{{.*}}coco_gpu.symmetric_bytes = 512 : i64, coco_gpu.signal_slots = 12 : i64
// CHECK:      gpu.func @dlrm_emb_fused_0(%rank: index, %epoch: i64, %peers: !coco_gpu.peers, %slots: index, %tables: memref<256xf32>, %indices: memref<48xi32>, %recv: memref<128xf32>, %out: memref<128xf32>) kernel attributes {coco_gpu.tile_plan = {kind = "{{[a-z_]+}}", world = {{[0-9]+}} : i64{{.*}}}} {
// 1. Block 0 opens this rank's receive buffer to every peer.
// CHECK:        %tile_slots = arith.addi %slots, %{{.*}} : index
// CHECK:          %[[READY:.*]] = arith.addi %slots, %rank : index
// CHECK-NEXT:     coco_gpu.signal %peers, %{{.*}}, %[[READY]], %epoch
// 2. The tiles: wait for the destination's READY, pool, store, signal.
// CHECK:        scf.for %item = %bid to %{{.*}} step %{{.*}} {
// CHECK:            %[[OPEN:.*]] = arith.addi %slots, %peer : index
// CHECK-NEXT:       coco_gpu.wait_signal %peers, %[[OPEN]], %epoch
// CHECK:          gpu.barrier
// CHECK:          %{{.*}} = coco_gpu.peer_view %peers, %recv, %peer : memref<128xf32>
// CHECK:          scf.for %e = %tid to %{{.*}} step %{{.*}} {
// CHECK:            cf.assert
// CHECK:          gpu.barrier
// CHECK:            coco_gpu.count_peer_bytes %peers, %peer, %{{.*}}
// CHECK:            %[[TILE:.*]] = arith.addi %tile_slots, %{{.*}} : index
// CHECK-NEXT:       coco_gpu.signal %peers, %peer, %[[TILE]], %epoch
// 3. The tail: wait for each peer's tile, copy it out.
// CHECK:        scf.for %copy = %bid to %{{.*}} step %{{.*}} {
// CHECK:            coco_gpu.wait_signal %peers, %{{.*}}, %epoch
// CHECK:          gpu.barrier
// CHECK:            memref.load %recv[
// CHECK:      func.func @dlrm(
// CHECK:        %recv = coco_gpu.symmetric_buffer offset = 0 : memref<128xf32>
// CHECK:        gpu.launch_func  @kernels::@dlrm_emb_fused_0 {{.*}} {coco_gpu.peer_bytes = 128 : i64, coco_gpu.cooperative, coco_gpu.work = array<i64: 0, 2240>}
// CHECK-NOT:    gpu.launch_func
// CHECK-NOT:    coco_gpu.nccl

// CUDA:       if (!({{.*}})) COCO_DEVICE_FAIL("'coco.embedding' op 'emb': an index is out of range [0, 16)");
// CUDA:       COCO_LAUNCH_COOPERATIVE(dlrm_emb_fused_0,

func.func @dlrm(%t: !coco.tensor<8x16x8xf32, sliced<0>>, %i: !coco.tensor<8x8x3xi32, sliced<0>>) -> !coco.tensor<8x8x8xf32, sliced<1>> {
  %e = coco.embedding %t, %i pooling = sum {name = "emb"} : (!coco.tensor<8x16x8xf32, sliced<0>>, !coco.tensor<8x8x3xi32, sliced<0>>) -> !coco.tensor<8x8x8xf32, sliced<0>>
  %a = coco.all_to_all %e dim = 1 : !coco.tensor<8x8x8xf32, sliced<0>> -> !coco.tensor<8x8x8xf32, sliced<1>>
  func.return %a : !coco.tensor<8x8x8xf32, sliced<1>>
}
