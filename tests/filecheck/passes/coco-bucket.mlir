// RUN: coconet-opt %s -p coco-bucket | filecheck %s
// RUN: coconet-opt %s -p 'coco-bucket{bytes=64}' | filecheck %s --check-prefix=SMALL
// RUN: not coconet-opt %s -p 'coco-bucket{op=odd}' 2>&1 | filecheck %s --check-prefix=ODD
// RUN: not coconet-opt %s -p 'coco-bucket{bytes=0}' 2>&1 | filecheck %s --check-prefix=BYTES
// RUN: coconet-opt %s -p 'coco-optimize' | filecheck %s --check-prefix=OPT
// The oracle: the bucketed program computes the same values on 2, 4 and 8 ranks.
// RUN: coconet-opt %s -p coco-bucket -o %t
// RUN: coconet-run --compare %s %t --world 2 --entry sgd
// RUN: coconet-run --compare %s %t --world 4 --entry sgd
// RUN: coconet-run --compare %s %t --world 8 --entry sgd
// RUN: coconet-run --compare %s %t --world 4 --entry ddp
// RUN: coconet-run --compare %s %t --world 2 --entry clip && coconet-run --compare %s %t --world 4 --entry clip && coconet-run --compare %s %t --world 8 --entry clip
// RUN: coconet-opt %s -p coco-optimize -o %t.opt
// RUN: coconet-run --compare %s %t.opt --world 8 --entry sgd

// Three SGD parameters with the same chain: one bucket. Every leaf (the
// gradients, the weights) is concatenated, the chain runs once on the flat
// bucket, the new weights are split back.
// CHECK-LABEL: func.func @sgd
// CHECK-NEXT:    %[[G:.*]] = coco.concat %g0, %g1, %g2 : (!coco.tensor<16xf32, local>, !coco.tensor<8x8xf32, local>, !coco.tensor<8xf32, local>) -> !coco.tensor<88xf32, local>
// CHECK-NEXT:    %[[W:.*]] = coco.concat %w0, %w1, %w2 : (!coco.tensor<16xf32, replicated>, !coco.tensor<8x8xf32, replicated>, !coco.tensor<8xf32, replicated>) -> !coco.tensor<88xf32, replicated>
// CHECK-NEXT:    %[[S:.*]] = coco.all_reduce %[[G]] reduction = sum {name = "bucket0"} : !coco.tensor<88xf32, local> -> !coco.tensor<88xf32, replicated>
// CHECK-NEXT:    %[[D:.*]] = coco.mul %lr, %[[S]] : (!coco.tensor<f32, replicated>, !coco.tensor<88xf32, replicated>) -> !coco.tensor<88xf32, replicated>
// CHECK-NEXT:    %[[W1:.*]] = coco.sub %[[W]], %[[D]] : (!coco.tensor<88xf32, replicated>, !coco.tensor<88xf32, replicated>) -> !coco.tensor<88xf32, replicated>
// CHECK-NEXT:    %[[A:.*]], %[[B:.*]], %[[C:.*]] = coco.split %[[W1]] : (!coco.tensor<88xf32, replicated>) -> (!coco.tensor<16xf32, replicated>, !coco.tensor<8x8xf32, replicated>, !coco.tensor<8xf32, replicated>)
// CHECK-NEXT:    coco.update %w0, %[[A]] : !coco.tensor<16xf32, replicated>
// CHECK-NEXT:    coco.update %w1, %[[B]] : !coco.tensor<8x8xf32, replicated>
// CHECK-NEXT:    coco.update %w2, %[[C]] : !coco.tensor<8xf32, replicated>
// CHECK-NEXT:    func.return

// 64 bytes of gradients: no two parameters fit in one bucket.
// SMALL-LABEL: func.func @sgd
// SMALL-NOT:     coco.concat
// SMALL:       func.func @ddp
func.func @sgd(%g0: !coco.tensor<16xf32, local>, %w0: !coco.tensor<16xf32, replicated>,
               %g1: !coco.tensor<8x8xf32, local>, %w1: !coco.tensor<8x8xf32, replicated>,
               %g2: !coco.tensor<8xf32, local>, %w2: !coco.tensor<8xf32, replicated>,
               %lr: !coco.tensor<f32, replicated>) {
  %s0 = coco.all_reduce %g0 reduction = sum : !coco.tensor<16xf32, local> -> !coco.tensor<16xf32, replicated>
  %d0 = coco.mul %lr, %s0 : (!coco.tensor<f32, replicated>, !coco.tensor<16xf32, replicated>) -> !coco.tensor<16xf32, replicated>
  %n0 = coco.sub %w0, %d0 : (!coco.tensor<16xf32, replicated>, !coco.tensor<16xf32, replicated>) -> !coco.tensor<16xf32, replicated>
  coco.update %w0, %n0 : !coco.tensor<16xf32, replicated>
  %s1 = coco.all_reduce %g1 reduction = sum : !coco.tensor<8x8xf32, local> -> !coco.tensor<8x8xf32, replicated>
  %d1 = coco.mul %lr, %s1 : (!coco.tensor<f32, replicated>, !coco.tensor<8x8xf32, replicated>) -> !coco.tensor<8x8xf32, replicated>
  %n1 = coco.sub %w1, %d1 : (!coco.tensor<8x8xf32, replicated>, !coco.tensor<8x8xf32, replicated>) -> !coco.tensor<8x8xf32, replicated>
  coco.update %w1, %n1 : !coco.tensor<8x8xf32, replicated>
  %s2 = coco.all_reduce %g2 reduction = sum : !coco.tensor<8xf32, local> -> !coco.tensor<8xf32, replicated>
  %d2 = coco.mul %lr, %s2 : (!coco.tensor<f32, replicated>, !coco.tensor<8xf32, replicated>) -> !coco.tensor<8xf32, replicated>
  %n2 = coco.sub %w2, %d2 : (!coco.tensor<8xf32, replicated>, !coco.tensor<8xf32, replicated>) -> !coco.tensor<8xf32, replicated>
  coco.update %w2, %n2 : !coco.tensor<8xf32, replicated>
  func.return
}

// coco-optimize: the bucket is one fused region (reduce_scatter, the update
// on the slices, all_gather) between the concats and the split.
// OPT-LABEL: func.func @sgd
// OPT:         coco.concat %g0, %g1, %g2
// OPT:         coco.fusion {{.*}} {name = "bucket0_rs_fused"}
// OPT:           coco.reduce_scatter {{.*}} dim = 0 {name = "bucket0_rs"} : !coco.tensor<88xf32, local> -> !coco.tensor<88xf32, sliced<0>>
// OPT:           coco.all_gather
// OPT:         coco.split

// Consumers that are not an elementwise chain (a norm, a matmul): the
// all_reduces alone share a bucket (DDP's), placed before the first consumer;
// the split's pieces replace them.
// CHECK-LABEL: func.func @ddp
// CHECK-NEXT:    %[[G:.*]] = coco.concat %a, %b : (!coco.tensor<8x8xf32, local>, !coco.tensor<16xf32, local>) -> !coco.tensor<80xf32, local>
// CHECK-NEXT:    %[[S:.*]] = coco.all_reduce %[[G]] reduction = sum {name = "bucket0"} : !coco.tensor<80xf32, local> -> !coco.tensor<80xf32, replicated>
// CHECK-NEXT:    %[[SA:.*]], %[[SB:.*]] = coco.split %[[S]] : (!coco.tensor<80xf32, replicated>) -> (!coco.tensor<8x8xf32, replicated>, !coco.tensor<16xf32, replicated>)
// CHECK-NEXT:    %n = coco.norm %[[SA]]
// CHECK-NEXT:    %y = coco.matmul %x, %[[SA]]
// CHECK-NEXT:    %nb = coco.norm %[[SB]]
// OPT-LABEL: func.func @ddp
// OPT-NOT:     coco.concat
func.func @ddp(%a: !coco.tensor<8x8xf32, local>, %b: !coco.tensor<16xf32, local>, %x: !coco.tensor<4x8xf32, replicated>) -> (!coco.tensor<f32, replicated>, !coco.tensor<4x8xf32, replicated>, !coco.tensor<f32, replicated>) {
  %sa = coco.all_reduce %a reduction = sum : !coco.tensor<8x8xf32, local> -> !coco.tensor<8x8xf32, replicated>
  %n = coco.norm %sa : (!coco.tensor<8x8xf32, replicated>) -> !coco.tensor<f32, replicated>
  %y = coco.matmul %x, %sa : (!coco.tensor<4x8xf32, replicated>, !coco.tensor<8x8xf32, replicated>) -> !coco.tensor<4x8xf32, replicated>
  %sb = coco.all_reduce %b reduction = sum : !coco.tensor<16xf32, local> -> !coco.tensor<16xf32, replicated>
  %nb = coco.norm %sb : (!coco.tensor<16xf32, replicated>) -> !coco.tensor<f32, replicated>
  func.return %n, %y, %nb : !coco.tensor<f32, replicated>, !coco.tensor<4x8xf32, replicated>, !coco.tensor<f32, replicated>
}

// A named all_reduce whose element count no world size up to 8 divides.
// ODD: error: 'coco.all_reduce' op coco-bucket cannot apply: its operand !coco.tensor<6xf32, local> has 6 elements, not divisible by every world size up to 8: a bucket holds one block of every parameter per rank
// BYTES: coconet-opt: error: coco-bucket: bytes must be >= 1, got 0
func.func @odd(%g: !coco.tensor<6xf32, local>) -> !coco.tensor<6xf32, replicated> {
  %s = coco.all_reduce %g reduction = sum {name = "odd"} : !coco.tensor<6xf32, local> -> !coco.tensor<6xf32, replicated>
  func.return %s : !coco.tensor<6xf32, replicated>
}

// Clipping by global norm (docs/passes/coco-bucket.md, "Sums across
// parameters"): the two sums of squares become one sum over the bucket,
// placed before the norm, and the addition of the second term goes; the
// clipped updates follow the clip coefficient.
// CHECK-LABEL: func.func @clip
// CHECK:         %bucket{{[0-9]+}}_g0 = coco.concat %g0, %g1
// CHECK-NEXT:    %[[B:.*]] = coco.all_reduce %bucket{{[0-9]+}}_g0
// CHECK-NEXT:    %[[SQ:.*]] = coco.mul %[[B]], %[[B]]
// CHECK-NEXT:    %[[SUM:.*]] = coco.reduce %[[SQ]] kind = sum dims = [0] {{.*}} -> !coco.tensor<f32, replicated>
// CHECK-NEXT:    %norm = coco.sqrt %[[SUM]]
// CHECK-NOT:     coco.add
// CHECK:         coco.mul %[[B]], %norm
// CHECK:         coco.split
// Under coco-optimize, one fused collective for the bucket, the norm inside.
// OPT-LABEL: func.func @clip
// OPT:         coco.fusion
// OPT:           coco.reduce_scatter
// OPT:           coco.all_reduce
// OPT:           coco.sqrt
// OPT:           coco.all_gather
func.func @clip(%g0: !coco.tensor<16xf32, local>, %w0: !coco.tensor<16xf32, replicated>, %g1: !coco.tensor<8xf32, local>, %w1: !coco.tensor<8xf32, replicated>) {
  %s0 = coco.all_reduce %g0 reduction = sum : !coco.tensor<16xf32, local> -> !coco.tensor<16xf32, replicated>
  %s1 = coco.all_reduce %g1 reduction = sum : !coco.tensor<8xf32, local> -> !coco.tensor<8xf32, replicated>
  %q0 = coco.mul %s0, %s0 : (!coco.tensor<16xf32, replicated>, !coco.tensor<16xf32, replicated>) -> !coco.tensor<16xf32, replicated>
  %n0 = coco.reduce %q0 kind = sum dims = [0] : (!coco.tensor<16xf32, replicated>) -> !coco.tensor<f32, replicated>
  %q1 = coco.mul %s1, %s1 : (!coco.tensor<8xf32, replicated>, !coco.tensor<8xf32, replicated>) -> !coco.tensor<8xf32, replicated>
  %n1 = coco.reduce %q1 kind = sum dims = [0] : (!coco.tensor<8xf32, replicated>) -> !coco.tensor<f32, replicated>
  %t = coco.add %n0, %n1 : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
  %norm = coco.sqrt %t : (!coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
  %a0 = coco.mul %s0, %norm : (!coco.tensor<16xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<16xf32, replicated>
  %u0 = coco.sub %w0, %a0 : (!coco.tensor<16xf32, replicated>, !coco.tensor<16xf32, replicated>) -> !coco.tensor<16xf32, replicated>
  coco.update %w0, %u0 : !coco.tensor<16xf32, replicated>
  %a1 = coco.mul %s1, %norm : (!coco.tensor<8xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<8xf32, replicated>
  %u1 = coco.sub %w1, %a1 : (!coco.tensor<8xf32, replicated>, !coco.tensor<8xf32, replicated>) -> !coco.tensor<8xf32, replicated>
  coco.update %w1, %u1 : !coco.tensor<8xf32, replicated>
  func.return
}
