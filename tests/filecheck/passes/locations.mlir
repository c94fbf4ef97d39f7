// Locations after a pass (docs/passes.md, "Locations after a pass"): an op a
// pass creates carries the location of the op it stands for, a region the
// fused locations of the ops it holds, so a diagnostic after coco-optimize
// names the user's line.
// RUN: coconet-opt %s -p coco-split-all-reduce --print-debuginfo | filecheck %s --check-prefix=SPLIT
// RUN: coconet-opt %s -p coco-split-all-reduce,coco-reorder,coco-fuse --print-debuginfo | filecheck %s --check-prefix=FUSE
// RUN: not coconet-opt %s -p 'coco-optimize,convert-coco-to-gpu{world=3}' 2>&1 | filecheck %s --check-prefix=ERROR
// RUN: coconet-opt %s -p coco-optimize -o %t && coconet-run --compare %s %t --world 2 && coconet-run --compare %s %t --world 4 && coconet-run --compare %s %t --world 8

// SPLIT:      %sum = coco.reduce_scatter %g {{.*}} loc("{{.*}}locations.mlir":[[# @LINE + 22]]:3)
// SPLIT-NEXT: %sum_1 = coco.all_gather %sum {{.*}} loc("{{.*}}locations.mlir":[[# @LINE + 21]]:3)
// SPLIT-NEXT: %step = coco.mul {{.*}} loc("{{.*}}locations.mlir":[[# @LINE + 21]]:3)

// The fusion and its yield carry the fused locations of the ops it holds, its
// arguments those of the values they stand for (%g's at its parameter); the
// reduce_scatter is at the all_reduce's line, the all_slice and the all_gather
// at the sub's they were made for.
// FUSE:      %w1 = coco.fusion
// FUSE-NEXT: ^bb0(%g_1: !coco.tensor<1024xf32, local> loc("{{.*}}locations.mlir":[[# @LINE + 10]]:16),
// FUSE-NEXT:   coco.reduce_scatter {{.*}} loc("{{.*}}locations.mlir":[[# @LINE + 12]]:3)
// FUSE:        coco.all_slice {{.*}} loc("{{.*}}locations.mlir":[[# @LINE + 13]]:3)
// FUSE:        coco.all_gather {{.*}} loc("{{.*}}locations.mlir":[[# @LINE + 12]]:3)
// FUSE-NEXT:   coco.yield {{.*}} loc(fused["{{.*}}locations.mlir":[[# @LINE + 9]]:3, "{{.*}}locations.mlir":[[# @LINE + 10]]:3, "{{.*}}locations.mlir":[[# @LINE + 11]]:3])
// FUSE-NEXT: } loc(fused["{{.*}}locations.mlir":[[# @LINE + 8]]:3, "{{.*}}locations.mlir":[[# @LINE + 9]]:3, "{{.*}}locations.mlir":[[# @LINE + 10]]:3])

// After coco-optimize, the lowering's complaint about the reduce_scatter that
// coco-split-all-reduce made names the all_reduce's line.
// ERROR: {{.*}}locations.mlir:[[# @LINE + 4]]:3: error: 'coco.reduce_scatter' op convert-coco-to-gpu cannot convert: dimension 0 of !coco.tensor<1024xf32, sliced<0>> (size 1024) is not divisible by the world size 3
func.func @sgd(%g: !coco.tensor<1024xf32, local>,
               %w: !coco.tensor<1024xf32, replicated>,
               %lr: !coco.tensor<f32, replicated>) {
  %sum = coco.all_reduce %g reduction = sum {name = "sum"} : !coco.tensor<1024xf32, local> -> !coco.tensor<1024xf32, replicated>
  %step = coco.mul %lr, %sum : (!coco.tensor<f32, replicated>, !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated>
  %w1 = coco.sub %w, %step : (!coco.tensor<1024xf32, replicated>, !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated>
  coco.update %w, %w1 : !coco.tensor<1024xf32, replicated>
  func.return
}
