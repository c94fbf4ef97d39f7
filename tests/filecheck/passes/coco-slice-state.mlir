// RUN: coconet-opt %s -p coco-split-all-reduce,coco-reorder,coco-slice-state | filecheck %s
// RUN: coconet-opt %s -p 'coco-split-all-reduce,coco-reorder,coco-slice-state{weights=true}' | filecheck %s --check-prefix=WEIGHTS
// RUN: coconet-opt %s -p 'coco-split-all-reduce,coco-reorder,coco-slice-state{op=w_update}' | filecheck %s --check-prefix=NAMED
// RUN: not coconet-opt %s -p 'coco-slice-state{op=sliced_update}' 2>&1 | filecheck %s --check-prefix=NOT-REPLICATED
// RUN: not coconet-opt %s -p 'coco-slice-state{op=plain_update}' 2>&1 | filecheck %s --check-prefix=NOT-GATHERED
// RUN: not coconet-opt %s -p 'coco-slice-state{op=norm_update}' 2>&1 | filecheck %s --check-prefix=USED-WHOLE
// RUN: not coconet-opt %s -p 'coco-slice-state{op=dim_update}' 2>&1 | filecheck %s --check-prefix=OTHER-DIM
// RUN: not coconet-opt %s -p 'coco-slice-state{op=nothing}' 2>&1 | filecheck %s --check-prefix=NONE
// The oracle: the parameters' global values agree on 2, 4 and 8 ranks.
// RUN: coconet-opt %s -p coco-split-all-reduce,coco-reorder,coco-slice-state -o %t
// RUN: coconet-run --compare %s %t --world 2 --entry adam_like && coconet-run --compare %s %t --world 4 --entry adam_like && coconet-run --compare %s %t --world 8 --entry adam_like
// RUN: coconet-run --compare %s %t --world 2 --entry columns && coconet-run --compare %s %t --world 4 --entry columns && coconet-run --compare %s %t --world 8 --entry columns
// RUN: coconet-opt %s -p 'coco-split-all-reduce,coco-reorder,coco-slice-state{weights=true}' -o %t.weights
// RUN: coconet-run --compare %s %t.weights --world 2 --entry adam_like && coconet-run --compare %s %t.weights --world 4 --entry adam_like && coconet-run --compare %s %t.weights --world 8 --entry adam_like

// A refusal prints the reason and no module (the module is left as it was).
// NOT-REPLICATED:     error: 'coco.update' op coco-slice-state cannot apply: parameter %p is sliced<0>, not replicated
// NOT-REPLICATED-NOT: coco.
// NOT-GATHERED:       error: 'coco.update' op coco-slice-state cannot apply: the new value is not produced by a coco.all_gather (run coco-split-all-reduce and coco-reorder first)
// NOT-GATHERED-NOT:   coco.
// USED-WHOLE:         error: 'coco.update' op coco-slice-state cannot apply: parameter %p is used by 'coco.norm', not only through coco.all_slice dim = 0
// USED-WHOLE-NOT:     coco.
// OTHER-DIM:          error: 'coco.update' op coco-slice-state cannot apply: parameter %p is cut along dim 1 by a coco.all_slice, but its new value is gathered along dim 0
// OTHER-DIM-NOT:      coco.
// NONE:               error: coco-slice-state: no op named "nothing" that this pass applies to
// NONE-NOT:           coco.

// Adam's moments m and v are only read through their slices and their new
// values feed the step: they stay sliced, their all_gathers are gone. The
// weights' new value is only stored: w stays replicated (unless weights=true,
// or its update is named).
// CHECK-LABEL: func.func @adam_like
// CHECK-SAME:    %w: !coco.tensor<64xf32, replicated>, %m: !coco.tensor<64xf32, sliced<0>>, %v: !coco.tensor<64xf32, sliced<0>>
// CHECK-NOT:     coco.all_slice %m
// CHECK-NOT:     coco.all_slice %v
// CHECK:         %[[B1M:.*]] = coco.mul %b1, %m : (!coco.tensor<f32, replicated>, !coco.tensor<64xf32, sliced<0>>) -> !coco.tensor<64xf32, sliced<0>>
// CHECK-NEXT:    %[[M1:.*]] = coco.add %[[B1M]], %{{.*}} : ({{.*}}) -> !coco.tensor<64xf32, sliced<0>>
// CHECK:         %[[B2V:.*]] = coco.mul %b2, %v :
// CHECK-NEXT:    %[[V1:.*]] = coco.add %[[B2V]], %{{.*}} : ({{.*}}) -> !coco.tensor<64xf32, sliced<0>>
// CHECK:         %[[W:.*]] = coco.all_slice %w dim = 0
// CHECK-NEXT:    %[[W1:.*]] = coco.sub %[[W]], %{{.*}}
// CHECK-NEXT:    %[[W1G:.*]] = coco.all_gather %[[W1]]
// CHECK-NEXT:    coco.update %w, %[[W1G]] {name = "w_update"} : !coco.tensor<64xf32, replicated>
// CHECK-NEXT:    coco.update %m, %[[M1]] {name = "m_update"} : !coco.tensor<64xf32, sliced<0>>
// CHECK-NEXT:    coco.update %v, %[[V1]] : !coco.tensor<64xf32, sliced<0>>
// CHECK-NEXT:    func.return
// WEIGHTS-LABEL: func.func @adam_like
// WEIGHTS-SAME:    %w: !coco.tensor<64xf32, sliced<0>>, %m: !coco.tensor<64xf32, sliced<0>>, %v: !coco.tensor<64xf32, sliced<0>>
// WEIGHTS-NOT:     coco.all_gather
// WEIGHTS:         %[[W1:.*]] = coco.sub %w, %{{.*}} : ({{.*}}) -> !coco.tensor<64xf32, sliced<0>>
// WEIGHTS-NEXT:    coco.update %w, %[[W1]] {name = "w_update"} : !coco.tensor<64xf32, sliced<0>>
// NAMED-LABEL: func.func @adam_like
// NAMED-SAME:    %w: !coco.tensor<64xf32, sliced<0>>, %m: !coco.tensor<64xf32, replicated>, %v: !coco.tensor<64xf32, replicated>
// NAMED:         coco.update %w, %{{.*}} {name = "w_update"} : !coco.tensor<64xf32, sliced<0>>
// NAMED-NEXT:    coco.update %m, %{{.*}} {name = "m_update"} : !coco.tensor<64xf32, replicated>
func.func @adam_like(%g: !coco.tensor<64xf32, local>, %w: !coco.tensor<64xf32, replicated>, %m: !coco.tensor<64xf32, replicated>, %v: !coco.tensor<64xf32, replicated>, %lr: !coco.tensor<f32, replicated>) {
  %b1 = coco.constant 9.000000e-01 : !coco.tensor<f32, replicated>
  %b2 = coco.constant 9.990000e-01 : !coco.tensor<f32, replicated>
  %eps = coco.constant 1.000000e-08 : !coco.tensor<f32, replicated>
  %grad = coco.all_reduce %g reduction = sum {name = "grad"} : !coco.tensor<64xf32, local> -> !coco.tensor<64xf32, replicated>
  %b1m = coco.mul %b1, %m : (!coco.tensor<f32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
  %m1 = coco.add %b1m, %grad : (!coco.tensor<64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
  %gg = coco.mul %grad, %grad : (!coco.tensor<64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
  %b2v = coco.mul %b2, %v : (!coco.tensor<f32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
  %v1 = coco.add %b2v, %gg : (!coco.tensor<64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
  %root = coco.sqrt %v1 : (!coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
  %denom = coco.add %root, %eps : (!coco.tensor<64xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<64xf32, replicated>
  %ratio = coco.div %m1, %denom : (!coco.tensor<64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
  %step = coco.mul %lr, %ratio : (!coco.tensor<f32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
  %w1 = coco.sub %w, %step : (!coco.tensor<64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
  coco.update %w, %w1 {name = "w_update"} : !coco.tensor<64xf32, replicated>
  coco.update %m, %m1 {name = "m_update"} : !coco.tensor<64xf32, replicated>
  coco.update %v, %v1 : !coco.tensor<64xf32, replicated>
  func.return
}

// State cut along dim 1; the gathered new value is also returned, so that
// all_gather stays (for the return only).
// CHECK-LABEL: func.func @columns
// CHECK-SAME:    %m: !coco.tensor<16x32xf32, sliced<1>>) -> !coco.tensor<16x32xf32, replicated>
// CHECK-NEXT:    %[[M1:.*]] = coco.add %m, %s : (!coco.tensor<16x32xf32, sliced<1>>, !coco.tensor<16x32xf32, sliced<1>>) -> !coco.tensor<16x32xf32, sliced<1>>
// CHECK-NEXT:    %[[G:.*]] = coco.all_gather %[[M1]]
// CHECK-NEXT:    coco.update %m, %[[M1]] : !coco.tensor<16x32xf32, sliced<1>>
// CHECK-NEXT:    func.return %[[G]]
func.func @columns(%s: !coco.tensor<16x32xf32, sliced<1>>, %m: !coco.tensor<16x32xf32, replicated>) -> !coco.tensor<16x32xf32, replicated> {
  %m_slice = coco.all_slice %m dim = 1 : (!coco.tensor<16x32xf32, replicated>) -> !coco.tensor<16x32xf32, sliced<1>>
  %m1 = coco.add %m_slice, %s : (!coco.tensor<16x32xf32, sliced<1>>, !coco.tensor<16x32xf32, sliced<1>>) -> !coco.tensor<16x32xf32, sliced<1>>
  %m1_ag = coco.all_gather %m1 : !coco.tensor<16x32xf32, sliced<1>> -> !coco.tensor<16x32xf32, replicated>
  coco.update %m, %m1_ag : !coco.tensor<16x32xf32, replicated>
  func.return %m1_ag : !coco.tensor<16x32xf32, replicated>
}

// The refusals' inputs: untargeted, the pass leaves them alone.
// CHECK-LABEL: func.func @not_replicated
// CHECK:         coco.update %p, %p1 {name = "sliced_update"} : !coco.tensor<64xf32, sliced<0>>
func.func @not_replicated(%p: !coco.tensor<64xf32, sliced<0>>, %s: !coco.tensor<64xf32, sliced<0>>) {
  %p1 = coco.add %p, %s : (!coco.tensor<64xf32, sliced<0>>, !coco.tensor<64xf32, sliced<0>>) -> !coco.tensor<64xf32, sliced<0>>
  coco.update %p, %p1 {name = "sliced_update"} : !coco.tensor<64xf32, sliced<0>>
  func.return
}

// CHECK-LABEL: func.func @not_gathered
// CHECK:         coco.update %p, %p1 {name = "plain_update"} : !coco.tensor<64xf32, replicated>
func.func @not_gathered(%p: !coco.tensor<64xf32, replicated>, %d: !coco.tensor<64xf32, replicated>) {
  %p1 = coco.sub %p, %d : (!coco.tensor<64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
  coco.update %p, %p1 {name = "plain_update"} : !coco.tensor<64xf32, replicated>
  func.return
}

// CHECK-LABEL: func.func @used_whole(%p: !coco.tensor<64xf32, replicated>
// CHECK:         coco.update %p, %p1_ag {name = "norm_update"} : !coco.tensor<64xf32, replicated>
func.func @used_whole(%p: !coco.tensor<64xf32, replicated>, %s: !coco.tensor<64xf32, sliced<0>>) -> !coco.tensor<f32, replicated> {
  %p_slice = coco.all_slice %p dim = 0 : (!coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, sliced<0>>
  %p1 = coco.add %p_slice, %s : (!coco.tensor<64xf32, sliced<0>>, !coco.tensor<64xf32, sliced<0>>) -> !coco.tensor<64xf32, sliced<0>>
  %p1_ag = coco.all_gather %p1 : !coco.tensor<64xf32, sliced<0>> -> !coco.tensor<64xf32, replicated>
  %n = coco.norm %p : (!coco.tensor<64xf32, replicated>) -> !coco.tensor<f32, replicated>
  coco.update %p, %p1_ag {name = "norm_update"} : !coco.tensor<64xf32, replicated>
  func.return %n : !coco.tensor<f32, replicated>
}

// CHECK-LABEL: func.func @other_dim(%p: !coco.tensor<16x32xf32, replicated>
// CHECK:         coco.update %p, %p1_ag {name = "dim_update"} : !coco.tensor<16x32xf32, replicated>
func.func @other_dim(%p: !coco.tensor<16x32xf32, replicated>, %s: !coco.tensor<16x32xf32, sliced<0>>) {
  %p_cols = coco.all_slice %p dim = 1 : (!coco.tensor<16x32xf32, replicated>) -> !coco.tensor<16x32xf32, sliced<1>>
  %p_rows = coco.all_gather %p_cols : !coco.tensor<16x32xf32, sliced<1>> -> !coco.tensor<16x32xf32, replicated>
  %p_slice = coco.all_slice %p_rows dim = 0 : (!coco.tensor<16x32xf32, replicated>) -> !coco.tensor<16x32xf32, sliced<0>>
  %p1 = coco.add %p_slice, %s : (!coco.tensor<16x32xf32, sliced<0>>, !coco.tensor<16x32xf32, sliced<0>>) -> !coco.tensor<16x32xf32, sliced<0>>
  %p1_ag = coco.all_gather %p1 : !coco.tensor<16x32xf32, sliced<0>> -> !coco.tensor<16x32xf32, replicated>
  coco.update %p, %p1_ag {name = "dim_update"} : !coco.tensor<16x32xf32, replicated>
  func.return
}
