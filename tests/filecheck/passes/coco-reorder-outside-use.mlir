// A replicated producer whose result the slice set uses cut but something
// else uses whole stays where it is, replicated: the slice set reads an
// all_slice of it. (Moving it onto slices would compute the same values but
// add an all_gather of it: a mutation run found no test noticed, issue 25.)
// tests/unit/passes/test_mutation_holes.py runs these functions in the
// interpreter before and after on 2, 4 and 8 ranks.
// RUN: coconet-opt %s -p coco-reorder | filecheck %s

// CHECK-LABEL: func.func @returned
// CHECK-NEXT:    %[[S:.*]] = coco.reduce_scatter %g
// CHECK-NEXT:    %[[BM:.*]] = coco.mul %b1, %m : ({{.*}}, !coco.tensor<8x4xf32, replicated>) -> !coco.tensor<8x4xf32, replicated>
// CHECK-NEXT:    %[[CUT:.*]] = coco.all_slice %[[BM]] dim = 0
// CHECK-NEXT:    %[[X:.*]] = coco.add %[[S]], %[[CUT]] : {{.*}} -> !coco.tensor<8x4xf32, sliced<0>>
// CHECK-NEXT:    %[[XG:.*]] = coco.all_gather %[[X]]
// CHECK-NEXT:    func.return %[[XG]], %[[BM]]
// CHECK-NOT:   coco.all_gather
func.func @returned(%g: !coco.tensor<8x4xf32, local>, %m: !coco.tensor<8x4xf32, replicated>, %b1: !coco.tensor<f32, replicated>) -> (!coco.tensor<8x4xf32, replicated>, !coco.tensor<8x4xf32, replicated>) {
  %s = coco.reduce_scatter %g reduction = sum dim = 0 : !coco.tensor<8x4xf32, local> -> !coco.tensor<8x4xf32, sliced<0>>
  %ag = coco.all_gather %s : !coco.tensor<8x4xf32, sliced<0>> -> !coco.tensor<8x4xf32, replicated>
  %bm = coco.mul %b1, %m : (!coco.tensor<f32, replicated>, !coco.tensor<8x4xf32, replicated>) -> !coco.tensor<8x4xf32, replicated>
  %x = coco.add %ag, %bm : (!coco.tensor<8x4xf32, replicated>, !coco.tensor<8x4xf32, replicated>) -> !coco.tensor<8x4xf32, replicated>
  func.return %x, %bm : !coco.tensor<8x4xf32, replicated>, !coco.tensor<8x4xf32, replicated>
}

// The whole use is a coco.update (Adam's `b1 * m` also stored).
// CHECK-LABEL: func.func @updated
// CHECK-NEXT:    %[[S:.*]] = coco.reduce_scatter %g
// CHECK-NEXT:    %[[BM:.*]] = coco.mul %b1, %m : ({{.*}}, !coco.tensor<8x4xf32, replicated>) -> !coco.tensor<8x4xf32, replicated>
// CHECK-NEXT:    %[[CUT:.*]] = coco.all_slice %[[BM]] dim = 0
// CHECK-NEXT:    %[[X:.*]] = coco.add %[[S]], %[[CUT]] : {{.*}} -> !coco.tensor<8x4xf32, sliced<0>>
// CHECK-NEXT:    %[[XG:.*]] = coco.all_gather %[[X]]
// CHECK-NEXT:    coco.update %m, %[[BM]]
// CHECK-NEXT:    func.return %[[XG]]
// CHECK-NOT:   coco.all_gather
func.func @updated(%g: !coco.tensor<8x4xf32, local>, %m: !coco.tensor<8x4xf32, replicated>, %b1: !coco.tensor<f32, replicated>) -> !coco.tensor<8x4xf32, replicated> {
  %s = coco.reduce_scatter %g reduction = sum dim = 0 : !coco.tensor<8x4xf32, local> -> !coco.tensor<8x4xf32, sliced<0>>
  %ag = coco.all_gather %s : !coco.tensor<8x4xf32, sliced<0>> -> !coco.tensor<8x4xf32, replicated>
  %bm = coco.mul %b1, %m : (!coco.tensor<f32, replicated>, !coco.tensor<8x4xf32, replicated>) -> !coco.tensor<8x4xf32, replicated>
  %x = coco.add %ag, %bm : (!coco.tensor<8x4xf32, replicated>, !coco.tensor<8x4xf32, replicated>) -> !coco.tensor<8x4xf32, replicated>
  coco.update %m, %bm : !coco.tensor<8x4xf32, replicated>
  func.return %x : !coco.tensor<8x4xf32, replicated>
}

// The contrast: a producer used only by the slice set is pulled onto slices
// (`b1 * all_slice(m)`), and no all_gather of it appears.
// CHECK-LABEL: func.func @pulled
// CHECK-NEXT:    %[[S:.*]] = coco.reduce_scatter %g
// CHECK-NEXT:    %[[CUT:.*]] = coco.all_slice %m dim = 0
// CHECK-NEXT:    %[[BM:.*]] = coco.mul %b1, %[[CUT]] : ({{.*}}, !coco.tensor<8x4xf32, sliced<0>>) -> !coco.tensor<8x4xf32, sliced<0>>
// CHECK-NEXT:    %[[X:.*]] = coco.add %[[S]], %[[BM]]
// CHECK-NEXT:    %[[XG:.*]] = coco.all_gather %[[X]]
// CHECK-NEXT:    func.return %[[XG]]
func.func @pulled(%g: !coco.tensor<8x4xf32, local>, %m: !coco.tensor<8x4xf32, replicated>, %b1: !coco.tensor<f32, replicated>) -> !coco.tensor<8x4xf32, replicated> {
  %s = coco.reduce_scatter %g reduction = sum dim = 0 : !coco.tensor<8x4xf32, local> -> !coco.tensor<8x4xf32, sliced<0>>
  %ag = coco.all_gather %s : !coco.tensor<8x4xf32, sliced<0>> -> !coco.tensor<8x4xf32, replicated>
  %bm = coco.mul %b1, %m : (!coco.tensor<f32, replicated>, !coco.tensor<8x4xf32, replicated>) -> !coco.tensor<8x4xf32, replicated>
  %x = coco.add %ag, %bm : (!coco.tensor<8x4xf32, replicated>, !coco.tensor<8x4xf32, replicated>) -> !coco.tensor<8x4xf32, replicated>
  func.return %x : !coco.tensor<8x4xf32, replicated>
}
