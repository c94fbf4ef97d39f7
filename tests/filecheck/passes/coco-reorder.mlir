// RUN: coconet-opt %s -p coco-split-all-reduce,coco-reorder | filecheck %s
// RUN: coconet-opt %s -p 'coco-reorder{op=cols}' | filecheck %s --check-prefix=NAMED
// RUN: not coconet-opt %s -p 'coco-split-all-reduce,coco-reorder{op=grad_rs}' 2>&1 | filecheck %s --check-prefix=NOT-GATHER
// RUN: not coconet-opt %s -p 'coco-reorder{op=stuck}' 2>&1 | filecheck %s --check-prefix=NOTHING
// RUN: not coconet-opt %s -p 'coco-reorder{op=nothing}' 2>&1 | filecheck %s --check-prefix=NONE
// The oracle: every function computes the same values on 2, 4 and 8 ranks.
// RUN: coconet-opt %s -p coco-split-all-reduce,coco-reorder -o %t
// RUN: coconet-run --compare %s %t --world 2 --entry sgd && coconet-run --compare %s %t --world 4 --entry sgd && coconet-run --compare %s %t --world 8 --entry sgd
// RUN: coconet-run --compare %s %t --world 2 --entry momentum && coconet-run --compare %s %t --world 4 --entry momentum && coconet-run --compare %s %t --world 8 --entry momentum
// RUN: coconet-run --compare %s %t --world 2 --entry bias_rows && coconet-run --compare %s %t --world 4 --entry bias_rows && coconet-run --compare %s %t --world 8 --entry bias_rows
// RUN: coconet-run --compare %s %t --world 2 --entry bias_cols && coconet-run --compare %s %t --world 4 --entry bias_cols && coconet-run --compare %s %t --world 8 --entry bias_cols
// RUN: coconet-run --compare %s %t --world 2 --entry norms && coconet-run --compare %s %t --world 4 --entry norms && coconet-run --compare %s %t --world 8 --entry norms
// RUN: coconet-run --compare %s %t --world 2 --entry reductions && coconet-run --compare %s %t --world 4 --entry reductions && coconet-run --compare %s %t --world 8 --entry reductions
// RUN: coconet-run --compare %s %t --world 2 --entry megatron && coconet-run --compare %s %t --world 4 --entry megatron && coconet-run --compare %s %t --world 8 --entry megatron
// RUN: coconet-run --compare %s %t --world 2 --entry mask && coconet-run --compare %s %t --world 4 --entry mask && coconet-run --compare %s %t --world 8 --entry mask
// RUN: coconet-run --compare %s %t --world 2 --entry stays && coconet-run --compare %s %t --world 4 --entry stays && coconet-run --compare %s %t --world 8 --entry stays
// RUN: coconet-run --compare %s %t --world 2 --entry cross && coconet-run --compare %s %t --world 4 --entry cross && coconet-run --compare %s %t --world 8 --entry cross
// RUN: coconet-run --compare %s %t --world 2 --entry cross_chains && coconet-run --compare %s %t --world 4 --entry cross_chains && coconet-run --compare %s %t --world 8 --entry cross_chains
// RUN: coconet-run --compare %s %t --world 2 --entry aligned && coconet-run --compare %s %t --world 4 --entry aligned && coconet-run --compare %s %t --world 8 --entry aligned
// Targeting one of two all_gathers combined along different dims.
// RUN: coconet-opt %s -p 'coco-reorder{op=xrows}' -o %t.xrows
// RUN: filecheck %s --check-prefix=XROWS < %t.xrows
// RUN: coconet-run --compare %s %t.xrows --world 2 --entry cross && coconet-run --compare %s %t.xrows --world 4 --entry cross && coconet-run --compare %s %t.xrows --world 8 --entry cross
// RUN: sed -e 's/"xcols"/"xrows"/' %s > %t.xboth.mlir
// RUN: not coconet-opt %t.xboth.mlir -p 'coco-reorder{op=xrows}' 2>&1 | filecheck %s --check-prefix=XBOTH

// A refusal prints the reason and no module (the module is left as it was).
// NOT-GATHER:     error: 'coco.reduce_scatter' op coco-reorder cannot apply: it is not a coco.all_gather (after coco-split-all-reduce, an all_reduce named N gives N_rs and N_ag)
// NOT-GATHER-NOT: coco.
// NOTHING:        error: 'coco.all_gather' op coco-reorder cannot apply: nothing to move: no elementwise op (with replicated other operands), norm or reduction consumes its result
// NOTHING-NOT:    coco.
// NONE:           error: coco-reorder: no op named "nothing" that this pass applies to
// NONE-NOT:       coco.
// XBOTH:          xboth.mlir:{{[0-9]+}}:3: error: 'coco.all_gather' op coco-reorder cannot apply: nothing to move: no elementwise op (with replicated other operands), norm or reduction consumes its result
// XBOTH-NOT:      coco.

// SGD after the split: the update runs on the slices; the all_gather of the
// gradient is gone and one all_gather brings the new weights back for the update.
// CHECK-LABEL: func.func @sgd
// CHECK-NEXT:    %[[G:.*]] = coco.reduce_scatter %g reduction = sum dim = 0 {name = "grad_rs"}
// CHECK-NEXT:    %[[STEP:.*]] = coco.mul %lr, %[[G]] {name = "step"} : (!coco.tensor<f32, replicated>, !coco.tensor<64x16xf32, sliced<0>>) -> !coco.tensor<64x16xf32, sliced<0>>
// CHECK-NEXT:    %[[W:.*]] = coco.all_slice %w dim = 0 : (!coco.tensor<64x16xf32, replicated>) -> !coco.tensor<64x16xf32, sliced<0>>
// CHECK-NEXT:    %[[W1:.*]] = coco.sub %[[W]], %[[STEP]] : ({{.*}}) -> !coco.tensor<64x16xf32, sliced<0>>
// CHECK-NEXT:    %[[NEW:.*]] = coco.all_gather %[[W1]] : !coco.tensor<64x16xf32, sliced<0>> -> !coco.tensor<64x16xf32, replicated>
// CHECK-NEXT:    coco.update %w, %[[NEW]] : !coco.tensor<64x16xf32, replicated>
// CHECK-NOT:     grad_ag
func.func @sgd(%g: !coco.tensor<64x16xf32, local>, %w: !coco.tensor<64x16xf32, replicated>, %lr: !coco.tensor<f32, replicated>) {
  %sum = coco.all_reduce %g reduction = sum {name = "grad"} : !coco.tensor<64x16xf32, local> -> !coco.tensor<64x16xf32, replicated>
  %step = coco.mul %lr, %sum {name = "step"} : (!coco.tensor<f32, replicated>, !coco.tensor<64x16xf32, replicated>) -> !coco.tensor<64x16xf32, replicated>
  %w1 = coco.sub %w, %step : (!coco.tensor<64x16xf32, replicated>, !coco.tensor<64x16xf32, replicated>) -> !coco.tensor<64x16xf32, replicated>
  coco.update %w, %w1 : !coco.tensor<64x16xf32, replicated>
  func.return
}

// The replicated producer b*m is only used by the moved region: it runs on the
// slice of m. m1 is used in the region and, whole, by the update and the return:
// one all_gather, right after it.
// CHECK-LABEL: func.func @momentum
// CHECK:         %[[G:.*]] = coco.reduce_scatter %g
// CHECK-NEXT:    %[[M:.*]] = coco.all_slice %m dim = 0
// CHECK-NEXT:    %[[BM:.*]] = coco.mul %b, %[[M]] : ({{.*}}) -> !coco.tensor<64xf32, sliced<0>>
// CHECK-NEXT:    %[[M1:.*]] = coco.add %[[BM]], %[[G]] {name = "m1"} : ({{.*}}) -> !coco.tensor<64xf32, sliced<0>>
// CHECK-NEXT:    %[[M1G:.*]] = coco.all_gather %[[M1]] {name = "m1_ag"}
// CHECK-NEXT:    %[[STEP:.*]] = coco.mul %lr, %[[M1]] : ({{.*}}) -> !coco.tensor<64xf32, sliced<0>>
// CHECK:         coco.update %m, %[[M1G]]
// CHECK-NEXT:    func.return %[[M1G]]
func.func @momentum(%g: !coco.tensor<64xf32, local>, %w: !coco.tensor<64xf32, replicated>, %m: !coco.tensor<64xf32, replicated>, %lr: !coco.tensor<f32, replicated>) -> !coco.tensor<64xf32, replicated> {
  %b = coco.constant 9.000000e-01 : !coco.tensor<f32, replicated>
  %sum = coco.all_reduce %g reduction = sum {name = "grad"} : !coco.tensor<64xf32, local> -> !coco.tensor<64xf32, replicated>
  %bm = coco.mul %b, %m : (!coco.tensor<f32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
  %m1 = coco.add %bm, %sum {name = "m1"} : (!coco.tensor<64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
  %step = coco.mul %lr, %m1 : (!coco.tensor<f32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
  %w1 = coco.sub %w, %step : (!coco.tensor<64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
  coco.update %w, %w1 : !coco.tensor<64xf32, replicated>
  coco.update %m, %m1 : !coco.tensor<64xf32, replicated>
  func.return %m1 : !coco.tensor<64xf32, replicated>
}

// A bias [32] against x [16, 32] sliced<0> is broadcast along the sliced dim: it
// stays replicated.
// CHECK-LABEL: func.func @bias_rows
// CHECK-NEXT:    %[[Y:.*]] = coco.add %x, %bias {name = "biased"} : (!coco.tensor<16x32xf32, sliced<0>>, !coco.tensor<32xf32, replicated>) -> !coco.tensor<16x32xf32, sliced<0>>
// CHECK-NEXT:    %[[YG:.*]] = coco.all_gather %[[Y]] {name = "biased_ag"}
// CHECK-NEXT:    func.return %[[YG]]
// NAMED-LABEL: func.func @bias_rows
// NAMED-NEXT:    coco.all_gather %x {name = "rows"}
func.func @bias_rows(%x: !coco.tensor<16x32xf32, sliced<0>>, %bias: !coco.tensor<32xf32, replicated>) -> !coco.tensor<16x32xf32, replicated> {
  %xg = coco.all_gather %x {name = "rows"} : !coco.tensor<16x32xf32, sliced<0>> -> !coco.tensor<16x32xf32, replicated>
  %y = coco.add %xg, %bias {name = "biased"} : (!coco.tensor<16x32xf32, replicated>, !coco.tensor<32xf32, replicated>) -> !coco.tensor<16x32xf32, replicated>
  func.return %y : !coco.tensor<16x32xf32, replicated>
}

// Against x [16, 32] sliced<1>, the bias is cut along its dim 0.
// CHECK-LABEL: func.func @bias_cols
// CHECK-NEXT:    %[[B:.*]] = coco.all_slice %bias dim = 0 : (!coco.tensor<32xf32, replicated>) -> !coco.tensor<32xf32, sliced<0>>
// CHECK-NEXT:    %[[Y:.*]] = coco.add %x, %[[B]] {name = "biased"} : (!coco.tensor<16x32xf32, sliced<1>>, !coco.tensor<32xf32, sliced<0>>) -> !coco.tensor<16x32xf32, sliced<1>>
// CHECK-NEXT:    %[[YG:.*]] = coco.all_gather %[[Y]] {name = "biased_ag"}
// CHECK-NEXT:    func.return %[[YG]]
// NAMED-LABEL: func.func @bias_cols
// NAMED-NEXT:    coco.all_slice %bias dim = 0
func.func @bias_cols(%x: !coco.tensor<16x32xf32, sliced<1>>, %bias: !coco.tensor<32xf32, replicated>) -> !coco.tensor<16x32xf32, replicated> {
  %xg = coco.all_gather %x {name = "cols"} : !coco.tensor<16x32xf32, sliced<1>> -> !coco.tensor<16x32xf32, replicated>
  %y = coco.add %xg, %bias {name = "biased"} : (!coco.tensor<16x32xf32, replicated>, !coco.tensor<32xf32, replicated>) -> !coco.tensor<16x32xf32, replicated>
  func.return %y : !coco.tensor<16x32xf32, replicated>
}

// The norm of a moved value (and of the gathered value itself) is written out
// across ranks: sqrt(all_reduce(reduce(v*v))).
// CHECK-LABEL: func.func @norms
// CHECK-NEXT:    %[[Y:.*]] = coco.mul %x, %s : ({{.*}}) -> !coco.tensor<64xf32, sliced<0>>
// CHECK-NEXT:    %[[SQ:.*]] = coco.mul %[[Y]], %[[Y]] : ({{.*}}) -> !coco.tensor<64xf32, sliced<0>>
// CHECK-NEXT:    %[[P:.*]] = coco.reduce %[[SQ]] kind = sum dims = [0] : (!coco.tensor<64xf32, sliced<0>>) -> !coco.tensor<f32, local>
// CHECK-NEXT:    %[[T:.*]] = coco.all_reduce %[[P]] reduction = sum {name = "y_norm_ar"} : !coco.tensor<f32, local> -> !coco.tensor<f32, replicated>
// CHECK-NEXT:    %[[NY:.*]] = coco.sqrt %[[T]] {name = "y_norm"} : (!coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
// CHECK-NEXT:    %[[XSQ:.*]] = coco.mul %x, %x
// CHECK-NEXT:    %[[XP:.*]] = coco.reduce %[[XSQ]] kind = sum dims = [0]
// CHECK-NEXT:    %[[XT:.*]] = coco.all_reduce %[[XP]] reduction = sum :
// CHECK-NEXT:    %[[NX:.*]] = coco.sqrt %[[XT]]
// CHECK-NEXT:    %{{.*}} = coco.div %[[NX]], %[[NY]]
// CHECK-NOT:     coco.all_gather
// CHECK:         func.return
func.func @norms(%x: !coco.tensor<64xf32, sliced<0>>, %s: !coco.tensor<f32, replicated>) -> (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) {
  %xg = coco.all_gather %x {name = "gather"} : !coco.tensor<64xf32, sliced<0>> -> !coco.tensor<64xf32, replicated>
  %y = coco.mul %xg, %s : (!coco.tensor<64xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<64xf32, replicated>
  %ny = coco.norm %y {name = "y_norm"} : (!coco.tensor<64xf32, replicated>) -> !coco.tensor<f32, replicated>
  %nx = coco.norm %xg : (!coco.tensor<64xf32, replicated>) -> !coco.tensor<f32, replicated>
  %trust = coco.div %nx, %ny : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
  func.return %trust, %ny : !coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>
}

// A reduction over the sliced dim: the block's partial, then an all_reduce with
// the same kind. Over another dim: it runs on the slice (dim renumbered) and
// stays in the region.
// CHECK-LABEL: func.func @reductions
// CHECK-NEXT:    %[[E:.*]] = coco.exp %x : (!coco.tensor<16x32xf32, sliced<0>>) -> !coco.tensor<16x32xf32, sliced<0>>
// CHECK-NEXT:    %[[P:.*]] = coco.reduce %[[E]] kind = max dims = [0] {name = "colmax"} : (!coco.tensor<16x32xf32, sliced<0>>) -> !coco.tensor<32xf32, local>
// CHECK-NEXT:    %[[MAX:.*]] = coco.all_reduce %[[P]] reduction = max {name = "colmax_ar"} : !coco.tensor<32xf32, local> -> !coco.tensor<32xf32, replicated>
// CHECK-NEXT:    %[[ROWS:.*]] = coco.reduce %[[E]] kind = sum dims = [1] {name = "rowsum"} : (!coco.tensor<16x32xf32, sliced<0>>) -> !coco.tensor<16xf32, sliced<0>>
// CHECK-NEXT:    %[[C:.*]] = coco.all_slice %c dim = 0
// CHECK-NEXT:    %[[Z:.*]] = coco.add %[[ROWS]], %[[C]] : ({{.*}}) -> !coco.tensor<16xf32, sliced<0>>
// CHECK-NEXT:    %[[ZG:.*]] = coco.all_gather %[[Z]] : !coco.tensor<16xf32, sliced<0>> -> !coco.tensor<16xf32, replicated>
// CHECK-NEXT:    func.return %[[MAX]], %[[ZG]]
func.func @reductions(%x: !coco.tensor<16x32xf32, sliced<0>>, %c: !coco.tensor<16xf32, replicated>) -> (!coco.tensor<32xf32, replicated>, !coco.tensor<16xf32, replicated>) {
  %xg = coco.all_gather %x {name = "gather"} : !coco.tensor<16x32xf32, sliced<0>> -> !coco.tensor<16x32xf32, replicated>
  %e = coco.exp %xg : (!coco.tensor<16x32xf32, replicated>) -> !coco.tensor<16x32xf32, replicated>
  %colmax = coco.reduce %e kind = max dims = [0] {name = "colmax"} : (!coco.tensor<16x32xf32, replicated>) -> !coco.tensor<32xf32, replicated>
  %rowsum = coco.reduce %e kind = sum dims = [1] {name = "rowsum"} : (!coco.tensor<16x32xf32, replicated>) -> !coco.tensor<16xf32, replicated>
  %z = coco.add %rowsum, %c : (!coco.tensor<16xf32, replicated>, !coco.tensor<16xf32, replicated>) -> !coco.tensor<16xf32, replicated>
  func.return %colmax, %z : !coco.tensor<32xf32, replicated>, !coco.tensor<16xf32, replicated>
}

// Megatron's row-parallel layer: bias, dropout (global mask indices) and
// residual on the slices; the residual [4, 8, 64] is cut along dim 2, the bias
// [64] along dim 0; one all_gather for the result.
// CHECK-LABEL: func.func @megatron
// CHECK:         %[[S:.*]] = coco.reduce_scatter %layer reduction = sum dim = 2 {name = "sum_rs"}
// CHECK-NEXT:    %[[B:.*]] = coco.all_slice %bias dim = 0
// CHECK-NEXT:    %[[BI:.*]] = coco.add %[[S]], %[[B]] : ({{.*}}) -> !coco.tensor<4x4x64xf32, sliced<2>>
// CHECK-NEXT:    %[[D:.*]] = coco.dropout %[[BI]] p = 1.000000e-01 seed = 7 {name = "dropout"} : (!coco.tensor<4x4x64xf32, sliced<2>>) -> !coco.tensor<4x4x64xf32, sliced<2>>
// CHECK-NEXT:    %[[R:.*]] = coco.all_slice %r dim = 2
// CHECK-NEXT:    %[[OUT:.*]] = coco.add %[[D]], %[[R]] {name = "out"}
// CHECK-NEXT:    %[[G:.*]] = coco.all_gather %[[OUT]] {name = "out_ag"} : !coco.tensor<4x4x64xf32, sliced<2>> -> !coco.tensor<4x4x64xf32, replicated>
// CHECK-NEXT:    func.return %[[G]]
func.func @megatron(%x: !coco.tensor<4x4x64xf32, sliced<2>>, %w: !coco.tensor<64x64xf32, sliced<0>>, %bias: !coco.tensor<64xf32, replicated>, %r: !coco.tensor<4x4x64xf32, replicated>) -> !coco.tensor<4x4x64xf32, replicated> {
  %layer = coco.matmul %x, %w {name = "layer"} : (!coco.tensor<4x4x64xf32, sliced<2>>, !coco.tensor<64x64xf32, sliced<0>>) -> !coco.tensor<4x4x64xf32, local>
  %sum = coco.all_reduce %layer reduction = sum {name = "sum"} : !coco.tensor<4x4x64xf32, local> -> !coco.tensor<4x4x64xf32, replicated>
  %biased = coco.add %sum, %bias : (!coco.tensor<4x4x64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<4x4x64xf32, replicated>
  %dropout = coco.dropout %biased p = 1.000000e-01 seed = 7 {name = "dropout"} : (!coco.tensor<4x4x64xf32, replicated>) -> !coco.tensor<4x4x64xf32, replicated>
  %out = coco.add %dropout, %r {name = "out"} : (!coco.tensor<4x4x64xf32, replicated>, !coco.tensor<4x4x64xf32, replicated>) -> !coco.tensor<4x4x64xf32, replicated>
  func.return %out : !coco.tensor<4x4x64xf32, replicated>
}

// cmp, select and convert move too. The gathered value is still returned, so
// the original all_gather stays for that use.
// CHECK-LABEL: func.func @mask
// CHECK:         %[[XG:.*]] = coco.all_gather %x {name = "gather"}
// CHECK-NEXT:    %[[POS:.*]] = coco.cmp %x, %zero predicate = gt : ({{.*}}) -> !coco.tensor<8x64xi1, sliced<1>>
// CHECK-NEXT:    %[[K:.*]] = coco.select %[[POS]], %x, %zero : ({{.*}}) -> !coco.tensor<8x64xf32, sliced<1>>
// CHECK-NEXT:    %[[H:.*]] = coco.convert %[[K]] : (!coco.tensor<8x64xf32, sliced<1>>) -> !coco.tensor<8x64xf16, sliced<1>>
// CHECK-NEXT:    %[[HG:.*]] = coco.all_gather %[[H]] : !coco.tensor<8x64xf16, sliced<1>> -> !coco.tensor<8x64xf16, replicated>
// CHECK-NEXT:    func.return %[[HG]], %[[XG]]
func.func @mask(%x: !coco.tensor<8x64xf32, sliced<1>>) -> (!coco.tensor<8x64xf16, replicated>, !coco.tensor<8x64xf32, replicated>) {
  %zero = coco.constant 0.000000e+00 : !coco.tensor<f32, replicated>
  %xg = coco.all_gather %x {name = "gather"} : !coco.tensor<8x64xf32, sliced<1>> -> !coco.tensor<8x64xf32, replicated>
  %pos = coco.cmp %xg, %zero predicate = gt : (!coco.tensor<8x64xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<8x64xi1, replicated>
  %kept = coco.select %pos, %xg, %zero : (!coco.tensor<8x64xi1, replicated>, !coco.tensor<8x64xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<8x64xf32, replicated>
  %half = coco.convert %kept : (!coco.tensor<8x64xf32, replicated>) -> !coco.tensor<8x64xf16, replicated>
  func.return %half, %xg : !coco.tensor<8x64xf16, replicated>, !coco.tensor<8x64xf32, replicated>
}

// A local operand stops the region (local with sliced is an error), and a
// matmul is not elementwise: nothing moves, the all_gather is left alone
// (refused when named).
// CHECK-LABEL: func.func @stays
// CHECK-NEXT:    %[[XG:.*]] = coco.all_gather %x {name = "stuck"}
// CHECK-NEXT:    coco.add %[[XG]], %l
// CHECK-NEXT:    coco.matmul %[[XG]], %w
func.func @stays(%x: !coco.tensor<32x32xf32, sliced<0>>, %l: !coco.tensor<32x32xf32, local>, %w: !coco.tensor<32x32xf32, replicated>) -> (!coco.tensor<32x32xf32, local>, !coco.tensor<32x32xf32, replicated>) {
  %xg = coco.all_gather %x {name = "stuck"} : !coco.tensor<32x32xf32, sliced<0>> -> !coco.tensor<32x32xf32, replicated>
  %a = coco.add %xg, %l : (!coco.tensor<32x32xf32, replicated>, !coco.tensor<32x32xf32, local>) -> !coco.tensor<32x32xf32, local>
  %y = coco.matmul %xg, %w : (!coco.tensor<32x32xf32, replicated>, !coco.tensor<32x32xf32, replicated>) -> !coco.tensor<32x32xf32, replicated>
  func.return %a, %y : !coco.tensor<32x32xf32, local>, !coco.tensor<32x32xf32, replicated>
}

// An add of a value gathered along dim 0 and one gathered along dim 1: no dim
// of the result lines up with both, so nothing moves and both all_gathers stay.
// Targeting one all_gather (`op=xrows`) moves the add onto its slices: the
// other gathered value is then a replicated operand, cut by all_slice. Naming
// both (the sed run XBOTH) is refused.
// CHECK-LABEL: func.func @cross(
// CHECK-NEXT:    %[[AG:.*]] = coco.all_gather %a {name = "xrows"}
// CHECK-NEXT:    %[[BG:.*]] = coco.all_gather %b {name = "xcols"}
// CHECK-NEXT:    %{{.*}} = coco.add %[[AG]], %[[BG]] {name = "xsum"} : (!coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
// XROWS-LABEL: func.func @cross(
// XROWS-NEXT:    %[[BG:.*]] = coco.all_gather %b {name = "xcols"}
// XROWS-NEXT:    %[[BS:.*]] = coco.all_slice %[[BG]] dim = 0 : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, sliced<0>>
// XROWS-NEXT:    %[[S:.*]] = coco.add %a, %[[BS]] {name = "xsum"} : (!coco.tensor<8x16xf32, sliced<0>>, !coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<8x16xf32, sliced<0>>
// XROWS-NEXT:    %[[SG:.*]] = coco.all_gather %[[S]] {name = "xsum_ag"}
// XROWS-NEXT:    func.return %[[SG]]
func.func @cross(%a: !coco.tensor<8x16xf32, sliced<0>>, %b: !coco.tensor<8x16xf32, sliced<1>>) -> !coco.tensor<8x16xf32, replicated> {
  %ag = coco.all_gather %a {name = "xrows"} : !coco.tensor<8x16xf32, sliced<0>> -> !coco.tensor<8x16xf32, replicated>
  %bg = coco.all_gather %b {name = "xcols"} : !coco.tensor<8x16xf32, sliced<1>> -> !coco.tensor<8x16xf32, replicated>
  %s = coco.add %ag, %bg {name = "xsum"} : (!coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  func.return %s : !coco.tensor<8x16xf32, replicated>
}

// The ops on each gathered value move onto its own slices and are gathered
// back; the add of the two (and the relu after it) stays on whole values.
// CHECK-LABEL: func.func @cross_chains
// CHECK-NEXT:    %[[E:.*]] = coco.exp %a : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<8x16xf32, sliced<0>>
// CHECK-NEXT:    %[[EG:.*]] = coco.all_gather %[[E]] : !coco.tensor<8x16xf32, sliced<0>> -> !coco.tensor<8x16xf32, replicated>
// CHECK-NEXT:    %[[M:.*]] = coco.mul %b, %c : ({{.*}}) -> !coco.tensor<8x16xf32, sliced<1>>
// CHECK-NEXT:    %[[MG:.*]] = coco.all_gather %[[M]] : !coco.tensor<8x16xf32, sliced<1>> -> !coco.tensor<8x16xf32, replicated>
// CHECK-NEXT:    %[[S:.*]] = coco.add %[[EG]], %[[MG]] : ({{.*}}) -> !coco.tensor<8x16xf32, replicated>
// CHECK-NEXT:    %[[R:.*]] = coco.relu %[[S]] : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
// CHECK-NEXT:    func.return %[[R]]
func.func @cross_chains(%a: !coco.tensor<8x16xf32, sliced<0>>, %b: !coco.tensor<8x16xf32, sliced<1>>, %c: !coco.tensor<f32, replicated>) -> !coco.tensor<8x16xf32, replicated> {
  %ag = coco.all_gather %a : !coco.tensor<8x16xf32, sliced<0>> -> !coco.tensor<8x16xf32, replicated>
  %bg = coco.all_gather %b : !coco.tensor<8x16xf32, sliced<1>> -> !coco.tensor<8x16xf32, replicated>
  %e = coco.exp %ag : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  %m = coco.mul %bg, %c : (!coco.tensor<8x16xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  %s = coco.add %e, %m : (!coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  %r = coco.relu %s : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  func.return %r : !coco.tensor<8x16xf32, replicated>
}

// Gathered along different dims of the operands that line up in the result
// (dims align from the right): both cut the result's dim 1, so the add moves.
// CHECK-LABEL: func.func @aligned
// CHECK-NEXT:    %[[S:.*]] = coco.add %x, %v : (!coco.tensor<8x16xf32, sliced<1>>, !coco.tensor<16xf32, sliced<0>>) -> !coco.tensor<8x16xf32, sliced<1>>
// CHECK-NEXT:    %[[SG:.*]] = coco.all_gather %[[S]] : !coco.tensor<8x16xf32, sliced<1>> -> !coco.tensor<8x16xf32, replicated>
// CHECK-NEXT:    func.return %[[SG]]
func.func @aligned(%x: !coco.tensor<8x16xf32, sliced<1>>, %v: !coco.tensor<16xf32, sliced<0>>) -> !coco.tensor<8x16xf32, replicated> {
  %xg = coco.all_gather %x : !coco.tensor<8x16xf32, sliced<1>> -> !coco.tensor<8x16xf32, replicated>
  %vg = coco.all_gather %v : !coco.tensor<16xf32, sliced<0>> -> !coco.tensor<16xf32, replicated>
  %s = coco.add %xg, %vg : (!coco.tensor<8x16xf32, replicated>, !coco.tensor<16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  func.return %s : !coco.tensor<8x16xf32, replicated>
}
