// RUN: coconet-opt %s -p canonicalize | filecheck %s
// coco-split-all-reduce and canonicalize are inverses (names included).
// RUN: coconet-opt %s -p 'coco-split-all-reduce{op=avg},canonicalize' | filecheck %s --check-prefix=ROUND
// The oracle: the canonical program computes the same values on 2, 4 and 8 ranks.
// RUN: coconet-opt %s -p canonicalize -o %t
// RUN: coconet-run --compare %s %t --world 2 --entry canon
// RUN: coconet-run --compare %s %t --world 4 --entry canon
// RUN: coconet-run --compare %s %t --world 8 --entry canon
// RUN: coconet-run --compare %s %t --world 2 --entry shifts && coconet-run --compare %s %t --world 4 --entry shifts && coconet-run --compare %s %t --world 8 --entry shifts
// RUN: coconet-run --compare %s %t --world 2 --entry norms && coconet-run --compare %s %t --world 4 --entry norms && coconet-run --compare %s %t --world 8 --entry norms

// CHECK-LABEL: func.func @canon
// all_gather(reduce_scatter(g)) -> all_reduce(g), the reduction and the name kept.
// CHECK-NEXT:    %[[AR:.*]] = coco.all_reduce %g reduction = max {name = "m"} : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, replicated>
// The reduce_scatter has another use: both stay.
// CHECK-NEXT:    %[[RS2:.*]] = coco.reduce_scatter %g reduction = sum dim = 1
// CHECK-NEXT:    %[[AG2:.*]] = coco.all_gather %[[RS2]]
// all_slice(all_gather(s)) along another dim stays.
// CHECK-NEXT:    %[[AGS:.*]] = coco.all_gather %s
// CHECK-NEXT:    %[[SL1:.*]] = coco.all_slice %[[AGS]] dim = 1
// all_reduce sum of a replicated value (N times it) and max of a local one stay.
// CHECK-NEXT:    %[[SUMR:.*]] = coco.all_reduce %r reduction = sum
// CHECK-NEXT:    %[[MAXL:.*]] = coco.all_reduce %g reduction = max
// A real conversion stays.
// CHECK-NEXT:    %[[CV:.*]] = coco.convert %r : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf16, replicated>
// CHECK-NEXT:    func.return %[[AR]], %[[RS2]], %[[AG2]], %s, %[[SL1]], %r, %[[SUMR]], %r, %[[MAXL]], %r, %[[CV]] :
// CHECK-NEXT:  }
func.func @canon(%g: !coco.tensor<8x16xf32, local>,
                 %s: !coco.tensor<8x16xf32, sliced<0>>,
                 %r: !coco.tensor<8x16xf32, replicated>)
    -> (!coco.tensor<8x16xf32, replicated>,
        !coco.tensor<8x16xf32, sliced<1>>, !coco.tensor<8x16xf32, replicated>,
        !coco.tensor<8x16xf32, sliced<0>>, !coco.tensor<8x16xf32, sliced<1>>,
        !coco.tensor<8x16xf32, replicated>,
        !coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, replicated>,
        !coco.tensor<8x16xf32, replicated>,
        !coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf16, replicated>) {
  %rs = coco.reduce_scatter %g reduction = max dim = 0 {name = "m_rs"} : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, sliced<0>>
  %ag = coco.all_gather %rs {name = "m_ag"} : !coco.tensor<8x16xf32, sliced<0>> -> !coco.tensor<8x16xf32, replicated>
  %rs2 = coco.reduce_scatter %g reduction = sum dim = 1 : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, sliced<1>>
  %ag2 = coco.all_gather %rs2 : !coco.tensor<8x16xf32, sliced<1>> -> !coco.tensor<8x16xf32, replicated>
  %ags = coco.all_gather %s : !coco.tensor<8x16xf32, sliced<0>> -> !coco.tensor<8x16xf32, replicated>
  %sl0 = coco.all_slice %ags dim = 0 : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, sliced<0>>
  %sl1 = coco.all_slice %ags dim = 1 : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, sliced<1>>
  %slr = coco.all_slice %r dim = 1 : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, sliced<1>>
  %agr = coco.all_gather %slr : !coco.tensor<8x16xf32, sliced<1>> -> !coco.tensor<8x16xf32, replicated>
  %sumr = coco.all_reduce %r reduction = sum : !coco.tensor<8x16xf32, replicated> -> !coco.tensor<8x16xf32, replicated>
  %maxr = coco.all_reduce %r reduction = max : !coco.tensor<8x16xf32, replicated> -> !coco.tensor<8x16xf32, replicated>
  %maxl = coco.all_reduce %g reduction = max : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, replicated>
  %same = coco.convert %r : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  %half = coco.convert %r : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf16, replicated>
  func.return %ag, %rs2, %ag2, %sl0, %sl1, %agr, %sumr, %maxr, %maxl, %same, %half : !coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, sliced<1>>, !coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, sliced<0>>, !coco.tensor<8x16xf32, sliced<1>>, !coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf16, replicated>
}

// ROUND-LABEL: func.func @canon
// ROUND-LABEL: func.func @sgd
// ROUND-NEXT:    %[[S:.*]] = coco.all_reduce %g reduction = sum {name = "avg"}
// ROUND-NEXT:    coco.mul %lr, %[[S]]
func.func @sgd(%g: !coco.tensor<8x64xf32, local>, %w: !coco.tensor<8x64xf32, replicated>, %lr: !coco.tensor<f32, replicated>) {
  %s = coco.all_reduce %g reduction = sum {name = "avg"} : !coco.tensor<8x64xf32, local> -> !coco.tensor<8x64xf32, replicated>
  %d = coco.mul %lr, %s : (!coco.tensor<f32, replicated>, !coco.tensor<8x64xf32, replicated>) -> !coco.tensor<8x64xf32, replicated>
  %w1 = coco.sub %w, %d : (!coco.tensor<8x64xf32, replicated>, !coco.tensor<8x64xf32, replicated>) -> !coco.tensor<8x64xf32, replicated>
  coco.update %w, %w1 : !coco.tensor<8x64xf32, replicated>
  func.return
}

// Shifts: two in a row are one; by 0, or of a replicated value, none.
// CHECK-LABEL: func.func @shifts
// CHECK-NEXT:    %b = coco.shift %x by = 3 {name = "b"} : !coco.tensor<16xf32, sliced<0>> -> !coco.tensor<16xf32, sliced<0>>
// CHECK-NEXT:    func.return %b, %r, %x
func.func @shifts(%x: !coco.tensor<16xf32, sliced<0>>, %r: !coco.tensor<4xf32, replicated>) -> (!coco.tensor<16xf32, sliced<0>>, !coco.tensor<4xf32, replicated>, !coco.tensor<16xf32, sliced<0>>) {
  %a = coco.shift %x by = 1 : !coco.tensor<16xf32, sliced<0>> -> !coco.tensor<16xf32, sliced<0>>
  %b = coco.shift %a by = 2 {name = "b"} : !coco.tensor<16xf32, sliced<0>> -> !coco.tensor<16xf32, sliced<0>>
  %c = coco.shift %r by = 2 : !coco.tensor<4xf32, replicated> -> !coco.tensor<4xf32, replicated>
  %d = coco.shift %x by = 0 : !coco.tensor<16xf32, sliced<0>> -> !coco.tensor<16xf32, sliced<0>>
  func.return %b, %c, %d : !coco.tensor<16xf32, sliced<0>>, !coco.tensor<4xf32, replicated>, !coco.tensor<16xf32, sliced<0>>
}

// Transposes compose (the identity goes), reshapes compose where the layout
// rules allow the direct one, and a reshape to the operand's type goes.
// CHECK-LABEL: func.func @norms
// CHECK-NEXT:    %b = coco.transpose %c perm = [1, 2, 0] {name = "twice"} : (!coco.tensor<2x4x8xf32, replicated>) -> !coco.tensor<4x8x2xf32, replicated>
// CHECK-NEXT:    %r2 = coco.reshape %x {name = "flat"} : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<128xf32, sliced<0>>
// CHECK-NEXT:    func.return %x, %b, %x, %r2, %x :
func.func @norms(%x: !coco.tensor<8x16xf32, sliced<0>>, %c: !coco.tensor<2x4x8xf32, replicated>) -> (!coco.tensor<8x16xf32, sliced<0>>, !coco.tensor<4x8x2xf32, replicated>, !coco.tensor<8x16xf32, sliced<0>>, !coco.tensor<128xf32, sliced<0>>, !coco.tensor<8x16xf32, sliced<0>>) {
  %t = coco.transpose %x perm = [1, 0] : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<16x8xf32, sliced<1>>
  %tt = coco.transpose %t perm = [1, 0] {name = "back"} : (!coco.tensor<16x8xf32, sliced<1>>) -> !coco.tensor<8x16xf32, sliced<0>>
  %a = coco.transpose %c perm = [2, 0, 1] : (!coco.tensor<2x4x8xf32, replicated>) -> !coco.tensor<8x2x4xf32, replicated>
  %b = coco.transpose %a perm = [2, 0, 1] {name = "twice"} : (!coco.tensor<8x2x4xf32, replicated>) -> !coco.tensor<4x8x2xf32, replicated>
  %id = coco.transpose %x perm = [0, 1] : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<8x16xf32, sliced<0>>
  %r1 = coco.reshape %x : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<8x4x4xf32, sliced<0>>
  %r2 = coco.reshape %r1 {name = "flat"} : (!coco.tensor<8x4x4xf32, sliced<0>>) -> !coco.tensor<128xf32, sliced<0>>
  %r3 = coco.reshape %r1 : (!coco.tensor<8x4x4xf32, sliced<0>>) -> !coco.tensor<8x16xf32, sliced<0>>
  func.return %tt, %b, %id, %r2, %r3 : !coco.tensor<8x16xf32, sliced<0>>, !coco.tensor<4x8x2xf32, replicated>, !coco.tensor<8x16xf32, sliced<0>>, !coco.tensor<128xf32, sliced<0>>, !coco.tensor<8x16xf32, sliced<0>>
}
