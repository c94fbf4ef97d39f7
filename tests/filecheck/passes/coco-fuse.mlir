// coco-fuse: reduce_scatter + compute on the slices + all_gather become one
// coco.fusion; leftover elementwise chains become their own; refusals under
// op=NAME leave the module unchanged. Every rewrite is checked by the oracle.

// RUN: coconet-opt %s -p coco-fuse | filecheck %s
// RUN: coconet-opt %s -p coco-fuse -o %t
// RUN: coconet-run --compare %s %t --entry sliced_sgd --world 2 && coconet-run --compare %s %t --entry sliced_sgd --world 4 && coconet-run --compare %s %t --entry sliced_sgd --world 8
// RUN: coconet-run --compare %s %t --entry row_parallel --world 2 && coconet-run --compare %s %t --entry row_parallel --world 4 && coconet-run --compare %s %t --entry row_parallel --world 8
// RUN: coconet-run --compare %s %t --entry norm_cycle --world 2 && coconet-run --compare %s %t --entry norm_cycle --world 4 && coconet-run --compare %s %t --entry norm_cycle --world 8
// RUN: coconet-run --compare %s %t --entry rms_rows --world 2 && coconet-run --compare %s %t --entry rms_rows --world 4 && coconet-run --compare %s %t --entry rms_rows --world 8
// RUN: coconet-run --compare %s %t --entry twice --world 2 && coconet-run --compare %s %t --entry twice --world 4 && coconet-run --compare %s %t --entry twice --world 8
// RUN: coconet-opt %s -p 'coco-fuse{op=grad_rs}' | filecheck %s --check-prefix=ONE
// RUN: coconet-opt %s -p 'coco-fuse{op=cyc_rs}' | filecheck %s --check-prefix=THROUGH
// RUN: coconet-opt %s -p 'coco-fuse{reductions=false}' | filecheck %s --check-prefix=NORED
// RUN: coconet-opt %s -p 'coco-fuse{op=cyc_rs reductions=false}' | filecheck %s --check-prefix=NORED
// RUN: not coconet-opt %s -p 'coco-fuse{op=cut_rs reductions=false}' 2>&1 | filecheck %s --check-prefix=CYCLE
// RUN: coconet-opt %s -p 'coco-fuse{op=true_rs}' | filecheck %s --check-prefix=TRUE
// RUN: coconet-opt %s -p 'coco-fuse{ops=cyc_rs,cyc_ar}' | filecheck %s --check-prefix=LIST
// RUN: not coconet-opt %s -p 'coco-fuse{ops=dup_a,dup_b}' 2>&1 | filecheck %s --check-prefix=LISTDUP
// RUN: coconet-run --compare %s %t --entry true_cycle --world 2 && coconet-run --compare %s %t --entry true_cycle --world 4 && coconet-run --compare %s %t --entry true_cycle --world 8
// RUN: coconet-run --compare %s %t --entry cut_cycle --world 2 && coconet-run --compare %s %t --entry cut_cycle --world 4 && coconet-run --compare %s %t --entry cut_cycle --world 8
// RUN: not coconet-opt %s -p 'coco-fuse{op=dup_a}' 2>&1 | filecheck %s --check-prefix=DUP
// RUN: not coconet-opt %s -p 'coco-fuse{op=lone}' 2>&1 | filecheck %s --check-prefix=LONE
// RUN: not coconet-opt %s -p 'coco-fuse{op=nothing}' 2>&1 | filecheck %s --check-prefix=MISSING

// The fused all-reduce of a reordered SGD step: the all_slice of %w joins.
// CHECK-LABEL: func.func @sliced_sgd
// CHECK-NEXT:    %w1 = coco.fusion (%g, %lr, %w) {name = "grad_rs_fused"}
// CHECK-NEXT:    ^bb0(%g_1: {{.*}}, %lr_1: {{.*}}, %w_1: {{.*}}):
// CHECK-NEXT:      coco.reduce_scatter %g_1
// CHECK-NEXT:      coco.mul %lr_1,
// CHECK-NEXT:      coco.all_slice %w_1
// CHECK-NEXT:      coco.sub
// CHECK-NEXT:      coco.all_gather
// CHECK-NEXT:      coco.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    coco.update %w, %w1
// ONE-LABEL:   func.func @sliced_sgd
// ONE-NEXT:      coco.fusion (%g, %lr, %w) {name = "grad_rs_fused"}
// ONE-LABEL:   func.func @row_parallel
// ONE-NOT:       coco.fusion
func.func @sliced_sgd(%g: !coco.tensor<64xf32, local>, %w: !coco.tensor<64xf32, replicated>, %lr: !coco.tensor<f32, replicated>) {
  %s = coco.reduce_scatter %g reduction = sum dim = 0 {name = "grad_rs"} : !coco.tensor<64xf32, local> -> !coco.tensor<64xf32, sliced<0>>
  %d = coco.mul %lr, %s : (!coco.tensor<f32, replicated>, !coco.tensor<64xf32, sliced<0>>) -> !coco.tensor<64xf32, sliced<0>>
  %ws = coco.all_slice %w dim = 0 : (!coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, sliced<0>>
  %w1s = coco.sub %ws, %d : (!coco.tensor<64xf32, sliced<0>>, !coco.tensor<64xf32, sliced<0>>) -> !coco.tensor<64xf32, sliced<0>>
  %w1 = coco.all_gather %w1s : !coco.tensor<64xf32, sliced<0>> -> !coco.tensor<64xf32, replicated>
  coco.update %w, %w1 : !coco.tensor<64xf32, replicated>
  func.return
}

// Megatron's layer after split (no reorder): the fused all-reduce is just
// reduce_scatter + all_gather; the elementwise tail (with its dropout) is a
// chain of its own, named after its first named op.
// CHECK-LABEL: func.func @row_parallel
// CHECK:         %sum = coco.fusion (%layer) {name = "sum_rs_fused"}
// CHECK:           coco.reduce_scatter
// CHECK-NEXT:      coco.all_gather
// CHECK-NEXT:      coco.yield
// CHECK:         %out = coco.fusion (%sum, %bias, %r) {name = "dropout_fused"}
// CHECK:           coco.add
// CHECK-NEXT:      coco.dropout
// CHECK-NEXT:      coco.add
// CHECK-NEXT:      coco.yield
// CHECK:         func.return %out
func.func @row_parallel(%x: !coco.tensor<4x8x64xf32, sliced<2>>, %w: !coco.tensor<64x64xf32, sliced<0>>, %bias: !coco.tensor<64xf32, replicated>, %r: !coco.tensor<4x8x64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated> {
  %layer = coco.matmul %x, %w {name = "layer"} : (!coco.tensor<4x8x64xf32, sliced<2>>, !coco.tensor<64x64xf32, sliced<0>>) -> !coco.tensor<4x8x64xf32, local>
  %rs = coco.reduce_scatter %layer reduction = sum dim = 1 {name = "sum_rs"} : !coco.tensor<4x8x64xf32, local> -> !coco.tensor<4x8x64xf32, sliced<1>>
  %sum = coco.all_gather %rs {name = "sum_ag"} : !coco.tensor<4x8x64xf32, sliced<1>> -> !coco.tensor<4x8x64xf32, replicated>
  %biased = coco.add %sum, %bias : (!coco.tensor<4x8x64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated>
  %dropout = coco.dropout %biased p = 1.000000e-01 seed = 7 {name = "dropout"} : (!coco.tensor<4x8x64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated>
  %out = coco.add %dropout, %r {name = "out"} : (!coco.tensor<4x8x64xf32, replicated>, !coco.tensor<4x8x64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated>
  func.return %out : !coco.tensor<4x8x64xf32, replicated>
}

// LAMB-like: %u needs the norm of a group value. The group grows through the
// slice reduction and the scalar all_reduce completing it: ONE fusion holding
// reduce_scatter -> compute -> reduce -> all_reduce -> compute -> all_gather.
// CHECK-LABEL: func.func @norm_cycle
// CHECK-NEXT:    %r = coco.fusion (%g) {name = "cyc_rs_fused"}
// CHECK:           coco.reduce_scatter
// CHECK-NEXT:      coco.mul
// CHECK-NEXT:      coco.reduce
// CHECK-NEXT:      coco.all_reduce
// CHECK-NEXT:      coco.mul
// CHECK-NEXT:      coco.all_gather
// CHECK-NEXT:      coco.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %r
// An explicit stage list: the listed ops and what lies between them, no more
// (the mul and all_gather after the all_reduce stay outside).
// LIST-LABEL: func.func @norm_cycle
// LIST-NEXT:    %sq, %t = coco.fusion (%g) {name = "cyc_rs_fused"}
// LIST:           coco.reduce_scatter
// LIST-NEXT:      coco.mul
// LIST-NEXT:      coco.reduce
// LIST-NEXT:      coco.all_reduce
// LIST-NEXT:      coco.yield
// LIST:         coco.mul %t, %sq
// LIST-NEXT:    coco.all_gather
// LISTDUP: error: 'coco.reduce_scatter' op coco-fuse cannot apply: the group would hold two reductions of the same data
// THROUGH-LABEL: func.func @norm_cycle
// THROUGH-NEXT:    coco.fusion (%g) {name = "cyc_rs_fused"}
// Without reductions (coco-optimize's setting until the lowering makes such a
// region one kernel) the all_reduce is outside: %u would close a cycle
// through it. The group stops before %u, targeted (`op=cyc_rs`) or not: a
// targeted fuse outlines the region the default fuse makes.
// NORED-LABEL: func.func @norm_cycle
// NORED-NEXT:    %sq = coco.fusion (%g) {name = "cyc_rs_fused"}
// NORED:           coco.reduce_scatter
// NORED-NEXT:      coco.mul
// NORED-NEXT:      coco.yield
// NORED:         coco.reduce %sq
// NORED:         coco.all_reduce
// NORED:         coco.mul
// NORED-NEXT:    coco.all_gather
func.func @norm_cycle(%g: !coco.tensor<64xf32, local>) -> !coco.tensor<64xf32, replicated> {
  %s = coco.reduce_scatter %g reduction = sum dim = 0 {name = "cyc_rs"} : !coco.tensor<64xf32, local> -> !coco.tensor<64xf32, sliced<0>>
  %sq = coco.mul %s, %s : (!coco.tensor<64xf32, sliced<0>>, !coco.tensor<64xf32, sliced<0>>) -> !coco.tensor<64xf32, sliced<0>>
  %part = coco.reduce %sq kind = sum dims = [0] : (!coco.tensor<64xf32, sliced<0>>) -> !coco.tensor<f32, local>
  %t = coco.all_reduce %part reduction = sum {name = "cyc_ar"} : !coco.tensor<f32, local> -> !coco.tensor<f32, replicated>
  %u = coco.mul %t, %sq : (!coco.tensor<f32, replicated>, !coco.tensor<64xf32, sliced<0>>) -> !coco.tensor<64xf32, sliced<0>>
  %r = coco.all_gather %u : !coco.tensor<64xf32, sliced<0>> -> !coco.tensor<64xf32, replicated>
  func.return %r : !coco.tensor<64xf32, replicated>
}

// A true cycle: the norm of the gathered value is not something a fused
// kernel computes (a replicated value, reduced on every rank), so %u, which
// needs it and the slice %sq, would close a cycle through it: the group
// stops before it, targeted (`op=true_rs`, issue 25) or not.
// CHECK-LABEL: func.func @true_cycle
// CHECK-NEXT:    %{{.*}}, %{{.*}} = coco.fusion (%g) {name = "true_rs_fused"}
// CHECK:         coco.norm
// TRUE-LABEL: func.func @true_cycle
// TRUE-NEXT:    %sq, %x = coco.fusion (%g) {name = "true_rs_fused"}
// TRUE:           coco.reduce_scatter
// TRUE-NEXT:      coco.mul
// TRUE-NEXT:      coco.all_gather
// TRUE-NEXT:      coco.yield
// TRUE-NEXT:    }
// TRUE-NEXT:    coco.norm %x
// TRUE-NEXT:    coco.mul
// TRUE-NEXT:    coco.all_gather
func.func @true_cycle(%g: !coco.tensor<64xf32, local>) -> !coco.tensor<64xf32, replicated> {
  %s = coco.reduce_scatter %g reduction = sum dim = 0 {name = "true_rs"} : !coco.tensor<64xf32, local> -> !coco.tensor<64xf32, sliced<0>>
  %sq = coco.mul %s, %s : (!coco.tensor<64xf32, sliced<0>>, !coco.tensor<64xf32, sliced<0>>) -> !coco.tensor<64xf32, sliced<0>>
  %x = coco.all_gather %sq : !coco.tensor<64xf32, sliced<0>> -> !coco.tensor<64xf32, replicated>
  %t = coco.norm %x : (!coco.tensor<64xf32, replicated>) -> !coco.tensor<f32, replicated>
  %u = coco.mul %t, %sq : (!coco.tensor<f32, replicated>, !coco.tensor<64xf32, sliced<0>>) -> !coco.tensor<64xf32, sliced<0>>
  %r = coco.all_gather %u : !coco.tensor<64xf32, sliced<0>> -> !coco.tensor<64xf32, replicated>
  func.return %r : !coco.tensor<64xf32, replicated>
}

// A genuine cycle: without reductions, the one op that would join the
// reduce_scatter (%u) needs its slice and, through the reduction and the
// all_reduce, a value computed from it. The default fuse leaves the lone
// reduce_scatter; targeted, the pass refuses and says which path closes the
// cycle.
// CHECK-LABEL: func.func @cut_cycle
// CHECK-NEXT:    coco.fusion (%g) {name = "cut_rs_fused"}
// NORED-LABEL: func.func @cut_cycle
// NORED-NEXT:    coco.reduce_scatter
// CYCLE: error: 'coco.reduce_scatter' op coco-fuse cannot apply: fusing would create a cycle: 'coco.mul' at {{.*}}coco-fuse.mlir:[[# @LINE + 5]]:{{[0-9]+}} uses a group value through 'coco.all_reduce' at {{.*}}coco-fuse.mlir:[[# @LINE + 4]]:{{[0-9]+}}, which is outside the group
func.func @cut_cycle(%g: !coco.tensor<64xf32, local>) -> !coco.tensor<64xf32, sliced<0>> {
  %s = coco.reduce_scatter %g reduction = sum dim = 0 {name = "cut_rs"} : !coco.tensor<64xf32, local> -> !coco.tensor<64xf32, sliced<0>>
  %part = coco.reduce %s kind = sum dims = [0] : (!coco.tensor<64xf32, sliced<0>>) -> !coco.tensor<f32, local>
  %t = coco.all_reduce %part reduction = sum : !coco.tensor<f32, local> -> !coco.tensor<f32, replicated>
  %u = coco.mul %t, %s : (!coco.tensor<f32, replicated>, !coco.tensor<64xf32, sliced<0>>) -> !coco.tensor<64xf32, sliced<0>>
  func.return %u : !coco.tensor<64xf32, sliced<0>>
}

// Two reductions of the same %g meet in %c: they stay apart.
// CHECK-LABEL: func.func @twice
// CHECK-NOT:     coco.fusion
// CHECK:         coco.reduce_scatter %g
// CHECK:         coco.reduce_scatter %g
// CHECK:         coco.add
// DUP: error: 'coco.reduce_scatter' op coco-fuse cannot apply: the group would hold two reductions of the same data: 'coco.reduce_scatter' at {{.*}}:[[# @LINE + 2]]:{{[0-9]+}} and at {{.*}}:[[# @LINE + 3]]:
func.func @twice(%g: !coco.tensor<64xf32, local>) -> !coco.tensor<64xf32, sliced<0>> {
  %a = coco.reduce_scatter %g reduction = sum dim = 0 {name = "dup_a"} : !coco.tensor<64xf32, local> -> !coco.tensor<64xf32, sliced<0>>
  %b = coco.reduce_scatter %g reduction = max dim = 0 {name = "dup_b"} : !coco.tensor<64xf32, local> -> !coco.tensor<64xf32, sliced<0>>
  %c = coco.add %a, %b : (!coco.tensor<64xf32, sliced<0>>, !coco.tensor<64xf32, sliced<0>>) -> !coco.tensor<64xf32, sliced<0>>
  func.return %c : !coco.tensor<64xf32, sliced<0>>
}

// A reduce_scatter with nothing to fuse: left alone, refused when targeted.
// CHECK-LABEL: func.func @alone
// CHECK-NEXT:    coco.reduce_scatter
// CHECK-NEXT:    func.return
// LONE: error: 'coco.reduce_scatter' op coco-fuse cannot apply: there is nothing to fuse it with
// MISSING: error: coco-fuse: no op named "nothing" that this pass applies to
func.func @alone(%g: !coco.tensor<64xf32, local>) -> !coco.tensor<64xf32, sliced<0>> {
  %a = coco.reduce_scatter %g reduction = sum dim = 0 {name = "lone"} : !coco.tensor<64xf32, local> -> !coco.tensor<64xf32, sliced<0>>
  func.return %a : !coco.tensor<64xf32, sliced<0>>
}

// A norm's row statistics join the group (docs/passes/coco-fuse.md): the
// RMSNorm of the reduced rows, its keep-dims reduction and the arithmetic
// on the rows included, is one region with the all_gather; the constant
// stays outside.
// CHECK-LABEL: func.func @rms_rows
// CHECK-NEXT:    %eps = coco.constant
// CHECK-NEXT:    %g = coco.fusion (%p, %eps) {name = "rows_rs_fused"}
// CHECK:           coco.reduce_scatter %p_1
// CHECK-NEXT:      coco.mul
// CHECK-NEXT:      coco.reduce %{{.*}} kind = sum dims = [1] keep_dims
// CHECK-NEXT:      coco.add
// CHECK-NEXT:      coco.rsqrt
// CHECK-NEXT:      coco.mul
// CHECK-NEXT:      coco.all_gather
// CHECK-NEXT:      coco.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %g
func.func @rms_rows(%p: !coco.tensor<16x64xf32, local>) -> !coco.tensor<16x64xf32, replicated> {
  %eps = coco.constant 1.000000e-05 : !coco.tensor<f32, replicated>
  %h = coco.reduce_scatter %p reduction = sum dim = 0 {name = "rows_rs"} : !coco.tensor<16x64xf32, local> -> !coco.tensor<16x64xf32, sliced<0>>
  %sq = coco.mul %h, %h : (!coco.tensor<16x64xf32, sliced<0>>, !coco.tensor<16x64xf32, sliced<0>>) -> !coco.tensor<16x64xf32, sliced<0>>
  %ss = coco.reduce %sq kind = sum dims = [1] keep_dims : (!coco.tensor<16x64xf32, sliced<0>>) -> !coco.tensor<16x1xf32, sliced<0>>
  %v = coco.add %ss, %eps : (!coco.tensor<16x1xf32, sliced<0>>, !coco.tensor<f32, replicated>) -> !coco.tensor<16x1xf32, sliced<0>>
  %r = coco.rsqrt %v : (!coco.tensor<16x1xf32, sliced<0>>) -> !coco.tensor<16x1xf32, sliced<0>>
  %n = coco.mul %h, %r : (!coco.tensor<16x64xf32, sliced<0>>, !coco.tensor<16x1xf32, sliced<0>>) -> !coco.tensor<16x64xf32, sliced<0>>
  %g = coco.all_gather %n : !coco.tensor<16x64xf32, sliced<0>> -> !coco.tensor<16x64xf32, replicated>
  func.return %g : !coco.tensor<16x64xf32, replicated>
}
