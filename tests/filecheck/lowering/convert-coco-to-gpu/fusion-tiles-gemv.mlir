// RUN: coconet-opt %s -p 'coco-fuse-collective,convert-coco-to-gpu{world=2}' | filecheck %s
// RUN: coconet-opt %s -p 'coco-fuse-collective,convert-coco-to-gpu{world=2}' -t cuda | filecheck %s --check-prefix=CUDA
// A row-parallel GEMV + all_reduce becomes ONE tile-granular kernel
// (docs/gpu/tile-kernels.md, "GEMV + all_reduce"): 512 columns in C = 2 tiles
// of 1 x 256, each computed in S = 32 slices of the rank's K/N = 1024 rows
// (split-K: 64 work items, each 32 rows x 256 bf16 columns = 16 KiB of
// weights), the weights loaded 16 bytes at a time.

// Slots: READY 2 + PARTIAL 2 x 2 + DONE 2 + SLICE 2 x 31 = 70. Buffers:
// partials 2 x 512 bf16, gather 512 bf16, slices 2 x 31 x 256 f32.
// CHECK:      builtin.module attributes {{{.*}}coco_gpu.symmetric_bytes = 66560 : i64, coco_gpu.signal_slots = 70 : i64
// CHECK:      gpu.func @decode_proj_fused_0(%rank: index, %epoch: i64, %peers: !coco_gpu.peers, %slots: index, %x: memref<1024xbf16>, %w: memref<524288xbf16>, %partials: memref<1024xbf16>, %gather: memref<512xbf16>, %slices: memref<15872xf32>, %out: memref<512xbf16>) workgroup(%lane_sums : memref<2048xf32, #gpu.address_space<workgroup>>) kernel attributes {coco_gpu.tile_plan = {kind = "{{[a-z_]+}}", world = {{[0-9]+}} : i64{{.*}}}} {
// CHECK:        %slice_slots = arith.addi %slots, %{{.*}} : index
// CHECK:        %aligned = arith.andi
// Work items: tile t = item / 32, slice s = item mod 32.
// CHECK:        scf.for %item = %bid to %{{.*}} step %{{.*}} {
// CHECK-NEXT:     %{{.*}} = arith.constant 32 : index
// CHECK-NEXT:     %t = arith.divui %item, %{{.*}} : index
// CHECK-NEXT:     %s = arith.remui %item, %{{.*}} : index
// Lanes: 32 across the tile (8 columns each), 8 down (the slice's steps).
// CHECK:          scf.if %aligned {
// CHECK:            scf.for %lane = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:              scf.for %step = {{.*}} iter_args(%acc = {{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32) {
// CHECK-COUNT-4:        vector.load %w[%{{.*}}] : memref<524288xbf16>, vector<8xbf16>
// CHECK:                vector.load %x[%{{.*}}] : memref<1024xbf16>, vector<4xbf16>
// CHECK:              memref.store %{{.*}}, %lane_sums[
// Misaligned buffers: the same lanes, element by element.
// CHECK:          } else {
// CHECK:            scf.for %lane_1 =
// CHECK:                memref.load %w[
// CHECK:          gpu.barrier
// The last slice's block: READY, the other slices, their sum, the peer store.
// CHECK:          scf.if %{{.*}} {
// CHECK:              coco_gpu.wait_signal %peers, %{{.*}}, %epoch
// CHECK:              scf.for %j = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:                %[[SLICE:.*]] = arith.addi %slice_slots, %{{.*}} : index
// CHECK-NEXT:           coco_gpu.wait_signal %peers, %[[SLICE]], %epoch
// CHECK:            gpu.barrier
// CHECK:            %[[VIEW:.*]] = coco_gpu.peer_view %peers, %partials, %owner : memref<1024xbf16>
// CHECK:              memref.load %slices[
// CHECK:              memref.load %lane_sums[
// CHECK:              memref.store %{{.*}}, %[[VIEW]][
// CHECK:              coco_gpu.tile_computed
// CHECK:              coco_gpu.count_peer_bytes %peers, %owner, %{{.*}}
// CHECK:              coco_gpu.signal %peers, %owner, %{{.*}}, %epoch
// Another slice: its lanes' sum into `slices`, then its own SLICE slot.
// CHECK:          } else {
// CHECK:              memref.load %lane_sums[
// CHECK:              memref.store %{{.*}}, %slices[
// CHECK:            gpu.barrier
// CHECK:              %[[KEPT:.*]] = arith.addi %slice_slots, %{{.*}} : index
// CHECK-NEXT:         coco_gpu.signal %peers, %rank, %[[KEPT]], %epoch
// The host: a resident grid over the 64 items, 1024 bytes per peer (a
// partial tile and a reduced one, 256 bf16 each).
// CHECK:      func.func @decode(
// CHECK-NOT:    coco_gpu.nccl
// CHECK:        %slices = coco_gpu.symmetric_buffer offset = 3072 : memref<15872xf32>
// CHECK:        %blocks = coco_gpu.grid_blocks %c16384, %c256 resident @kernels::@decode_proj_fused_0
// CHECK-NEXT:   gpu.launch_func @kernels::@decode_proj_fused_0 blocks in (%blocks, %c1, %c1) {{.*}} {coco_gpu.peer_bytes = 1024 : i64
// CHECK-NOT:    coco_gpu.nccl

// CUDA:       COCO_SHARED(float, lane_sums, 2048);
// CUDA-COUNT-4: coco::load_vec<__nv_bfloat16, 8>(w +
// CUDA:       coco::load_vec<__nv_bfloat16, 4>(x +
// CUDA:       COCO_LAUNCH_COOPERATIVE(decode_proj_fused_0, dim3((unsigned)coco::resident_blocks(ctx, decode_proj_fused_0, 16384, 256), 1u, 1u)
// CUDA-NOT:   nccl

func.func @decode(%x: !coco.tensor<1x2048xbf16, sliced<1>>, %w: !coco.tensor<2048x512xbf16, sliced<0>>) -> !coco.tensor<1x512xbf16, replicated> {
  %y = coco.matmul %x, %w {name = "proj"} : (!coco.tensor<1x2048xbf16, sliced<1>>, !coco.tensor<2048x512xbf16, sliced<0>>) -> !coco.tensor<1x512xbf16, local>
  %s = coco.all_reduce %y reduction = sum : !coco.tensor<1x512xbf16, local> -> !coco.tensor<1x512xbf16, replicated>
  func.return %s : !coco.tensor<1x512xbf16, replicated>
}
