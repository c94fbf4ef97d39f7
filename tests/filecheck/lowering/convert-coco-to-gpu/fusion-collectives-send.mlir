// RUN: coconet-opt %s --split-input-file -p 'convert-coco-to-gpu{world=4 fused_chunk=100}' | filecheck %s
// RUN: coconet-opt %s --split-input-file -p 'convert-coco-to-gpu{world=4 fused_chunk=100}' 2>&1 >/dev/null | filecheck %s --check-prefix=WARN

// The send variant (CoCoNet's pipeline send fusion): the kernel reduces and
// computes, phase 2 signals only release the scratch (nothing is gathered),
// and the slice crosses the stage boundary with ncclSend after the kernel.
// A slice of 4x8x16 along dim 1 on 4 ranks is 128 elements: 2 chunks of 100
// (the last one short), 2 x 4 x 2 signal slots.

// CHECK:       builtin.module attributes {{{.*}}coco_gpu.symmetric_bytes = 2048 : i64, coco_gpu.signal_slots = 16 : i64
// CHECK:       gpu.func
// CHECK-NOT:   gpu.func
// CHECK:         %rank: index, %epoch: i64, %peers: {{.*}}, %input0: memref<512xf32>, %scratch0: memref<512xf32>, %in1: memref<16xf32>, %slice0: memref<128xf32>
// Phase 1 counts its bytes (the last chunk is short) and signals.
// CHECK:         arith.minui
// CHECK:         coco_gpu.count_peer_bytes %peers, %peer, %{{.*}}
// CHECK:         coco_gpu.signal %peers, %peer, %{{.*}}, %epoch
// Phase 2: wait, reduce, store the slice; signal without counting bytes.
// CHECK:         coco_gpu.wait_signal
// CHECK:         memref.store %{{.*}}, %slice0
// CHECK-NOT:     coco_gpu.count_peer_bytes
// CHECK:         coco_gpu.signal
// Phase 3 is only the closing sync: wait, no copy.
// CHECK:         coco_gpu.wait_signal
// CHECK-NEXT:  }
// CHECK-NEXT:  }
// CHECK-NEXT:  {{"?}}gpu.return
// CHECK-LABEL: func.func @stage1(
// CHECK:         %[[SLICE:.*]] = memref.alloc() : memref<4x2x16xf32>
// CHECK:         @kernels::@stage1_rs_send_fused_0
// CHECK-NEXT:    coco_gpu.nccl_send %[[SLICE]] to @stage2 channel = 0 : memref<4x2x16xf32>
// CHECK-NOT:     coco_gpu.nccl_reduce_scatter
// CHECK-LABEL: func.func @stage2(
// CHECK:         coco_gpu.nccl_recv

func.func @stage1(%x: !coco.tensor<4x8x16xf32, local>, %bias: !coco.tensor<16xf32, replicated>) {
  coco.fusion (%x, %bias) {name = "rs_send_fused"} : (!coco.tensor<4x8x16xf32, local>, !coco.tensor<16xf32, replicated>) -> () {
  ^bb0(%x1: !coco.tensor<4x8x16xf32, local>, %bias1: !coco.tensor<16xf32, replicated>):
    %sum = coco.reduce_scatter %x1 reduction = sum dim = 1 : !coco.tensor<4x8x16xf32, local> -> !coco.tensor<4x8x16xf32, sliced<1>>
    %b = coco.add %sum, %bias1 : (!coco.tensor<4x8x16xf32, sliced<1>>, !coco.tensor<16xf32, replicated>) -> !coco.tensor<4x8x16xf32, sliced<1>>
    coco.send %b to @stage2 channel = 0 : !coco.tensor<4x8x16xf32, sliced<1>>
    coco.yield
  }
  func.return
}
func.func @stage2() -> !coco.tensor<4x8x16xf32, sliced<1>> {
  %h = coco.recv from @stage1 channel = 0 : !coco.tensor<4x8x16xf32, sliced<1>>
  func.return %h : !coco.tensor<4x8x16xf32, sliced<1>>
}

// -----

// Two reduce_scatters along different dims: two parts of ONE fused kernel
// (docs/gpu/fused.md, "Several slice shapes"), each with its own chunks and
// phase slots (2 phases x 4 ranks x 1 chunk each), no NCCL call.

// CHECK:       builtin.module attributes {{{.*}}coco_gpu.signal_slots = 16 : i64
// CHECK-LABEL: func.func @mixed(
// CHECK-NOT:     coco_gpu.nccl
// CHECK:         gpu.launch_func
// CHECK-NOT:     gpu.launch_func
// CHECK-NOT:     coco_gpu.nccl
// CHECK:         return

func.func @mixed(%a: !coco.tensor<8x8xf32, local>, %b: !coco.tensor<8x8xf32, local>) -> (!coco.tensor<8x8xf32, sliced<0>>, !coco.tensor<8x8xf32, sliced<1>>) {
  %x, %y = coco.fusion (%a, %b) : (!coco.tensor<8x8xf32, local>, !coco.tensor<8x8xf32, local>) -> (!coco.tensor<8x8xf32, sliced<0>>, !coco.tensor<8x8xf32, sliced<1>>) {
  ^bb0(%a1: !coco.tensor<8x8xf32, local>, %b1: !coco.tensor<8x8xf32, local>):
    %s0 = coco.reduce_scatter %a1 reduction = sum dim = 0 : !coco.tensor<8x8xf32, local> -> !coco.tensor<8x8xf32, sliced<0>>
    %s1 = coco.reduce_scatter %b1 reduction = sum dim = 1 : !coco.tensor<8x8xf32, local> -> !coco.tensor<8x8xf32, sliced<1>>
    %r = coco.relu %s0 : (!coco.tensor<8x8xf32, sliced<0>>) -> !coco.tensor<8x8xf32, sliced<0>>
    coco.yield %r, %s1 : !coco.tensor<8x8xf32, sliced<0>>, !coco.tensor<8x8xf32, sliced<1>>
  }
  func.return %x, %y : !coco.tensor<8x8xf32, sliced<0>>, !coco.tensor<8x8xf32, sliced<1>>
}

// -----

// Refused by the fused plan (compute on the local input, before its
// reduce_scatter): the fusion is lowered op by op, NCCL calls and kernels, no
// signals, and the conversion warns at the fusion, saying why (its only
// warning).

// WARN:     fusion-collectives-send.mlir:[[# @LINE + 11]]:3: warning: 'coco.fusion' op lowered op by op (kernels and library calls), not as one kernel: the fused collective kernel refuses it: it computes !coco.tensor<8x8xf32, local>, neither a slice
// WARN-NOT: warning

// CHECK:       builtin.module attributes {
// CHECK-NOT:   coco_gpu.signal_slots
// CHECK-NOT:   coco_gpu.signal
// CHECK-LABEL: func.func @inner(
// CHECK:         coco_gpu.nccl_reduce_scatter
// CHECK-NOT:     coco_gpu.symmetric_buffer

func.func @inner(%a: !coco.tensor<8x8xf32, local>) -> !coco.tensor<8x8xf32, sliced<0>> {
  %x = coco.fusion (%a) : (!coco.tensor<8x8xf32, local>) -> !coco.tensor<8x8xf32, sliced<0>> {
  ^bb0(%a1: !coco.tensor<8x8xf32, local>):
    %t = coco.relu %a1 : (!coco.tensor<8x8xf32, local>) -> !coco.tensor<8x8xf32, local>
    %s0 = coco.reduce_scatter %t reduction = sum dim = 0 : !coco.tensor<8x8xf32, local> -> !coco.tensor<8x8xf32, sliced<0>>
    %r = coco.relu %s0 : (!coco.tensor<8x8xf32, sliced<0>>) -> !coco.tensor<8x8xf32, sliced<0>>
    coco.yield %r : !coco.tensor<8x8xf32, sliced<0>>
  }
  func.return %x : !coco.tensor<8x8xf32, sliced<0>>
}
