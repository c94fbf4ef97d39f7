// RUN: coconet-opt %s -p 'convert-coco-to-gpu{world=4}' | filecheck %s
// RUN: coconet-opt %s -p 'convert-coco-to-gpu{world=8 fused_chunk=32}' | filecheck %s --check-prefix=EIGHT
// RUN: coconet-opt %s -p 'convert-coco-to-gpu{world=4}' -t cuda | filecheck %s --check-prefix=CUDA

// The peer a fused collective kernel stores into, waits for or signals at
// step s is rank (r + s) mod N (docs/gpu/fused.md, "The fused all-reduce kernel"):
// phase 1's work items `it` (C chunks per peer) go to peer
// (r + 1 + it / C) mod N, chunk it mod C; the loops over the other ranks run
// k = 1 .. N-1 with peer (r + k) mod N. Pinned here in the device IR and the
// CUDA C, so that r - s, r + s + 1 or a missing mod fail (issue 25). The
// fusion is SGD's after coco-optimize (examples/sgd.mlir).

// Phase 1, one chunk per peer (C = 1: it / C is it).
// CHECK-LABEL: gpu.func @sgd_sum_rs_fused_0
// CHECK:       scf.for %item = %bid to %[[ITEMS:.*]] step %{{.*}} {
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %[[STEP:.*]] = arith.addi %item, %[[ONE]] : index
// CHECK-NEXT:    %[[SUM:.*]] = arith.addi %rank, %[[STEP]] : index
// CHECK-NEXT:    %[[N:.*]] = arith.constant 4 : index
// CHECK-NEXT:    %peer = arith.remui %[[SUM]], %[[N]] : index
// CHECK-NEXT:    coco_gpu.peer_view %peers, %scratch0, %peer
// CHECK:         coco_gpu.signal %peers, %peer,

// Phase 2: thread 0 waits for every other rank's phase-1 signal.
// CHECK:       scf.if %leader {
// CHECK-NEXT:    %[[K0:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %[[KN:.*]] = arith.constant 4 : index
// CHECK-NEXT:    scf.for %k = %[[K0]] to %[[KN]] step %[[K0]] {
// CHECK-NEXT:      %[[RK:.*]] = arith.addi %rank, %k : index
// CHECK-NEXT:      %[[N4:.*]] = arith.constant 4 : index
// CHECK-NEXT:      %[[WPEER:.*]] = arith.remui %[[RK]], %[[N4]] : index
// CHECK-NEXT:      %[[SLOT:.*]] = arith.addi %slots, %[[WPEER]] : index
// CHECK-NEXT:      %{{.*}} = arith.addi %[[SLOT]], %chunk : index
// CHECK-NEXT:      coco_gpu.wait_signal

// ... stores its updated slice into every other rank's gather buffer ...
// CHECK:       vector.store %{{.*}}, %gathered0[%g]
// CHECK-NEXT:  %[[G0:.*]] = arith.constant 1 : index
// CHECK-NEXT:  %[[GN:.*]] = arith.constant 4 : index
// CHECK-NEXT:  scf.for %[[GK:.*]] = %[[G0]] to %[[GN]] step %[[G0]] {
// CHECK-NEXT:    %[[GRK:.*]] = arith.addi %rank, %[[GK]] : index
// CHECK-NEXT:    %[[GN4:.*]] = arith.constant 4 : index
// CHECK-NEXT:    %[[GPEER:.*]] = arith.remui %[[GRK]], %[[GN4]] : index
// CHECK-NEXT:    coco_gpu.peer_view %peers, %gather0, %[[GPEER]]

// (the same, element by element, where a buffer is not aligned)
// CHECK:       memref.store %{{.*}}, %gathered0[%g_1]
// CHECK:       scf.for %[[EK:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:    %[[ERK:.*]] = arith.addi %rank, %[[EK]] : index
// CHECK-NEXT:    %[[EN4:.*]] = arith.constant 4 : index
// CHECK-NEXT:    %[[EPEER:.*]] = arith.remui %[[ERK]], %[[EN4]] : index
// CHECK-NEXT:    coco_gpu.peer_view %peers, %gather0, %[[EPEER]]

// ... and signals every other rank.
// CHECK:       scf.for %[[SK:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:    %[[SRK:.*]] = arith.addi %rank, %[[SK]] : index
// CHECK-NEXT:    %[[SN4:.*]] = arith.constant 4 : index
// CHECK-NEXT:    %[[SPEER:.*]] = arith.remui %[[SRK]], %[[SN4]] : index
// CHECK-NEXT:    %{{.*}} = arith.constant 1024 : index
// CHECK-NEXT:    coco_gpu.count_peer_bytes %peers, %[[SPEER]],
// CHECK-NEXT:    %{{.*}} = arith.addi %gathered_slots, %rank : index
// CHECK-NEXT:    %{{.*}} = arith.addi %{{.*}}, %chunk : index
// CHECK-NEXT:    coco_gpu.signal %peers, %[[SPEER]],

// Phase 3: the copy out of what each other rank gathered into this one.
// CHECK:       scf.for %[[ITEM3:.*]] = %bid to %{{.*}} step %{{.*}} {
// CHECK-NEXT:    %[[ONE3:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %[[STEP3:.*]] = arith.addi %[[ITEM3]], %[[ONE3]] : index
// CHECK-NEXT:    %[[SUM3:.*]] = arith.addi %rank, %[[STEP3]] : index
// CHECK-NEXT:    %[[N3:.*]] = arith.constant 4 : index
// CHECK-NEXT:    %{{.*}} = arith.remui %[[SUM3]], %[[N3]] : index

// Eight ranks, 128 elements per rank cut in C = 4 chunks of 32: 28 work
// items, peer (r + 1 + it / 4) mod 8, chunk it mod 4.
// EIGHT-LABEL: gpu.func @sgd_sum_rs_fused_0
// EIGHT:       %[[ITEMS:.*]] = arith.constant 28 : index
// EIGHT-NEXT:  scf.for %item = %bid to %[[ITEMS]] step %{{.*}} {
// EIGHT-NEXT:    %[[C:.*]] = arith.constant 4 : index
// EIGHT-NEXT:    %[[Q:.*]] = arith.divui %item, %[[C]] : index
// EIGHT-NEXT:    %[[ONE:.*]] = arith.constant 1 : index
// EIGHT-NEXT:    %[[STEP:.*]] = arith.addi %[[Q]], %[[ONE]] : index
// EIGHT-NEXT:    %[[SUM:.*]] = arith.addi %rank, %[[STEP]] : index
// EIGHT-NEXT:    %[[N:.*]] = arith.constant 8 : index
// EIGHT-NEXT:    %peer = arith.remui %[[SUM]], %[[N]] : index
// EIGHT-NEXT:    %chunk = arith.remui %item, %[[C]] : index
// EIGHT-NEXT:    coco_gpu.peer_view %peers, %scratch0, %peer
// EIGHT:         coco_gpu.signal %peers, %peer,
// EIGHT:       scf.if %leader {
// EIGHT-NEXT:    %[[K0:.*]] = arith.constant 1 : index
// EIGHT-NEXT:    %[[KN:.*]] = arith.constant 8 : index
// EIGHT-NEXT:    scf.for %k = %[[K0]] to %[[KN]] step %[[K0]] {
// EIGHT-NEXT:      %[[RK:.*]] = arith.addi %rank, %k : index
// EIGHT-NEXT:      %[[N8:.*]] = arith.constant 8 : index
// EIGHT-NEXT:      %{{.*}} = arith.remui %[[RK]], %[[N8]] : index

// The same in CUDA C (unsigned arithmetic: the sum is never negative).
// CUDA-LABEL: void {{.*}}sgd_sum_rs_fused_0(
// CUDA:       for (int64_t item = bid; item < 3; item += grid_dim) {
// CUDA-NEXT:    const int64_t peer = (int64_t)((uint64_t)(rank + (item + 1)) % (uint64_t)4);
// CUDA:       for (int64_t k = 1; k < 4; k += 1) {
// CUDA-NEXT:    coco::wait_signal(coco::own_slot(peers, (slots + (int64_t)((uint64_t)(rank + k) % (uint64_t)4)) + chunk), (uint64_t)epoch);
// CUDA:       for (int64_t k_1 = 1; k_1 < 4; k_1 += 1) {
// CUDA-NEXT:    coco::store_vec(coco::peer(peers, gather0, (int64_t)((uint64_t)(rank + k_1) % (uint64_t)4)) + addi, insert);
// CUDA:       for (int64_t k_3 = 1; k_3 < 4; k_3 += 1) {
// CUDA-NEXT:    const int64_t peer_1 = (int64_t)((uint64_t)(rank + k_3) % (uint64_t)4);
// CUDA-NEXT:    coco::count_peer_bytes(peers, peer_1, (unsigned long long)1024);
// CUDA:       for (int64_t item_1 = bid; item_1 < 3; item_1 += grid_dim) {
// CUDA-NEXT:    const int64_t peer_2 = (int64_t)((uint64_t)(rank + (item_1 + 1)) % (uint64_t)4);

builtin.module {
  func.func @sgd(%g: !coco.tensor<1024xf32, local>, %w: !coco.tensor<1024xf32, replicated>, %lr: !coco.tensor<f32, replicated>) {
    %w1 = coco.fusion (%g, %lr, %w) {name = "sum_rs_fused"} : (!coco.tensor<1024xf32, local>, !coco.tensor<f32, replicated>, !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated> {
    ^bb0(%g_1: !coco.tensor<1024xf32, local>, %lr_1: !coco.tensor<f32, replicated>, %w_1: !coco.tensor<1024xf32, replicated>):
      %sum = coco.reduce_scatter %g_1 reduction = sum dim = 0 {name = "sum_rs"} : !coco.tensor<1024xf32, local> -> !coco.tensor<1024xf32, sliced<0>>
      %step = coco.mul %lr_1, %sum : (!coco.tensor<f32, replicated>, !coco.tensor<1024xf32, sliced<0>>) -> !coco.tensor<1024xf32, sliced<0>>
      %w_slice = coco.all_slice %w_1 dim = 0 : (!coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, sliced<0>>
      %w1_1 = coco.sub %w_slice, %step : (!coco.tensor<1024xf32, sliced<0>>, !coco.tensor<1024xf32, sliced<0>>) -> !coco.tensor<1024xf32, sliced<0>>
      %w1_2 = coco.all_gather %w1_1 : !coco.tensor<1024xf32, sliced<0>> -> !coco.tensor<1024xf32, replicated>
      coco.yield %w1_2 : !coco.tensor<1024xf32, replicated>
    }
    coco.update %w, %w1 : !coco.tensor<1024xf32, replicated>
    func.return
  }
}
