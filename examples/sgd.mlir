// Data-parallel SGD, the program of docs/dialect.md, "Programs" (CoCoNet's
// running example): every rank holds its own gradient %g (local); an
// all_reduce sums them, then every rank applies w <- w - lr * sum.
// Built in Python by examples/sgd.py.
//
// Run: coconet-run examples/sgd.mlir --world 4

func.func @sgd(%g: !coco.tensor<1024xf32, local>,
               %w: !coco.tensor<1024xf32, replicated>,
               %lr: !coco.tensor<f32, replicated>) {
  %sum = coco.all_reduce %g reduction = sum {name = "sum"} : !coco.tensor<1024xf32, local> -> !coco.tensor<1024xf32, replicated>
  %step = coco.mul %lr, %sum : (!coco.tensor<f32, replicated>, !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated>
  %w1 = coco.sub %w, %step : (!coco.tensor<1024xf32, replicated>, !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated>
  coco.update %w, %w1 : !coco.tensor<1024xf32, replicated>
  func.return
}
