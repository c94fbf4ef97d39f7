// RUN: not coconet-opt %s -p 'coco-fuse,convert-coco-to-gpu{world=4 ranks_per_node=2}' 2>&1 | filecheck %s
// RUN: coconet-opt %s -p 'coco-fuse,convert-coco-to-gpu{world=4}' | filecheck %s --check-prefix=ONE
// A fused collective kernel stores into every rank's memory: across nodes
// no such pointer exists, so the conversion refuses it, naming the op.

// CHECK: error: 'coco.fusion' op convert-coco-to-gpu cannot convert: 'coco.fusion' holds a collective: its kernel stores into every rank's memory; with ranks_per_node=2 the 4 ranks are on 2 nodes, and a rank cannot reach another node's memory. Lower the program without the fused kernels (coco-optimize{fuse=false fuse_collective=false}, or coco-optimize{ranks_per_node=2 world=4})
// ONE: coco_gpu.symmetric_buffer

func.func @f(%g: !coco.tensor<1024xf32, local>, %b: !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated> {
  %rs = coco.reduce_scatter %g reduction = sum dim = 0 : !coco.tensor<1024xf32, local> -> !coco.tensor<1024xf32, sliced<0>>
  %x = coco.add %rs, %b : (!coco.tensor<1024xf32, sliced<0>>, !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, sliced<0>>
  %ag = coco.all_gather %x : !coco.tensor<1024xf32, sliced<0>> -> !coco.tensor<1024xf32, replicated>
  func.return %ag : !coco.tensor<1024xf32, replicated>
}
