// The default schedule on the paper's workloads (examples/), checked against the
// reference interpreter on 2, 4 and 8 ranks.
//
// RUN: coconet-opt %S/../../../examples/adam.mlir -p coco-optimize | filecheck %s --check-prefix=ADAM
// RUN: coconet-opt %S/../../../examples/adam.mlir -p coco-optimize -o %t.adam
// RUN: coconet-run --compare %S/../../../examples/adam.mlir %t.adam --world 2
// RUN: coconet-run --compare %S/../../../examples/adam.mlir %t.adam --world 4
// RUN: coconet-run --compare %S/../../../examples/adam.mlir %t.adam --world 8
//
// RUN: coconet-opt %S/../../../examples/megatron.mlir -p 'coco-optimize{overlap_mode=chunks}' | filecheck %s --check-prefix=MEGATRON
// RUN: coconet-opt %S/../../../examples/megatron.mlir -p 'coco-optimize{overlap=false overlap_mode=chunks}' | filecheck %s --check-prefix=NOOVERLAP
// RUN: coconet-opt %S/../../../examples/megatron.mlir -p 'coco-optimize{overlap_mode=chunks}' -o %t.megatron
// RUN: coconet-run --compare %S/../../../examples/megatron.mlir %t.megatron --world 2
// RUN: coconet-run --compare %S/../../../examples/megatron.mlir %t.megatron --world 4
// RUN: coconet-run --compare %S/../../../examples/megatron.mlir %t.megatron --world 8
//
// RUN: coconet-opt %S/../../../examples/pipeline.mlir -p 'coco-optimize{overlap_mode=chunks}' | filecheck %s --check-prefix=PIPELINE
// RUN: coconet-opt %S/../../../examples/pipeline.mlir -p 'coco-optimize{overlap_mode=chunks}' -o %t.pipeline
// RUN: coconet-run --compare %S/../../../examples/pipeline.mlir %t.pipeline --world 2
// RUN: coconet-run --compare %S/../../../examples/pipeline.mlir %t.pipeline --world 4
// RUN: coconet-run --compare %S/../../../examples/pipeline.mlir %t.pipeline --world 8

// Adam: m and v stay sliced; one kernel does reduce_scatter, the update on the
// slices and the all_gather of the new weights.
// ADAM-LABEL: func.func @adam(%g: !coco.tensor<1024xf32, local>, %w: !coco.tensor<1024xf32, replicated>, %m: !coco.tensor<1024xf32, sliced<0>>, %v: !coco.tensor<1024xf32, sliced<0>>
// ADAM:         coco.fusion
// ADAM:           coco.reduce_scatter
// ADAM:           coco.sqrt %{{.*}} : (!coco.tensor<1024xf32, sliced<0>>)
// ADAM:           coco.all_gather
// ADAM:           coco.yield
// ADAM-NOT:     coco.all_reduce
// ADAM:         coco.update %m, %{{.*}} : !coco.tensor<1024xf32, sliced<0>>

// Megatron: the matmul and the fused reduce_scatter/bias/dropout/residual/
// all_gather run chunk by chunk.
// MEGATRON:      coco.overlap chunks = 4
// MEGATRON-NEXT: ^bb0
// MEGATRON-NEXT:   coco.matmul
// MEGATRON-NEXT:   coco.fusion
// MEGATRON:          coco.reduce_scatter
// MEGATRON:          coco.dropout {{.*}} sliced<1>>
// MEGATRON:          coco.all_gather
// NOOVERLAP-NOT: coco.overlap
// NOOVERLAP:     coco.fusion

// Pipeline: the first stage sends its slice from inside its fused kernel; the
// second receives the slice and gathers it, overlapped with its first matmul.
// PIPELINE-LABEL: func.func @stage1
// PIPELINE:         coco.fusion
// PIPELINE:           coco.send %{{.*}} to @stage2 channel = 0 {name = "send"} : !coco.tensor<4x8x64xf32, sliced<1>>
// PIPELINE-LABEL: func.func @stage2
// PIPELINE-NEXT:    coco.recv from @stage1 channel = 0 {name = "recv"} : !coco.tensor<4x8x64xf32, sliced<1>>
// PIPELINE-NEXT:    coco.gelu %{{.*}} : (!coco.tensor<4x8x64xf32, sliced<1>>)
// PIPELINE-NEXT:    coco.overlap chunks = 4
// PIPELINE-NEXT:    ^bb0
// PIPELINE-NEXT:      coco.all_gather
// PIPELINE-NEXT:      coco.matmul
