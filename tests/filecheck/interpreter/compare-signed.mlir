// coconet-run --compare also runs both programs on signed inputs (floats in
// [-1, 1)): a rewrite that agrees on the default, non-negative inputs only is
// not equivalent, and the difference says "with signed inputs". The wrong
// rewrites come from this file by sed: an abs inserted on the gradient before
// the SGD update, and the layer's relu dropped. (No %s, %t or %p in the sed
// scripts: lit would substitute them.)

// RUN: coconet-run --compare %s %s --world 2 --entry sgd | filecheck %s --check-prefix=SELF
// RUN: coconet-run --compare %s %s --world 8 --entry layer | filecheck %s --check-prefix=SELF8

// RUN: sed -e 's/^  %upd = coco.mul %lr, %grad/  %mag = coco.abs %grad : (!coco.tensor<64x16xf32, replicated>) -> !coco.tensor<64x16xf32, replicated>\n  %upd = coco.mul %lr, %mag/' %s > %t.abs.mlir
// RUN: not coconet-run --compare %s %t.abs.mlir --world 2 --entry sgd | filecheck %s --check-prefix=ABS -DN=2
// RUN: not coconet-run --compare %s %t.abs.mlir --world 4 --entry sgd | filecheck %s --check-prefix=ABS -DN=4
// RUN: not coconet-run --compare %s %t.abs.mlir --world 8 --entry sgd | filecheck %s --check-prefix=ABS -DN=8

// RUN: sed -e '/coco.relu/d' -e 's/func.return %y/func.return %h/' %s > %t.norelu.mlir
// RUN: not coconet-run --compare %s %t.norelu.mlir --world 2 --entry layer | filecheck %s --check-prefix=RELU -DN=2
// RUN: not coconet-run --compare %s %t.norelu.mlir --world 4 --entry layer | filecheck %s --check-prefix=RELU -DN=4
// RUN: not coconet-run --compare %s %t.norelu.mlir --world 8 --entry layer | filecheck %s --check-prefix=RELU -DN=8

// SELF:  equivalent: 1 output agrees on 2 ranks (seed 0)
// SELF8: equivalent: 1 output agrees on 8 ranks (seed 0)
// ABS:       not equivalent: sgd.arg1 differs on [[N]] ranks (seed 0): max abs error {{[0-9.]+e[+-][0-9]+}}, max rel error {{[0-9.]+e[+-][0-9]+$}}
// ABS-NEXT:  with signed inputs: sgd.arg1: max abs error
// RELU:      not equivalent: layer.result0 differs on [[N]] ranks (seed 0)
// RELU-NEXT: with signed inputs: layer.result0: max abs error

func.func @sgd(%g: !coco.tensor<64x16xf32, local>, %w: !coco.tensor<64x16xf32, replicated>, %lr: !coco.tensor<f32, replicated>) {
  %grad = coco.all_reduce %g reduction = sum : !coco.tensor<64x16xf32, local> -> !coco.tensor<64x16xf32, replicated>
  %upd = coco.mul %lr, %grad : (!coco.tensor<f32, replicated>, !coco.tensor<64x16xf32, replicated>) -> !coco.tensor<64x16xf32, replicated>
  %w1 = coco.sub %w, %upd : (!coco.tensor<64x16xf32, replicated>, !coco.tensor<64x16xf32, replicated>) -> !coco.tensor<64x16xf32, replicated>
  coco.update %w, %w1 : !coco.tensor<64x16xf32, replicated>
  func.return
}

func.func @layer(%p: !coco.tensor<16x8xf32, local>, %bias: !coco.tensor<8xf32, replicated>) -> !coco.tensor<16x8xf32, replicated> {
  %sum = coco.all_reduce %p reduction = sum : !coco.tensor<16x8xf32, local> -> !coco.tensor<16x8xf32, replicated>
  %h = coco.add %sum, %bias : (!coco.tensor<16x8xf32, replicated>, !coco.tensor<8xf32, replicated>) -> !coco.tensor<16x8xf32, replicated>
  %y = coco.relu %h : (!coco.tensor<16x8xf32, replicated>) -> !coco.tensor<16x8xf32, replicated>
  func.return %y : !coco.tensor<16x8xf32, replicated>
}
