// coco-overlap{per_peer=true}: all_gather -> matmul (-> elementwise ...) and
// matmul (-> ...) -> reduce_scatter become one coco.per_peer region, one chunk
// per rank along the gathered or scattered dim (docs/passes/coco-overlap.md,
// "Per peer"). Every rewrite is checked by the oracle on 2, 4 and 8 ranks;
// refusals under op=NAME change nothing.

// RUN: coconet-opt %s -p 'coco-overlap{per_peer=true}' | filecheck %s
// RUN: coconet-opt %s -p 'coco-overlap{per_peer=true}' -o %t
// RUN: coconet-run --compare %s %t --entry seq_parallel --world 2 && coconet-run --compare %s %t --entry seq_parallel --world 4 && coconet-run --compare %s %t --entry seq_parallel --world 8
// RUN: coconet-run --compare %s %t --entry rhs_gathered --world 2 && coconet-run --compare %s %t --entry rhs_gathered --world 4 && coconet-run --compare %s %t --entry rhs_gathered --world 8
// RUN: coconet-run --compare %s %t --entry mm_rs --world 2 && coconet-run --compare %s %t --entry mm_rs --world 4 && coconet-run --compare %s %t --entry mm_rs --world 8
// RUN: coconet-run --compare %s %t --entry mm_rs_columns --world 2 && coconet-run --compare %s %t --entry mm_rs_columns --world 4 && coconet-run --compare %s %t --entry mm_rs_columns --world 8
// RUN: coconet-run --compare %s %t --entry contracted --world 2 && coconet-run --compare %s %t --entry contracted --world 4 && coconet-run --compare %s %t --entry contracted --world 8
// RUN: coconet-run --compare %s %t --entry mlp --world 2 && coconet-run --compare %s %t --entry mlp --world 4 && coconet-run --compare %s %t --entry mlp --world 8
// RUN: coconet-run --compare %s %t --entry untouched --world 2 && coconet-run --compare %s %t --entry untouched --world 4 && coconet-run --compare %s %t --entry untouched --world 8
// RUN: not coconet-opt %s -p 'coco-overlap{per_peer=true op=maxed}' 2>&1 | filecheck %s --check-prefix=MAX
// RUN: not coconet-opt %s -p 'coco-overlap{per_peer=true op=shared}' 2>&1 | filecheck %s --check-prefix=SHARED
// RUN: not coconet-opt %s -p 'coco-overlap{per_peer=true op=alone}' 2>&1 | filecheck %s --check-prefix=ALONE
// RUN: not coconet-opt %s -p 'coco-overlap{per_peer=true dim=1 op=seq}' 2>&1 | filecheck %s --check-prefix=DIM

// Sequence parallelism: the gathered x is cut along its sliced dim (one
// block per rank); the bias and GELU follow each chunk.
// CHECK-LABEL: func.func @seq_parallel
// CHECK-NEXT:    %y = coco.per_peer (%x, %w, %b) dims = [0, -1, -1] -> [0] {name = "seq_per_peer"} : (!coco.tensor<16x4x32xf32, sliced<0>>, !coco.tensor<32x64xf32, sliced<1>>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<16x4x64xf32, sliced<2>> {
// CHECK-NEXT:    ^bb0(%x_1: !coco.tensor<16x4x32xf32, replicated>, %w_1: !coco.tensor<32x64xf32, sliced<1>>, %b_1: !coco.tensor<64xf32, replicated>):
// CHECK-NEXT:      %m = coco.matmul %x_1, %w_1 {name = "seq"} : (!coco.tensor<16x4x32xf32, replicated>, !coco.tensor<32x64xf32, sliced<1>>) -> !coco.tensor<16x4x64xf32, sliced<2>>
// CHECK-NEXT:      %mb = coco.add %m, %b_1
// CHECK-NEXT:      %y_1 = coco.gelu %mb
// CHECK-NEXT:      coco.yield %y_1 : !coco.tensor<16x4x64xf32, sliced<2>>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %y
// DIM: error: 'coco.matmul' op coco-overlap cannot apply: dim 1 is not a dim the per-peer chunks can cut
func.func @seq_parallel(%x: !coco.tensor<16x4x32xf32, sliced<0>>, %w: !coco.tensor<32x64xf32, sliced<1>>, %b: !coco.tensor<64xf32, replicated>) -> !coco.tensor<16x4x64xf32, sliced<2>> {
  %g = coco.all_gather %x : !coco.tensor<16x4x32xf32, sliced<0>> -> !coco.tensor<16x4x32xf32, replicated>
  %m = coco.matmul %g, %w {name = "seq"} : (!coco.tensor<16x4x32xf32, replicated>, !coco.tensor<32x64xf32, sliced<1>>) -> !coco.tensor<16x4x64xf32, sliced<2>>
  %mb = coco.add %m, %b : (!coco.tensor<16x4x64xf32, sliced<2>>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<16x4x64xf32, sliced<2>>
  %y = coco.gelu %mb : (!coco.tensor<16x4x64xf32, sliced<2>>) -> !coco.tensor<16x4x64xf32, sliced<2>>
  func.return %y : !coco.tensor<16x4x64xf32, sliced<2>>
}

// The gathered operand on the right: its column blocks are the chunks, the
// result's columns are assembled.
// CHECK-LABEL: func.func @rhs_gathered
// CHECK-NEXT:    %y = coco.per_peer (%w, %a) dims = [1, -1] -> [1] {name = "rhs_per_peer"}
// CHECK-NEXT:    ^bb0(%w_1: !coco.tensor<32x64xf32, replicated>, %a_1: !coco.tensor<8x32xf32, replicated>):
func.func @rhs_gathered(%a: !coco.tensor<8x32xf32, replicated>, %w: !coco.tensor<32x64xf32, sliced<1>>) -> !coco.tensor<8x64xf32, replicated> {
  %g = coco.all_gather %w : !coco.tensor<32x64xf32, sliced<1>> -> !coco.tensor<32x64xf32, replicated>
  %y = coco.matmul %a, %g {name = "rhs"} : (!coco.tensor<8x32xf32, replicated>, !coco.tensor<32x64xf32, replicated>) -> !coco.tensor<8x64xf32, replicated>
  func.return %y : !coco.tensor<8x64xf32, replicated>
}

// matmul -> reduce_scatter: the body yields the partial sums of one block
// of rows; the region's result is sliced along them.
// CHECK-LABEL: func.func @mm_rs
// CHECK-NEXT:    %c = coco.per_peer (%a, %b) dims = [0, -1] -> [0] {name = "rs_per_peer"} : (!coco.tensor<32x64xbf16, sliced<1>>, !coco.tensor<64x32xbf16, sliced<0>>) -> !coco.tensor<32x32xbf16, sliced<0>> {
// CHECK-NEXT:    ^bb0(%a_1: !coco.tensor<32x64xbf16, sliced<1>>, %b_1: !coco.tensor<64x32xbf16, sliced<0>>):
// CHECK-NEXT:      %p = coco.matmul %a_1, %b_1 {name = "rs"} : {{.*}} -> !coco.tensor<32x32xbf16, local>
// CHECK-NEXT:      coco.yield %p : !coco.tensor<32x32xbf16, local>
func.func @mm_rs(%a: !coco.tensor<32x64xbf16, sliced<1>>, %b: !coco.tensor<64x32xbf16, sliced<0>>) -> !coco.tensor<32x32xbf16, sliced<0>> {
  %p = coco.matmul %a, %b {name = "rs"} : (!coco.tensor<32x64xbf16, sliced<1>>, !coco.tensor<64x32xbf16, sliced<0>>) -> !coco.tensor<32x32xbf16, local>
  %c = coco.reduce_scatter %p reduction = sum dim = 0 : !coco.tensor<32x32xbf16, local> -> !coco.tensor<32x32xbf16, sliced<0>>
  func.return %c : !coco.tensor<32x32xbf16, sliced<0>>
}

// Scattered along the columns: the rhs's columns are the chunks.
// CHECK-LABEL: func.func @mm_rs_columns
// CHECK-NEXT:    coco.per_peer (%a, %b) dims = [-1, 1] -> [1]
func.func @mm_rs_columns(%a: !coco.tensor<32x64xf32, sliced<1>>, %b: !coco.tensor<64x32xf32, sliced<0>>) -> !coco.tensor<32x32xf32, sliced<1>> {
  %p = coco.matmul %a, %b : (!coco.tensor<32x64xf32, sliced<1>>, !coco.tensor<64x32xf32, sliced<0>>) -> !coco.tensor<32x32xf32, local>
  %c = coco.reduce_scatter %p reduction = sum dim = 1 : !coco.tensor<32x32xf32, local> -> !coco.tensor<32x32xf32, sliced<1>>
  func.return %c : !coco.tensor<32x32xf32, sliced<1>>
}

// The gathered dim is the contracted one, on the left or on the right: each
// step multiplies one block of K and the output is the sum of the steps
// (output dim -1); nothing follows a partial product into the region.
// CHECK-LABEL: func.func @contracted
// CHECK-NEXT:    %c = coco.per_peer (%x, %w) dims = [1, 0] -> [-1] {name = "lhs_k_per_peer"}
// CHECK-NEXT:    ^bb0(%x_1: !coco.tensor<16x64xf32, replicated>, %w_1: !coco.tensor<64x32xf32, sliced<1>>):
// CHECK-NEXT:      %c_1 = coco.matmul %x_1, %w_1
// CHECK-NEXT:      coco.yield %c_1 : !coco.tensor<16x32xf32, sliced<1>>
// CHECK:         %e = coco.per_peer (%u, %a) dims = [0, 1] -> [-1] {name = "rhs_k_per_peer"}
// CHECK:         %r = coco.relu %c
func.func @contracted(%x: !coco.tensor<16x64xf32, sliced<1>>, %w: !coco.tensor<64x32xf32, sliced<1>>, %a: !coco.tensor<16x64xf32, replicated>, %u: !coco.tensor<64x32xf32, sliced<0>>) -> (!coco.tensor<16x32xf32, sliced<1>>, !coco.tensor<16x32xf32, replicated>) {
  %g = coco.all_gather %x : !coco.tensor<16x64xf32, sliced<1>> -> !coco.tensor<16x64xf32, replicated>
  %c = coco.matmul %g, %w {name = "lhs_k"} : (!coco.tensor<16x64xf32, replicated>, !coco.tensor<64x32xf32, sliced<1>>) -> !coco.tensor<16x32xf32, sliced<1>>
  %ug = coco.all_gather %u : !coco.tensor<64x32xf32, sliced<0>> -> !coco.tensor<64x32xf32, replicated>
  %e = coco.matmul %a, %ug {name = "rhs_k"} : (!coco.tensor<16x64xf32, replicated>, !coco.tensor<64x32xf32, replicated>) -> !coco.tensor<16x32xf32, replicated>
  %r = coco.relu %c : (!coco.tensor<16x32xf32, sliced<1>>) -> !coco.tensor<16x32xf32, sliced<1>>
  func.return %r, %e : !coco.tensor<16x32xf32, sliced<1>>, !coco.tensor<16x32xf32, replicated>
}

// The transformer MLP with sequence parallelism: gather, fc1, GELU, dropout
// (its mask kept), fc2 and the reduce_scatter in one region.
// CHECK-LABEL: func.func @mlp
// CHECK-NEXT:    %y = coco.per_peer (%x, %w1, %w2) dims = [0, -1, -1] -> [0] {name = "fc1_per_peer"}
// CHECK-COUNT-2:   coco.matmul
// CHECK:           coco.yield %p : !coco.tensor<16x4x32xf32, local>
func.func @mlp(%x: !coco.tensor<16x4x32xf32, sliced<0>>, %w1: !coco.tensor<32x64xf32, sliced<1>>, %w2: !coco.tensor<64x32xf32, sliced<0>>) -> !coco.tensor<16x4x32xf32, sliced<0>> {
  %a = coco.all_gather %x : !coco.tensor<16x4x32xf32, sliced<0>> -> !coco.tensor<16x4x32xf32, replicated>
  %h = coco.matmul %a, %w1 {name = "fc1"} : (!coco.tensor<16x4x32xf32, replicated>, !coco.tensor<32x64xf32, sliced<1>>) -> !coco.tensor<16x4x64xf32, sliced<2>>
  %g = coco.gelu %h : (!coco.tensor<16x4x64xf32, sliced<2>>) -> !coco.tensor<16x4x64xf32, sliced<2>>
  %d = coco.dropout %g p = 0.1 seed = 3 : (!coco.tensor<16x4x64xf32, sliced<2>>) -> !coco.tensor<16x4x64xf32, sliced<2>>
  %p = coco.matmul %d, %w2 {name = "fc2"} : (!coco.tensor<16x4x64xf32, sliced<2>>, !coco.tensor<64x32xf32, sliced<0>>) -> !coco.tensor<16x4x32xf32, local>
  %y = coco.reduce_scatter %p reduction = sum dim = 0 : !coco.tensor<16x4x32xf32, local> -> !coco.tensor<16x4x32xf32, sliced<0>>
  func.return %y : !coco.tensor<16x4x32xf32, sliced<0>>
}

// Not decomposable per peer: left alone untargeted, refused by name.
// CHECK-LABEL: func.func @untouched
// CHECK-NOT:     coco.per_peer
// MAX: error: 'coco.matmul' op coco-overlap cannot apply: the reduce_scatter reduces by max, not sum
// SHARED: error: 'coco.matmul' op coco-overlap cannot apply: the gathered value !coco.tensor<16x32xf32, replicated> has other users
// ALONE: error: 'coco.matmul' op coco-overlap cannot apply: no all_gather feeds it and no reduce_scatter ends its chain of only users (expected all_gather -> matmul or matmul -> reduce_scatter)
func.func @untouched(%w: !coco.tensor<32x16xf32, replicated>, %l: !coco.tensor<16x32xf32, local>, %v: !coco.tensor<16x32xf32, sliced<0>>) -> (!coco.tensor<16x16xf32, sliced<0>>, !coco.tensor<16x16xf32, replicated>, !coco.tensor<16x32xf32, replicated>, !coco.tensor<16x16xf32, local>) {
  %p = coco.matmul %l, %w {name = "maxed"} : (!coco.tensor<16x32xf32, local>, !coco.tensor<32x16xf32, replicated>) -> !coco.tensor<16x16xf32, local>
  %m = coco.reduce_scatter %p reduction = max dim = 0 : !coco.tensor<16x16xf32, local> -> !coco.tensor<16x16xf32, sliced<0>>
  %vg = coco.all_gather %v : !coco.tensor<16x32xf32, sliced<0>> -> !coco.tensor<16x32xf32, replicated>
  %s = coco.matmul %vg, %w {name = "shared"} : (!coco.tensor<16x32xf32, replicated>, !coco.tensor<32x16xf32, replicated>) -> !coco.tensor<16x16xf32, replicated>
  %a = coco.matmul %l, %w {name = "alone"} : (!coco.tensor<16x32xf32, local>, !coco.tensor<32x16xf32, replicated>) -> !coco.tensor<16x16xf32, local>
  func.return %m, %s, %vg, %a : !coco.tensor<16x16xf32, sliced<0>>, !coco.tensor<16x16xf32, replicated>, !coco.tensor<16x32xf32, replicated>, !coco.tensor<16x16xf32, local>
}

// coco-fuse after per peer: the body's elementwise chain becomes one kernel
// per step (what coco-optimize does).
// RUN: coconet-opt %s -p 'coco-overlap{per_peer=true op=seq},coco-fuse' | filecheck %s --check-prefix=FUSED
// FUSED-LABEL: func.func @seq_parallel
// FUSED:         coco.per_peer
// FUSED:           coco.matmul
// FUSED-NEXT:      coco.fusion
// FUSED-NEXT:      ^bb0
// FUSED-NEXT:        coco.add
// FUSED-NEXT:        coco.gelu
