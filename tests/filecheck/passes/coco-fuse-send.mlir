// RUN: coconet-opt %s -p coco-fuse-send | filecheck %s
// RUN: coconet-opt %s -p 'coco-split-all-reduce{dim=1},coco-fuse-send' | filecheck %s --check-prefix=SPLIT
// RUN: coconet-opt %s -p 'coco-fuse-send{op=send_ag}' | filecheck %s --check-prefix=ONE
// RUN: not coconet-opt %s -p 'coco-fuse-send{op=send_ar}' 2>&1 | filecheck %s --check-prefix=ERR-AR
// RUN: not coconet-opt %s -p 'coco-fuse-send{op=send_add}' 2>&1 | filecheck %s --check-prefix=ERR-ADD
// RUN: not coconet-opt %s -p 'coco-fuse-send{op=nothing}' 2>&1 | filecheck %s --check-prefix=ERR-NONE
// The oracle: every stage's outputs agree on 2, 4 and 8 ranks.
// RUN: coconet-opt %s -p coco-fuse-send -o %t
// RUN: coconet-run --compare %s %t --world 2
// RUN: coconet-run --compare %s %t --world 4
// RUN: coconet-run --compare %s %t --world 8
// RUN: coconet-opt %s -p 'coco-split-all-reduce,coco-fuse-send' -o %t.split
// RUN: coconet-run --compare %s %t.split --world 2
// RUN: coconet-run --compare %s %t.split --world 4
// RUN: coconet-run --compare %s %t.split --world 8

// One pipeline of three stages. @a sends a gathered tensor to @b and @c (its
// all_gather goes once both sends take the slice), the result of an all_reduce
// (fused only after coco-split-all-reduce), the result of an add (never
// fused), and a gathered tensor that @a also returns (its all_gather stays).

// CHECK-LABEL: func.func @a
// CHECK-NEXT:    %[[S:.*]] = coco.reduce_scatter %g
// CHECK-NOT:     coco.all_gather %[[S]]
// CHECK-NEXT:    coco.send %[[S]] to @b channel = 0 {name = "send_ag"} : !coco.tensor<8x16xf32, sliced<0>>
// CHECK-NEXT:    coco.send %[[S]] to @c channel = 0 {name = "send_ag_c"} : !coco.tensor<8x16xf32, sliced<0>>
// CHECK-NEXT:    %[[AR:.*]] = coco.all_reduce %g
// CHECK-NEXT:    coco.send %[[AR]] to @b channel = 1 {name = "send_ar"} : !coco.tensor<8x16xf32, replicated>
// CHECK-NEXT:    %[[ADD:.*]] = coco.add
// CHECK-NEXT:    coco.send %[[ADD]] to @b channel = 2 {name = "send_add"} : !coco.tensor<8x16xf32, replicated>
// CHECK-NEXT:    %[[XG:.*]] = coco.all_gather %x {name = "xg"}
// CHECK-NEXT:    coco.send %x to @c channel = 1 {name = "send_xg"} : !coco.tensor<8x16xf32, sliced<1>>
// CHECK-NEXT:    func.return %[[XG]]
// CHECK-LABEL: func.func @b
// CHECK-NEXT:    %[[B0:.*]] = coco.recv from @a channel = 0 {name = "b0"} : !coco.tensor<8x16xf32, sliced<0>>
// CHECK-NEXT:    %[[G0:.*]] = coco.all_gather %[[B0]] {name = "b0_ag"} : !coco.tensor<8x16xf32, sliced<0>> -> !coco.tensor<8x16xf32, replicated>
// CHECK-NEXT:    %[[B1:.*]] = coco.recv from @a channel = 1 : !coco.tensor<8x16xf32, replicated>
// CHECK-NEXT:    %[[B2:.*]] = coco.recv from @a channel = 2 : !coco.tensor<8x16xf32, replicated>
// CHECK-NEXT:    func.return %[[G0]], %[[B1]], %[[B2]]
// CHECK-LABEL: func.func @c
// CHECK-NEXT:    %[[C0:.*]] = coco.recv from @a channel = 0 : !coco.tensor<8x16xf32, sliced<0>>
// CHECK-NEXT:    %[[G1:.*]] = coco.all_gather %[[C0]] : !coco.tensor<8x16xf32, sliced<0>> -> !coco.tensor<8x16xf32, replicated>
// CHECK-NEXT:    %[[C1:.*]] = coco.recv from @a channel = 1 : !coco.tensor<8x16xf32, sliced<1>>
// CHECK-NEXT:    %[[G2:.*]] = coco.all_gather %[[C1]] : !coco.tensor<8x16xf32, sliced<1>> -> !coco.tensor<8x16xf32, replicated>
// CHECK-NEXT:    %[[M:.*]] = coco.matmul %[[G1]], %w
// CHECK-NEXT:    %{{.*}} = coco.add %[[M]], %[[G2]]

// After the split, the all_reduce's send is fused too.
// SPLIT-LABEL: func.func @a
// SPLIT:         %[[RS:.*]] = coco.reduce_scatter %g reduction = sum dim = 1 {name = "ar_rs"}
// SPLIT-NEXT:    coco.send %[[RS]] to @b channel = 1 {name = "send_ar"} : !coco.tensor<8x16xf32, sliced<1>>
// SPLIT-NOT:     name = "ar_ag"
// SPLIT-LABEL: func.func @b
// SPLIT:         coco.recv from @a channel = 1 : !coco.tensor<8x16xf32, sliced<1>>
// SPLIT-NEXT:    coco.all_gather

// Only the named send: the all_gather stays for the other send.
// ONE-LABEL: func.func @a
// ONE-NEXT:    %[[S:.*]] = coco.reduce_scatter %g
// ONE-NEXT:    %[[AG:.*]] = coco.all_gather %[[S]] {name = "ag"}
// ONE-NEXT:    coco.send %[[S]] to @b channel = 0 {name = "send_ag"} : !coco.tensor<8x16xf32, sliced<0>>
// ONE-NEXT:    coco.send %[[AG]] to @c channel = 0 {name = "send_ag_c"} : !coco.tensor<8x16xf32, replicated>
// ONE:         coco.send %{{.*}} to @c channel = 1 {name = "send_xg"} : !coco.tensor<8x16xf32, replicated>
// ONE-LABEL: func.func @b
// ONE-NEXT:    coco.recv from @a channel = 0 {name = "b0"} : !coco.tensor<8x16xf32, sliced<0>>
// ONE-NEXT:    coco.all_gather
// ONE-LABEL: func.func @c
// ONE-NEXT:    coco.recv from @a channel = 0 : !coco.tensor<8x16xf32, replicated>
// ONE-NEXT:    coco.recv from @a channel = 1 : !coco.tensor<8x16xf32, replicated>

// ERR-AR: coco-fuse-send.mlir:[[# @LINE + 14]]:3: error: 'coco.send' op coco-fuse-send cannot apply: the sent value comes from a coco.all_reduce: split the all_reduce first (coco-split-all-reduce)
// ERR-ADD: coco-fuse-send.mlir:[[# @LINE + 15]]:3: error: 'coco.send' op coco-fuse-send cannot apply: the sent value must come from a coco.all_gather, it comes from 'coco.add' (move the gather after the compute first: coco-reorder)
// ERR-NONE: error: coco-fuse-send: no op named "nothing" that this pass applies to
// The refusals print no module.
// ERR-AR-NOT: builtin.module
// ERR-ADD-NOT: builtin.module
func.func @a(%g: !coco.tensor<8x16xf32, local>,
             %x: !coco.tensor<8x16xf32, sliced<1>>,
             %y: !coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated> {
  %s = coco.reduce_scatter %g reduction = sum dim = 0 : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, sliced<0>>
  %ag = coco.all_gather %s {name = "ag"} : !coco.tensor<8x16xf32, sliced<0>> -> !coco.tensor<8x16xf32, replicated>
  coco.send %ag to @b channel = 0 {name = "send_ag"} : !coco.tensor<8x16xf32, replicated>
  coco.send %ag to @c channel = 0 {name = "send_ag_c"} : !coco.tensor<8x16xf32, replicated>
  %ar = coco.all_reduce %g reduction = sum {name = "ar"} : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, replicated>
  coco.send %ar to @b channel = 1 {name = "send_ar"} : !coco.tensor<8x16xf32, replicated>
  %sum = coco.add %y, %y {name = "add"} : (!coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  coco.send %sum to @b channel = 2 {name = "send_add"} : !coco.tensor<8x16xf32, replicated>
  %xg = coco.all_gather %x {name = "xg"} : !coco.tensor<8x16xf32, sliced<1>> -> !coco.tensor<8x16xf32, replicated>
  coco.send %xg to @c channel = 1 {name = "send_xg"} : !coco.tensor<8x16xf32, replicated>
  func.return %xg : !coco.tensor<8x16xf32, replicated>
}

func.func @b() -> (!coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, replicated>) {
  %b0 = coco.recv from @a channel = 0 {name = "b0"} : !coco.tensor<8x16xf32, replicated>
  %b1 = coco.recv from @a channel = 1 : !coco.tensor<8x16xf32, replicated>
  %b2 = coco.recv from @a channel = 2 : !coco.tensor<8x16xf32, replicated>
  func.return %b0, %b1, %b2 : !coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, replicated>
}

func.func @c(%w: !coco.tensor<16x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated> {
  %c0 = coco.recv from @a channel = 0 : !coco.tensor<8x16xf32, replicated>
  %c1 = coco.recv from @a channel = 1 : !coco.tensor<8x16xf32, replicated>
  %m = coco.matmul %c0, %w : (!coco.tensor<8x16xf32, replicated>, !coco.tensor<16x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  %e = coco.add %m, %c1 : (!coco.tensor<8x16xf32, replicated>, !coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  func.return %e : !coco.tensor<8x16xf32, replicated>
}
