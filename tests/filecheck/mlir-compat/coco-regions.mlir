// REQUIRES: mlir-opt
// The regions transformations create (coco.fusion, coco.overlap, coco.yield)
// in generic form are valid MLIR too: real mlir-opt 22 accepts the optimized
// paper workloads, and what it prints back computes the same values.
//
// RUN: coconet-opt %S/../../../examples/megatron.mlir -p 'coco-optimize{overlap_mode=chunks}' --print-op-generic | %mlir-opt --allow-unregistered-dialect --mlir-print-op-generic | coconet-opt -o %t.megatron
// RUN: filecheck %s --input-file=%t.megatron
// RUN: coconet-run --compare %S/../../../examples/megatron.mlir %t.megatron --world 4
// RUN: coconet-opt %S/../../../examples/pipeline.mlir -p 'coco-optimize{overlap_mode=chunks}' --print-op-generic | %mlir-opt --allow-unregistered-dialect --mlir-print-op-generic | coconet-opt -o %t.pipeline
// RUN: coconet-run --compare %S/../../../examples/pipeline.mlir %t.pipeline --world 8

// CHECK:      coco.overlap chunks = 4
// CHECK:        coco.matmul
// CHECK-NEXT:   coco.fusion
// CHECK:          coco.yield
// CHECK:        coco.yield
