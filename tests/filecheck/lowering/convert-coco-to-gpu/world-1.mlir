// RUN: coconet-opt %s -p 'convert-coco-to-gpu{world=1}' | filecheck %s
// On one rank slices and collectives are identities (docs/gpu/device.md,
// "World 1"): no kernel, NCCL call or copy; the result is the operand's
// buffer, and a returned one's out-parameter is where the operand's producer
// writes. A broadcast from a rank that does not exist stays NCCL's (its error).

// CHECK-LABEL: func.func @identities(%a: memref<8x4xf32>, %r: memref<8x4xf32>, %result0: memref<8x4xf32>)
// CHECK-NOT:     nccl
// CHECK-NOT:     memref.copy
// CHECK-NOT:     memref.alloc
// CHECK:         gpu.launch_func  @kernels::@identities_add_0 {{.*}}args({{.*}}%result0_flat : memref<32xf32>)
// CHECK-NEXT:    func.return
func.func @identities(%a: !coco.tensor<8x4xf32, local>, %r: !coco.tensor<8x4xf32, replicated>) -> !coco.tensor<8x4xf32, replicated> {
  %s = coco.all_reduce %a reduction = sum : !coco.tensor<8x4xf32, local> -> !coco.tensor<8x4xf32, replicated>
  %p = coco.all_slice %s dim = 0 : (!coco.tensor<8x4xf32, replicated>) -> !coco.tensor<8x4xf32, sliced<0>>
  %q = coco.all_slice %r dim = 0 : (!coco.tensor<8x4xf32, replicated>) -> !coco.tensor<8x4xf32, sliced<0>>
  %t = coco.add %p, %q : (!coco.tensor<8x4xf32, sliced<0>>, !coco.tensor<8x4xf32, sliced<0>>) -> !coco.tensor<8x4xf32, sliced<0>>
  %g = coco.all_gather %t : !coco.tensor<8x4xf32, sliced<0>> -> !coco.tensor<8x4xf32, replicated>
  func.return %g : !coco.tensor<8x4xf32, replicated>
}

// CHECK-LABEL: func.func @broadcasts(%a: memref<16xf32>, %result0: memref<16xf32>, %result1: memref<16xf32>)
// CHECK-NEXT:    coco_gpu.nccl_broadcast %a, %result1 root = 2
// CHECK-NEXT:    "memref.copy"(%a, %result0)
// CHECK-NEXT:    func.return
func.func @broadcasts(%a: !coco.tensor<16xf32, local>) -> (!coco.tensor<16xf32, replicated>, !coco.tensor<16xf32, replicated>) {
  %b = coco.broadcast %a root = 0 : !coco.tensor<16xf32, local> -> !coco.tensor<16xf32, replicated>
  %c = coco.broadcast %a root = 2 : !coco.tensor<16xf32, local> -> !coco.tensor<16xf32, replicated>
  func.return %b, %c : !coco.tensor<16xf32, replicated>, !coco.tensor<16xf32, replicated>
}
