// REQUIRES: mlir-opt
// The regions transformations create (coco.fusion, coco.overlap,
// coco.per_peer, coco.yield) and coco.shift
// in generic form are valid MLIR too: real mlir-opt 22 accepts the optimized
// paper workloads, and what it prints back computes the same values.
//
// RUN: coconet-opt %S/../../../examples/megatron.mlir -p 'coco-optimize{overlap_mode=chunks}' --print-op-generic | %mlir-opt --allow-unregistered-dialect --mlir-print-op-generic | coconet-opt -o %t.megatron
// RUN: filecheck %s --input-file=%t.megatron
// RUN: coconet-run --compare %S/../../../examples/megatron.mlir %t.megatron --world 4
// RUN: coconet-opt %S/../../../examples/pipeline.mlir -p 'coco-optimize{overlap_mode=chunks}' --print-op-generic | %mlir-opt --allow-unregistered-dialect --mlir-print-op-generic | coconet-opt -o %t.pipeline
// RUN: coconet-run --compare %S/../../../examples/pipeline.mlir %t.pipeline --world 8
// RUN: coconet-opt %S/../../../examples/sequence_parallel_mlp.mlir -p 'coco-optimize{overlap_mode=per_peer}' --print-op-generic | %mlir-opt --allow-unregistered-dialect --mlir-print-op-generic | coconet-opt -o %t.mlp
// RUN: filecheck %s --input-file=%t.mlp --check-prefix=PERPEER
// RUN: coconet-run --compare %S/../../../examples/sequence_parallel_mlp.mlir %t.mlp --world 4
// RUN: coconet-opt %S/../dialects/coco/per_peer.mlir --print-op-generic | %mlir-opt --allow-unregistered-dialect --mlir-print-op-generic | coconet-opt | filecheck %s --check-prefix=SHIFT

// CHECK:      coco.overlap chunks = 4
// CHECK:        coco.matmul
// CHECK-NEXT:   coco.fusion
// CHECK:          coco.yield
// CHECK:        coco.yield

// PERPEER:      coco.per_peer ({{.*}}) dims = [0, -1, -1, -1] -> [0]
// PERPEER:        coco.matmul
// PERPEER-NEXT:   coco.fusion
// PERPEER:        coco.matmul
// SHIFT:        coco.shift %{{.*}} by = 1 {name = "ring"}
