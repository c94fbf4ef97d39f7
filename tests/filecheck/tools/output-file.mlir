// coconet-opt -o FILE writes FILE only on success: a refusing pass or a bad
// input leaves its old content, as mlir-opt does.

// RUN: echo '// old output' > %t.out.mlir
// RUN: not coconet-opt %s -p 'coco-split-all-reduce{op=nope}' -o %t.out.mlir 2>&1 | filecheck %s --check-prefix=REFUSED
// RUN: filecheck %s --check-prefix=KEPT --input-file=%t.out.mlir
// RUN: coconet-opt %s -p coco-split-all-reduce -o %t.out.mlir
// RUN: filecheck %s --check-prefix=WRITTEN --input-file=%t.out.mlir

// REFUSED:      coconet-opt: error: coco-split-all-reduce: no op named "nope"
// KEPT:         {{^}}// old output{{$}}
// WRITTEN-NOT:  old output
// WRITTEN:      coco.reduce_scatter
// WRITTEN-NEXT: coco.all_gather

func.func @f(%g: !coco.tensor<8xf32, local>) -> !coco.tensor<8xf32, replicated> {
  %s = coco.all_reduce %g reduction = sum : !coco.tensor<8xf32, local> -> !coco.tensor<8xf32, replicated>
  func.return %s : !coco.tensor<8xf32, replicated>
}
