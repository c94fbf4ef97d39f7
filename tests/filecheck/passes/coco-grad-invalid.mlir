// RUN: not coconet-opt %s -p coco-grad 2>&1 | filecheck %s
// RUN: not coconet-opt %s -p 'coco-grad{func=nothing}' 2>&1 | filecheck %s --check-prefix=NAME

// An optimizer step has no gradient: refused at the update, nothing written.
// CHECK: coco-grad-invalid.mlir:[[# @LINE + 5]]:{{[0-9]+}}: error: 'coco.update' op coco-grad cannot differentiate it: it updates a parameter (an optimizer step has no gradient)
// NAME: error: coco-grad: no function @nothing
func.func @sgd(%g: !coco.tensor<64xf32, local>, %w: !coco.tensor<64xf32, replicated>) {
  %s = coco.all_reduce %g reduction = sum : !coco.tensor<64xf32, local> -> !coco.tensor<64xf32, replicated>
  %w1 = coco.sub %w, %s : (!coco.tensor<64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
  coco.update %w, %w1 : !coco.tensor<64xf32, replicated>
  func.return
}
