// RUN: not coconet-opt %s -p convert-coco-to-gpu 2>&1 | filecheck %s --check-prefix=NOWORLD
// RUN: not coconet-opt %s -p 'convert-coco-to-gpu{world=4}' 2>&1 | filecheck %s --check-prefix=DIVIDE
// RUN: not coconet-opt %s -p 'convert-coco-to-gpu{world=3 threads=0}' 2>&1 | filecheck %s --check-prefix=THREADS
// RUN: coconet-opt %s -p 'convert-coco-to-gpu{world=3}' | filecheck %s --check-prefix=THREE
// Refusals: the world size must be known and divide every sliced dim.

// NOWORLD: error: 'builtin.module' op convert-coco-to-gpu needs the world size: give the option world=N or the module attribute coco.world_size
// DIVIDE: invalid.mlir:[[# @LINE + 3]]:14: error: convert-coco-to-gpu cannot convert: argument %x of @f: dimension 0 of !coco.tensor<6xf32, sliced<0>> (size 6) is not divisible by the world size 4
// THREADS: error: convert-coco-to-gpu: threads must be >= 1, got 0
// THREE: func.func @f(%x: memref<2xf32>, %result0: memref<2xf32>)
func.func @f(%x: !coco.tensor<6xf32, sliced<0>>) -> !coco.tensor<6xf32, sliced<0>> {
  %y = coco.neg %x : (!coco.tensor<6xf32, sliced<0>>) -> !coco.tensor<6xf32, sliced<0>>
  func.return %y : !coco.tensor<6xf32, sliced<0>>
}
