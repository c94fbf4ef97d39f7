// RUN: coconet-opt %s -p cse | filecheck %s
// The oracle: every stage's outputs agree on 2, 4 and 8 ranks.
// RUN: coconet-opt %s -p cse -o %t
// RUN: coconet-run --compare %s %t --world 2
// RUN: coconet-run --compare %s %t --world 4
// RUN: coconet-run --compare %s %t --world 8

// xDSL's cse merges identical ops without memory effects and drops unused
// ones: compute ops, all_slice, constant, dropout with the same seed, and the
// collectives (SPMD: every rank runs the same program, so two identical
// all_reduces of one value are one all_reduce on every rank, and an unused one
// goes on every rank together). send and recv write their pipeline channel: cse
// neither merges nor removes them. Ops with different labels (`name`
// attributes) are different ops to cse. The interpreter comparison below shows
// the merged program computes the same on 2, 4 and 8 ranks.

// CHECK-LABEL: func.func @s1
// CHECK-NEXT:    %[[C:.*]] = coco.constant
// CHECK-NEXT:    %[[A:.*]] = coco.mul %x, %[[C]]
// CHECK-NEXT:    %[[D:.*]] = coco.dropout %[[A]]
// CHECK-NEXT:    %[[N1:.*]] = coco.neg %x {name = "n1"}
// CHECK-NEXT:    %[[N2:.*]] = coco.neg %x {name = "n2"}
// CHECK-NEXT:    %[[AR:.*]] = coco.all_reduce %g reduction = sum
// CHECK-NEXT:    %[[SL:.*]] = coco.all_slice %x dim = 0
// CHECK-NEXT:    coco.send %[[SL]] to @s2 channel = 0
// CHECK-NEXT:    coco.send %[[SL]] to @s2 channel = 1
// CHECK-NEXT:    %[[S1:.*]] = coco.add %[[D]], %[[D]]
// CHECK-NEXT:    %[[S2:.*]] = coco.add %[[N1]], %[[N2]]
// CHECK-NEXT:    %[[S3:.*]] = coco.add %[[AR]], %[[AR]]
// CHECK-NEXT:    func.return %[[S1]], %[[S2]], %[[S3]]
// CHECK-LABEL: func.func @s2
// CHECK-NEXT:    coco.recv from @s1 channel = 0
// CHECK-NEXT:    coco.recv from @s1 channel = 1
func.func @s1(%x: !coco.tensor<8x16xf32, replicated>, %g: !coco.tensor<8x16xf32, local>)
    -> (!coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, replicated>) {
  %c1 = coco.constant 2.000000e+00 : !coco.tensor<f32, replicated>
  %c2 = coco.constant 2.000000e+00 : !coco.tensor<f32, replicated>
  %a1 = coco.mul %x, %c1 : (!coco.tensor<8x16xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  %a2 = coco.mul %x, %c2 : (!coco.tensor<8x16xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  %d1 = coco.dropout %a1 p = 1.000000e-01 seed = 7 : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  %d2 = coco.dropout %a2 p = 1.000000e-01 seed = 7 : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  %n1 = coco.neg %x {name = "n1"} : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  %n2 = coco.neg %x {name = "n2"} : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  %unused = coco.exp %x : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  %ar1 = coco.all_reduce %g reduction = sum : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, replicated>
  %ar2 = coco.all_reduce %g reduction = sum : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, replicated>
  %unused_ar = coco.all_reduce %g reduction = max : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, replicated>
  %sl1 = coco.all_slice %x dim = 0 : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, sliced<0>>
  %sl2 = coco.all_slice %x dim = 0 : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, sliced<0>>
  %unused_ag = coco.all_gather %sl2 : !coco.tensor<8x16xf32, sliced<0>> -> !coco.tensor<8x16xf32, replicated>
  coco.send %sl1 to @s2 channel = 0 : !coco.tensor<8x16xf32, sliced<0>>
  coco.send %sl2 to @s2 channel = 1 : !coco.tensor<8x16xf32, sliced<0>>
  %s1 = coco.add %d1, %d2 : (!coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  %s2 = coco.add %n1, %n2 : (!coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  %s3 = coco.add %ar1, %ar2 : (!coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  func.return %s1, %s2, %s3 : !coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, replicated>
}

func.func @s2() -> (!coco.tensor<8x16xf32, sliced<0>>, !coco.tensor<8x16xf32, sliced<0>>) {
  %r0 = coco.recv from @s1 channel = 0 : !coco.tensor<8x16xf32, sliced<0>>
  %r1 = coco.recv from @s1 channel = 1 : !coco.tensor<8x16xf32, sliced<0>>
  func.return %r0, %r1 : !coco.tensor<8x16xf32, sliced<0>>, !coco.tensor<8x16xf32, sliced<0>>
}
