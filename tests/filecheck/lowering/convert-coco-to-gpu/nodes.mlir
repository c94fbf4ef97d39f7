// RUN: coconet-opt %s -p 'convert-coco-to-gpu{world=4 ranks_per_node=2}' | filecheck %s
// RUN: coconet-opt %s -p 'convert-coco-to-gpu{world=4 ranks_per_node=2}' -t cuda | filecheck %s --check-prefix=CUDA
// RUN: coconet-opt %s -p 'convert-coco-to-gpu{world=4}' | filecheck %s --check-prefix=ONE
// RUN: not coconet-opt %s -p 'convert-coco-to-gpu{world=4 ranks_per_node=3}' 2>&1 | filecheck %s --check-prefix=BAD
// Several nodes (docs/gpu/device.md, "Several nodes"): on 2 nodes of 2 ranks
// an all-reduce is a reduce-scatter inside the node, an all-reduce of each
// rank's half across the nodes, an all-gather inside the node; one that
// does not split into the node's ranks (3 elements) stays one ring.

// CHECK:      builtin.module attributes {gpu.container_module, coco.world_size = 4 : i64, coco_gpu.ranks_per_node = 2 : i64}
// CHECK:        %[[PART:.*]] = memref.alloc() : memref<512xf32>
// CHECK-NEXT:   coco_gpu.nccl_reduce_scatter %g, %[[PART]] reduction = sum group = "node" : memref<1024xf32>, memref<512xf32>
// CHECK-NEXT:   coco_gpu.nccl_all_reduce %[[PART]], %[[PART]] reduction = sum group = "across" : memref<512xf32>, memref<512xf32>
// CHECK-NEXT:   coco_gpu.nccl_all_gather %[[PART]], %{{.*}} group = "node" : memref<512xf32>, memref<1024xf32>
// CHECK:        coco_gpu.nccl_all_reduce %odd, %{{.*}} reduction = max : memref<3xf32>, memref<3xf32>

// CUDA: extern "C" int coco_ranks_per_node(void) { return 2; }
// CUDA: ncclReduceScatter({{.*}}, 512, ncclFloat, ncclSum, ctx->node_comm,
// CUDA: ncclAllReduce({{.*}}, 512, ncclFloat, ncclSum, ctx->cross_comm,
// CUDA: ncclAllGather({{.*}}, 512, ncclFloat, ctx->node_comm,
// CUDA: ncclAllReduce(odd, {{.*}}, 3, ncclFloat, ncclMax, ctx->comm,

// ONE:     builtin.module attributes {gpu.container_module, coco.world_size = 4 : i64} {
// ONE-NOT: group
// ONE:     coco_gpu.nccl_all_reduce %g,

// BAD: convert-coco-to-gpu: ranks_per_node must divide the world (4), got 3

func.func @f(%g: !coco.tensor<1024xf32, local>, %odd: !coco.tensor<3xf32, local>) -> (!coco.tensor<1024xf32, replicated>, !coco.tensor<3xf32, replicated>) {
  %s = coco.all_reduce %g reduction = sum : !coco.tensor<1024xf32, local> -> !coco.tensor<1024xf32, replicated>
  %m = coco.all_reduce %odd reduction = max : !coco.tensor<3xf32, local> -> !coco.tensor<3xf32, replicated>
  func.return %s, %m : !coco.tensor<1024xf32, replicated>, !coco.tensor<3xf32, replicated>
}
