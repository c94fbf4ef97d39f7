// A schedule's explicit list (CoCoNet's `reorder(ag, {m1})`): only the listed
// computations move, with the unnamed ops between the all_gather and them and
// the replicated producers only they read; the rest stays after the gather.
// RUN: coconet-opt %s -p 'coco-reorder{ops=grad_ag,m1}' | filecheck %s
// RUN: coconet-opt %s -p 'coco-reorder{ops=grad_ag,m1}' -o %t
// RUN: coconet-run --compare %s %t --world 2 --entry adam && coconet-run --compare %s %t --world 4 --entry adam && coconet-run --compare %s %t --world 8 --entry adam
// RUN: coconet-opt %s -p 'coco-reorder{ops=grad_ag,m1,v1}' | filecheck %s --check-prefix=BOTH
// Refusals name the op and leave the module as it was.
// RUN: not coconet-opt %s -p 'coco-reorder{ops=grad_ag}' 2>&1 | filecheck %s --check-prefix=NO-COMPUTATION
// RUN: not coconet-opt %s -p 'coco-reorder{ops=grad_rs,m1}' 2>&1 | filecheck %s --check-prefix=NO-GATHER
// RUN: not coconet-opt %s -p 'coco-reorder{ops=grad_ag,nope}' 2>&1 | filecheck %s --check-prefix=NO-OP
// RUN: not coconet-opt %s -p 'coco-reorder{ops=x_ag,act}' 2>&1 | filecheck %s --check-prefix=BLOCKED
// RUN: not coconet-opt %s -p 'coco-reorder{ops=x_ag,mm}' 2>&1 | filecheck %s --check-prefix=LISTED
// RUN: not coconet-opt %s -p 'coco-reorder{ops=grad_ag,m1 op=m1}' 2>&1 | filecheck %s --check-prefix=BOTH-OPTIONS

// CHECK:      func.func @adam(
// CHECK:        %grad = coco.all_gather %s {name = "grad_ag"}
// CHECK-NEXT:   %m_slice = coco.all_slice %m dim = 0
// CHECK-NEXT:   %b1m = coco.mul %b1, %m_slice : (!coco.tensor<f32, replicated>, !coco.tensor<64xf32, sliced<0>>) -> !coco.tensor<64xf32, sliced<0>>
// CHECK-NEXT:   %mg = coco.mul %b1, %s : (!coco.tensor<f32, replicated>, !coco.tensor<64xf32, sliced<0>>) -> !coco.tensor<64xf32, sliced<0>>
// CHECK-NEXT:   %m1 = coco.add %b1m, %mg {name = "m1"} : (!coco.tensor<64xf32, sliced<0>>, !coco.tensor<64xf32, sliced<0>>) -> !coco.tensor<64xf32, sliced<0>>
// CHECK-NEXT:   %m1_1 = coco.all_gather %m1 {name = "m1_ag"}
// The unlisted v1 still computes on the gathered value.
// CHECK-NEXT:   %gg = coco.mul %grad, %grad : (!coco.tensor<64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
// CHECK-NEXT:   %v1 = coco.add %v, %gg {name = "v1"} : (!coco.tensor<64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>

// BOTH:         %gg = coco.mul %s, %s : (!coco.tensor<64xf32, sliced<0>>, !coco.tensor<64xf32, sliced<0>>) -> !coco.tensor<64xf32, sliced<0>>
// BOTH-NOT:     coco.all_gather %s

// NO-COMPUTATION: error: 'coco.all_gather' op coco-reorder cannot apply: the list names no computation to move
// NO-COMPUTATION-NOT: coco.
// NO-GATHER:  error: 'coco.reduce_scatter' op coco-reorder cannot apply: the list names no coco.all_gather
// NO-OP:      coconet-opt: error: coco-reorder: no op named "nope" in a function body
// BLOCKED:    error: 'coco.relu' op coco-reorder cannot apply: 'coco.relu' at {{.*}}coco-reorder-listed.mlir:{{[0-9]+}}:3 cannot move onto the slices: 'coco.matmul' at {{.*}}coco-reorder-listed.mlir:{{[0-9]+}}:3, on its path from the all_gather, cannot move
// LISTED:     error: 'coco.matmul' op coco-reorder cannot apply: 'coco.matmul' at {{.*}} cannot move onto the slices: only elementwise ops, norms and reductions move onto slices
// BOTH-OPTIONS: coconet-opt: error: coco-reorder: give op= or ops=, not both

func.func @adam(%g: !coco.tensor<64xf32, local>, %m: !coco.tensor<64xf32, replicated>, %v: !coco.tensor<64xf32, replicated>) {
  %b1 = coco.constant 9.000000e-01 : !coco.tensor<f32, replicated>
  %b2 = coco.constant 9.990000e-01 : !coco.tensor<f32, replicated>
  %s = coco.reduce_scatter %g reduction = sum dim = 0 {name = "grad_rs"} : !coco.tensor<64xf32, local> -> !coco.tensor<64xf32, sliced<0>>
  %grad = coco.all_gather %s {name = "grad_ag"} : !coco.tensor<64xf32, sliced<0>> -> !coco.tensor<64xf32, replicated>
  %b1m = coco.mul %b1, %m : (!coco.tensor<f32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
  %mg = coco.mul %b1, %grad : (!coco.tensor<f32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
  %m1 = coco.add %b1m, %mg {name = "m1"} : (!coco.tensor<64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
  %gg = coco.mul %grad, %grad : (!coco.tensor<64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
  %v1 = coco.add %v, %gg {name = "v1"} : (!coco.tensor<64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
  coco.update %m, %m1 : !coco.tensor<64xf32, replicated>
  coco.update %v, %v1 : !coco.tensor<64xf32, replicated>
  func.return
}

func.func @blocked(%x: !coco.tensor<16x8xf32, sliced<0>>, %w: !coco.tensor<8x8xf32, replicated>) -> !coco.tensor<16x8xf32, replicated> {
  %g = coco.all_gather %x {name = "x_ag"} : !coco.tensor<16x8xf32, sliced<0>> -> !coco.tensor<16x8xf32, replicated>
  %m = coco.matmul %g, %w {name = "mm"} : (!coco.tensor<16x8xf32, replicated>, !coco.tensor<8x8xf32, replicated>) -> !coco.tensor<16x8xf32, replicated>
  %r = coco.relu %m {name = "act"} : (!coco.tensor<16x8xf32, replicated>) -> !coco.tensor<16x8xf32, replicated>
  func.return %r : !coco.tensor<16x8xf32, replicated>
}
