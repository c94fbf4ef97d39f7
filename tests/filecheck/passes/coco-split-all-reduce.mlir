// RUN: coconet-opt %s -p coco-split-all-reduce | filecheck %s
// RUN: coconet-opt %s -p 'coco-split-all-reduce{dim=1}' | filecheck %s --check-prefix=DIM1
// RUN: not coconet-opt %s -p 'coco-split-all-reduce{op=avg dim=2}' 2>&1 | filecheck %s --check-prefix=RANGE
// RUN: not coconet-opt %s -p 'coco-split-all-reduce{op=rep}' 2>&1 | filecheck %s --check-prefix=REPL
// RUN: not coconet-opt %s -p 'coco-split-all-reduce{op=nothing}' 2>&1 | filecheck %s --check-prefix=NONE
// RUN: not coconet-opt %s -p 'coco-split-all-reduce{op=odd}' 2>&1 | filecheck %s --check-prefix=ODD
// RUN: coconet-opt %s -p 'coco-split-all-reduce{op=odd world=2}' | filecheck %s --check-prefix=WORLD
// RUN: not coconet-opt %s -p 'coco-split-all-reduce{dim=-1}' 2>&1 | filecheck %s --check-prefix=NEGATIVE
// The oracle: the split program computes the same values on 2, 4 and 8 ranks.
// RUN: coconet-opt %s -p coco-split-all-reduce -o %t
// RUN: coconet-run --compare %s %t --world 2 --entry sgd
// RUN: coconet-run --compare %s %t --world 4 --entry sgd
// RUN: coconet-run --compare %s %t --world 8 --entry sgd

// Without a known world size the first dimension every world size up to 8
// divides is scattered; names follow.
// CHECK-LABEL: func.func @sgd
// CHECK-NEXT:    %{{.*}} = coco.reduce_scatter %g reduction = sum dim = 0 {name = "avg_rs"} : !coco.tensor<8x64xf32, local> -> !coco.tensor<8x64xf32, sliced<0>>
// CHECK-NEXT:    %[[AG:.*]] = coco.all_gather %{{.*}} {name = "avg_ag"} : !coco.tensor<8x64xf32, sliced<0>> -> !coco.tensor<8x64xf32, replicated>
// CHECK-NEXT:    %{{.*}} = coco.mul %lr, %[[AG]]
// CHECK-NOT:     coco.all_reduce
// DIM1-LABEL: func.func @sgd
// DIM1:         coco.reduce_scatter %g reduction = sum dim = 1
// RANGE: error: 'coco.all_reduce' op coco-split-all-reduce cannot apply: dim 2 is out of range for rank 2
// NONE: error: coco-split-all-reduce: no op named "nothing" that this pass applies to
func.func @sgd(%g: !coco.tensor<8x64xf32, local>, %w: !coco.tensor<8x64xf32, replicated>, %lr: !coco.tensor<f32, replicated>) {
  %s = coco.all_reduce %g reduction = sum {name = "avg"} : !coco.tensor<8x64xf32, local> -> !coco.tensor<8x64xf32, replicated>
  %d = coco.mul %lr, %s : (!coco.tensor<f32, replicated>, !coco.tensor<8x64xf32, replicated>) -> !coco.tensor<8x64xf32, replicated>
  %w1 = coco.sub %w, %d : (!coco.tensor<8x64xf32, replicated>, !coco.tensor<8x64xf32, replicated>) -> !coco.tensor<8x64xf32, replicated>
  coco.update %w, %w1 : !coco.tensor<8x64xf32, replicated>
  func.return
}

// A replicated operand has no reduce-scatter: skipped, or refused when named.
// CHECK-LABEL: func.func @replicated
// CHECK-NEXT:    coco.all_reduce
// REPL: error: 'coco.all_reduce' op coco-split-all-reduce cannot apply: the operand must be local to reduce-scatter, got replicated
func.func @replicated(%x: !coco.tensor<16xf32, replicated>) -> !coco.tensor<16xf32, replicated> {
  %s = coco.all_reduce %x reduction = sum {name = "rep"} : !coco.tensor<16xf32, replicated> -> !coco.tensor<16xf32, replicated>
  func.return %s : !coco.tensor<16xf32, replicated>
}

// No dimension is divisible by every world size up to 8: left alone, refused
// when named; a given world size lets the split happen.
// CHECK-LABEL: func.func @odd
// CHECK-NEXT:    coco.all_reduce
// ODD: error: 'coco.all_reduce' op coco-split-all-reduce cannot apply: no dimension of !coco.tensor<6x12xf32, local> is divisible by every world size up to 8; give the world size (option world=N or the module's coco.world_size) or the option dim
// WORLD-LABEL: func.func @odd
// WORLD-NEXT:    coco.reduce_scatter %x reduction = sum dim = 0 {name = "odd_rs"}
// NEGATIVE: coconet-opt: error: coco-split-all-reduce: dim must be >= 0, got -1
func.func @odd(%x: !coco.tensor<6x12xf32, local>) -> !coco.tensor<6x12xf32, replicated> {
  %s = coco.all_reduce %x reduction = sum {name = "odd"} : !coco.tensor<6x12xf32, local> -> !coco.tensor<6x12xf32, replicated>
  func.return %s : !coco.tensor<6x12xf32, replicated>
}
