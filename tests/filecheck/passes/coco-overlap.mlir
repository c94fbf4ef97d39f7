// coco-overlap: a matmul and the collective it feeds (or is fed by) become a
// coco.overlap region run chunk by chunk. Every rewrite is checked by the
// oracle on 2, 4 and 8 ranks; refusals under op=NAME change nothing.

// RUN: coconet-opt %s -p coco-overlap | filecheck %s
// RUN: coconet-opt %s -p coco-overlap -o %t
// RUN: coconet-run --compare %s %t --entry row_parallel --world 2 && coconet-run --compare %s %t --entry row_parallel --world 4 && coconet-run --compare %s %t --entry row_parallel --world 8
// RUN: coconet-run --compare %s %t --entry seq_parallel --world 2 && coconet-run --compare %s %t --entry seq_parallel --world 4 && coconet-run --compare %s %t --entry seq_parallel --world 8
// RUN: coconet-run --compare %s %t --entry mm_rs --world 2 && coconet-run --compare %s %t --entry mm_rs --world 4 && coconet-run --compare %s %t --entry mm_rs --world 8
// RUN: coconet-opt %s -p 'coco-fuse,coco-overlap{chunks=2}' | filecheck %s --check-prefix=FUSED
// RUN: coconet-opt %s -p 'coco-fuse,coco-overlap{chunks=2}' -o %t.fused
// RUN: coconet-run --compare %s %t.fused --entry sliced_layer --world 2 && coconet-run --compare %s %t.fused --entry sliced_layer --world 4 && coconet-run --compare %s %t.fused --entry sliced_layer --world 8
// RUN: coconet-opt %s -p 'coco-overlap{chunks=2 dim=1 op=layer}' | filecheck %s --check-prefix=DIM
// RUN: coconet-opt %s -p 'coco-overlap{chunks=2 dim=1 op=layer}' -o %t.dim
// RUN: coconet-run --compare %s %t.dim --entry row_parallel --world 2 && coconet-run --compare %s %t.dim --entry row_parallel --world 4 && coconet-run --compare %s %t.dim --entry row_parallel --world 8
// RUN: not coconet-opt %s -p 'coco-overlap{chunks=3 op=layer}' 2>&1 | filecheck %s --check-prefix=THREE
// RUN: not coconet-opt %s -p 'coco-overlap{dim=2 op=gathered}' 2>&1 | filecheck %s --check-prefix=SLICEDDIM
// RUN: not coconet-opt %s -p 'coco-overlap{op=flat}' 2>&1 | filecheck %s --check-prefix=FLAT
// RUN: not coconet-opt %s -p 'coco-overlap{op=alone}' 2>&1 | filecheck %s --check-prefix=ALONE

// Megatron's layer, matmul -> all_reduce: chunked along the batch dim.
// CHECK-LABEL: func.func @row_parallel
// CHECK-NEXT:    %sum = coco.overlap chunks = 4 (%x, %w) dims = [0, -1] -> [0] {name = "layer_overlap"} : (!coco.tensor<4x8x64xf32, sliced<2>>, !coco.tensor<64x64xf32, sliced<0>>) -> !coco.tensor<4x8x64xf32, replicated> {
// CHECK-NEXT:    ^bb0(%x_1: !coco.tensor<1x8x64xf32, sliced<2>>, %w_1: !coco.tensor<64x64xf32, sliced<0>>):
// CHECK-NEXT:      %layer = coco.matmul %x_1, %w_1 {name = "layer"} : {{.*}} -> !coco.tensor<1x8x64xf32, local>
// CHECK-NEXT:      %sum_1 = coco.all_reduce %layer reduction = sum : !coco.tensor<1x8x64xf32, local> -> !coco.tensor<1x8x64xf32, replicated>
// CHECK-NEXT:      coco.yield %sum_1 : !coco.tensor<1x8x64xf32, replicated>
// CHECK-NEXT:    }
// CHECK-NEXT:    %out = coco.add %sum, %bias
// DIM-LABEL:   func.func @row_parallel
// DIM-NEXT:      coco.overlap chunks = 2 (%x, %w) dims = [1, -1] -> [1]
// DIM-LABEL:   func.func @seq_parallel
// DIM-NOT:       coco.overlap
// THREE: error: 'coco.matmul' op coco-overlap cannot apply: no chunkable dim (dim 0: 3 chunks do not divide dim 0 of !coco.tensor<4x8x64xf32, sliced<2>>; dim 1: 3 chunks do not divide dim 1 of {{.*}}; dim 2: 3 chunks do not divide dim 1 of !coco.tensor<64x64xf32, sliced<0>>)
func.func @row_parallel(%x: !coco.tensor<4x8x64xf32, sliced<2>>, %w: !coco.tensor<64x64xf32, sliced<0>>, %bias: !coco.tensor<64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated> {
  %layer = coco.matmul %x, %w {name = "layer"} : (!coco.tensor<4x8x64xf32, sliced<2>>, !coco.tensor<64x64xf32, sliced<0>>) -> !coco.tensor<4x8x64xf32, local>
  %sum = coco.all_reduce %layer reduction = sum : !coco.tensor<4x8x64xf32, local> -> !coco.tensor<4x8x64xf32, replicated>
  %out = coco.add %sum, %bias : (!coco.tensor<4x8x64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated>
  func.return %out : !coco.tensor<4x8x64xf32, replicated>
}

// Sequence parallelism, all_gather -> matmul: S is sliced and H contracted, so
// the chunks cut B.
// CHECK-LABEL: func.func @seq_parallel
// CHECK-NEXT:    %y = coco.overlap chunks = 4 (%x, %w) dims = [1, -1] -> [1] {name = "gathered_overlap"}
// CHECK-NEXT:    ^bb0(%x_1: !coco.tensor<16x2x32xf32, sliced<0>>, %w_1: !coco.tensor<32x64xf32, sliced<1>>):
// CHECK-NEXT:      %full = coco.all_gather %x_1 : !coco.tensor<16x2x32xf32, sliced<0>> -> !coco.tensor<16x2x32xf32, replicated>
// CHECK-NEXT:      %y_1 = coco.matmul %full, %w_1 {name = "gathered"} : {{.*}} -> !coco.tensor<16x2x64xf32, sliced<2>>
// CHECK-NEXT:      coco.yield %y_1
// SLICEDDIM: error: 'coco.matmul' op coco-overlap cannot apply: cannot chunk along dim 2: dim 1 is the sliced dim of !coco.tensor<32x64xf32, sliced<1>>
func.func @seq_parallel(%x: !coco.tensor<16x8x32xf32, sliced<0>>, %w: !coco.tensor<32x64xf32, sliced<1>>) -> !coco.tensor<16x8x64xf32, sliced<2>> {
  %full = coco.all_gather %x : !coco.tensor<16x8x32xf32, sliced<0>> -> !coco.tensor<16x8x32xf32, replicated>
  %y = coco.matmul %full, %w {name = "gathered"} : (!coco.tensor<16x8x32xf32, replicated>, !coco.tensor<32x64xf32, sliced<1>>) -> !coco.tensor<16x8x64xf32, sliced<2>>
  func.return %y : !coco.tensor<16x8x64xf32, sliced<2>>
}

// A 2-D [S, H] sequence-parallel input has no dim to chunk: left alone.
// CHECK-LABEL: func.func @flat_seq
// CHECK-NEXT:    coco.all_gather
// CHECK-NEXT:    coco.matmul
// FLAT: error: 'coco.matmul' op coco-overlap cannot apply: no chunkable dim (dim 0: dim 0 is the sliced dim of !coco.tensor<64x32xf32, sliced<0>>; dim 1: dim 1 is the sliced dim of !coco.tensor<32x64xf32, sliced<1>>)
func.func @flat_seq(%x: !coco.tensor<64x32xf32, sliced<0>>, %w: !coco.tensor<32x64xf32, sliced<1>>) -> !coco.tensor<64x64xf32, sliced<1>> {
  %full = coco.all_gather %x : !coco.tensor<64x32xf32, sliced<0>> -> !coco.tensor<64x32xf32, replicated>
  %y = coco.matmul %full, %w {name = "flat"} : (!coco.tensor<64x32xf32, replicated>, !coco.tensor<32x64xf32, sliced<1>>) -> !coco.tensor<64x64xf32, sliced<1>>
  func.return %y : !coco.tensor<64x64xf32, sliced<1>>
}

// matmul -> reduce_scatter along dim 0: the chunks cut dim 1 (the rhs columns).
// CHECK-LABEL: func.func @mm_rs
// CHECK-NEXT:    %c = coco.overlap chunks = 4 (%a, %b) dims = [-1, 1] -> [1]
// CHECK-NEXT:    ^bb0(%a_1: !coco.tensor<32x64xf32, sliced<1>>, %b_1: !coco.tensor<64x8xf32, sliced<0>>):
// CHECK-NEXT:      coco.matmul
// CHECK-NEXT:      coco.reduce_scatter {{.*}} -> !coco.tensor<32x8xf32, sliced<0>>
func.func @mm_rs(%a: !coco.tensor<32x64xf32, sliced<1>>, %b: !coco.tensor<64x32xf32, sliced<0>>) -> !coco.tensor<32x32xf32, sliced<0>> {
  %p = coco.matmul %a, %b : (!coco.tensor<32x64xf32, sliced<1>>, !coco.tensor<64x32xf32, sliced<0>>) -> !coco.tensor<32x32xf32, local>
  %c = coco.reduce_scatter %p reduction = sum dim = 0 : !coco.tensor<32x32xf32, local> -> !coco.tensor<32x32xf32, sliced<0>>
  func.return %c : !coco.tensor<32x32xf32, sliced<0>>
}

// Megatron's layer after split and reorder: coco-fuse makes one fusion with
// the dropout inside, and the overlap holds the matmul and that fusion. The
// residual is chunked with the batch, the bias passed whole; the dropout keeps
// its mask (the oracle checks it).
// FUSED-LABEL: func.func @sliced_layer
// FUSED-NEXT:    %ag = coco.overlap chunks = 2 (%x, %w, %bias, %r) dims = [0, -1, -1, 0] -> [0] {name = "sliced_overlap"}
// FUSED-NEXT:    ^bb0(%x_1: !coco.tensor<2x8x64xf32, sliced<2>>, %w_1: {{.*}}, %bias_1: !coco.tensor<64xf32, replicated>, %r_1: !coco.tensor<2x8x64xf32, replicated>):
// FUSED-NEXT:      %layer = coco.matmul %x_1, %w_1
// FUSED-NEXT:      %ag_1 = coco.fusion (%layer, %bias_1, %r_1) {name = "sl_rs_fused"}
// FUSED:             coco.dropout {{.*}} : (!coco.tensor<2x8x64xf32, sliced<1>>) -> !coco.tensor<2x8x64xf32, sliced<1>>
// FUSED:             coco.all_gather {{.*}} : !coco.tensor<2x8x64xf32, sliced<1>> -> !coco.tensor<2x8x64xf32, replicated>
// FUSED:           coco.yield %ag_1
// FUSED-NEXT:    }
// FUSED-NEXT:    func.return %ag
func.func @sliced_layer(%x: !coco.tensor<4x8x64xf32, sliced<2>>, %w: !coco.tensor<64x64xf32, sliced<0>>, %bias: !coco.tensor<64xf32, replicated>, %r: !coco.tensor<4x8x64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated> {
  %layer = coco.matmul %x, %w {name = "sliced"} : (!coco.tensor<4x8x64xf32, sliced<2>>, !coco.tensor<64x64xf32, sliced<0>>) -> !coco.tensor<4x8x64xf32, local>
  %rs = coco.reduce_scatter %layer reduction = sum dim = 1 {name = "sl_rs"} : !coco.tensor<4x8x64xf32, local> -> !coco.tensor<4x8x64xf32, sliced<1>>
  %biased = coco.add %rs, %bias : (!coco.tensor<4x8x64xf32, sliced<1>>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<4x8x64xf32, sliced<1>>
  %drop = coco.dropout %biased p = 1.000000e-01 seed = 7 : (!coco.tensor<4x8x64xf32, sliced<1>>) -> !coco.tensor<4x8x64xf32, sliced<1>>
  %rsl = coco.all_slice %r dim = 1 : (!coco.tensor<4x8x64xf32, replicated>) -> !coco.tensor<4x8x64xf32, sliced<1>>
  %out = coco.add %drop, %rsl : (!coco.tensor<4x8x64xf32, sliced<1>>, !coco.tensor<4x8x64xf32, sliced<1>>) -> !coco.tensor<4x8x64xf32, sliced<1>>
  %ag = coco.all_gather %out : !coco.tensor<4x8x64xf32, sliced<1>> -> !coco.tensor<4x8x64xf32, replicated>
  func.return %ag : !coco.tensor<4x8x64xf32, replicated>
}

// A matmul with no collective next to it is left alone.
// CHECK-LABEL: func.func @lonely
// CHECK-NEXT:    coco.matmul
// ALONE: error: 'coco.matmul' op coco-overlap cannot apply: no collective feeds or consumes it
func.func @lonely(%a: !coco.tensor<8x8xf32, replicated>) -> !coco.tensor<8x8xf32, replicated> {
  %p = coco.matmul %a, %a {name = "alone"} : (!coco.tensor<8x8xf32, replicated>, !coco.tensor<8x8xf32, replicated>) -> !coco.tensor<8x8xf32, replicated>
  func.return %p : !coco.tensor<8x8xf32, replicated>
}
