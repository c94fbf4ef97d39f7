// REQUIRES: mlir-opt
// RUN: %mlir-opt --pass-pipeline='builtin.module(func.func(sharding-propagation))' %s | coconet-opt -p coco-import-shard | filecheck %s
// RUN: %mlir-opt --pass-pipeline='builtin.module(func.func(sharding-propagation))' %s | coconet-opt -p 'coco-import-shard,coco-optimize,convert-coco-to-gpu' -t cuda | filecheck %s --check-prefix=CUDA
// Megatron's MLP as an MLIR user shards it (x replicated, W1 split by columns,
// W2 by rows), propagated by real mlir-opt 22 and imported: the first matmul is
// column-parallel (sliced<1>), the second contracts the split dim (partial
// sums, local) and the replicated result annotation makes it an all_reduce.
// Then the default schedule, the GPU level and CUDA C.

shard.grid @tp(shape = 4)
func.func @mlp(%x: tensor<8x16xf32>, %w1: tensor<16x32xf32>, %w2: tensor<32x16xf32>) -> tensor<8x16xf32> {
  %rep = shard.sharding @tp split_axes = [[]] : !shard.sharding
  %cols = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
  %rows = shard.sharding @tp split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %rep annotate_for_users : tensor<8x16xf32>
  %w1s = shard.shard %w1 to %cols annotate_for_users : tensor<16x32xf32>
  %w2s = shard.shard %w2 to %rows annotate_for_users : tensor<32x16xf32>
  %zero = arith.constant 0.0 : f32
  %h0e = tensor.empty() : tensor<8x32xf32>
  %h0 = linalg.fill ins(%zero : f32) outs(%h0e : tensor<8x32xf32>) -> tensor<8x32xf32>
  %h = linalg.matmul ins(%xs, %w1s : tensor<8x16xf32>, tensor<16x32xf32>) outs(%h0 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %ae = tensor.empty() : tensor<8x32xf32>
  %a = linalg.elementwise kind=#linalg.elementwise_kind<tanh> ins(%h : tensor<8x32xf32>) outs(%ae : tensor<8x32xf32>) -> tensor<8x32xf32>
  %y0e = tensor.empty() : tensor<8x16xf32>
  %y0 = linalg.fill ins(%zero : f32) outs(%y0e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = linalg.matmul ins(%a, %w2s : tensor<8x32xf32>, tensor<32x16xf32>) outs(%y0 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %re = tensor.empty() : tensor<8x16xf32>
  %r = linalg.add ins(%y, %xs : tensor<8x16xf32>, tensor<8x16xf32>) outs(%re : tensor<8x16xf32>) -> tensor<8x16xf32>
  %out = shard.shard %r to %rep : tensor<8x16xf32>
  return %out : tensor<8x16xf32>
}

// CHECK:      builtin.module attributes {coco.world_size = 4 : i64} {
// CHECK-NEXT:   func.func @mlp(%{{.*}}: !coco.tensor<8x16xf32, replicated>, %{{.*}}: !coco.tensor<16x32xf32, sliced<1>>, %{{.*}}: !coco.tensor<32x16xf32, sliced<0>>) -> !coco.tensor<8x16xf32, replicated> {
// CHECK-NEXT:     %[[H:.*]] = coco.matmul %{{.*}}, %{{.*}} : ({{.*}}) -> !coco.tensor<8x32xf32, sliced<1>>
// CHECK-NEXT:     %[[A:.*]] = coco.tanh %[[H]] : (!coco.tensor<8x32xf32, sliced<1>>) -> !coco.tensor<8x32xf32, sliced<1>>
// CHECK-NEXT:     %[[P:.*]] = coco.matmul %[[A]], %{{.*}} : ({{.*}}) -> !coco.tensor<8x16xf32, local>
// CHECK-NEXT:     %[[Y:.*]] = coco.all_reduce %[[P]] reduction = sum : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, replicated>
// CHECK-NEXT:     %[[R:.*]] = coco.add %[[Y]], %{{.*}} : ({{.*}}) -> !coco.tensor<8x16xf32, replicated>
// CHECK-NEXT:     func.return %[[R]] : !coco.tensor<8x16xf32, replicated>
// CHECK-NOT:  shard.
// CHECK-NOT:  linalg.

// CUDA: __global__
// CUDA: extern "C"
