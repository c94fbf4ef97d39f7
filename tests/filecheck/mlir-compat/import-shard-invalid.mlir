// REQUIRES: mlir-opt
// RUN: %mlir-opt --pass-pipeline='builtin.module(func.func(sharding-propagation))' %s -o %t.mlir
// RUN: not coconet-opt %t.mlir -p coco-import-shard 2>&1 | filecheck %s
// A two-axis grid, propagated by real mlir-opt 22, is refused at the grid:
// coco's ranks form one group.

shard.grid @mesh(shape = 2x2)
func.func @f(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %rows = shard.sharding @mesh split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %rows annotate_for_users : tensor<8x16xf32>
  %e = tensor.empty() : tensor<8x16xf32>
  %y = linalg.exp ins(%xs : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// CHECK: import-shard-invalid.mlir.tmp.mlir:2:3: error: 'shard.grid' op coco-import-shard: grid @mesh has 2 axes; coco's ranks form one group, so only a grid of one axis is imported
