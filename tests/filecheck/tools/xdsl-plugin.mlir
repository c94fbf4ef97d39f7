// The package is an xDSL plugin (the `xdsl.universe` entry point): plain
// xdsl-opt knows the coco dialect and the coco passes.
// RUN: xdsl-opt %s | filecheck %s
// RUN: xdsl-opt %s -p coco-split-all-reduce | filecheck %s --check-prefix=SPLIT
// RUN: xdsl-opt %s -p 'coco-optimize{overlap=false}' | filecheck %s --check-prefix=OPT

// CHECK:      func.func @sgd
// CHECK-NEXT:   coco.all_reduce %g reduction = sum : !coco.tensor<1024xf32, local> -> !coco.tensor<1024xf32, replicated>
// SPLIT:        coco.reduce_scatter %g reduction = sum dim = 0
// SPLIT-NEXT:   coco.all_gather
// OPT:          coco.fusion
// OPT:            coco.reduce_scatter
func.func @sgd(%g: !coco.tensor<1024xf32, local>) -> !coco.tensor<1024xf32, replicated> {
  %s = coco.all_reduce %g reduction = sum : !coco.tensor<1024xf32, local> -> !coco.tensor<1024xf32, replicated>
  func.return %s : !coco.tensor<1024xf32, replicated>
}
