// RUN: coconet-opt %s -p convert-coco-to-gpu | filecheck %s
// Collectives are NCCL calls. NCCL scatters and gathers contiguous blocks of
// the flat buffer, so a reduce_scatter or all_gather along a dim with
// non-unit dims before it goes through a rank-major pack / unpack kernel;
// all_to_all packs along the new dim and unpacks along the old one.

// pack [4, 8] along dim 1 for 2 ranks: element i of the packed buffer is
// (r, p, j) = (i / 16, (i / 4) % 4, i % 4), read from p * 8 + r * 4 + j.
// CHECK:      gpu.func @scatter_gather_pack_0(%n: index, %src: memref<32xf32>, %dst: memref<32xf32>) kernel {
// CHECK:        scf.for %i = %start to %n step %step {
// CHECK-NEXT:     %5 = arith.constant 16 : index
// CHECK-NEXT:     %6 = arith.divui %i, %5 : index
// CHECK-NEXT:     %7 = arith.constant 4 : index
// CHECK-NEXT:     %8 = arith.divui %i, %7 : index
// CHECK-NEXT:     %9 = arith.constant 4 : index
// CHECK-NEXT:     %10 = arith.remui %8, %9 : index
// CHECK-NEXT:     %11 = arith.constant 4 : index
// CHECK-NEXT:     %12 = arith.remui %i, %11 : index
// CHECK-NEXT:     %13 = arith.constant 0 : index
// CHECK-NEXT:     %14 = arith.constant 4 : index
// CHECK-NEXT:     %15 = arith.muli %6, %14 : index
// CHECK-NEXT:     %16 = arith.addi %15, %12 : index
// CHECK-NEXT:     %17 = arith.constant 8 : index
// CHECK-NEXT:     %18 = arith.muli %10, %17 : index
// CHECK-NEXT:     %19 = arith.addi %18, %16 : index
// CHECK-NEXT:     %20 = arith.addi %19, %13 : index
// CHECK-NEXT:     %21 = memref.load %src[%20] : memref<32xf32>
// CHECK-NEXT:     memref.store %21, %dst[%i] : memref<32xf32>
// CHECK:      gpu.func @scatter_gather_unpack_0(
// CHECK:          %21 = memref.load %src[%i] : memref<32xf32>
// CHECK-NEXT:     memref.store %21, %dst[%20] : memref<32xf32>
// CHECK:      gpu.func @others_unpack_0(

// Along dim 0 the blocks are contiguous: no kernel. The gather writes the
// out-parameter directly.
// CHECK-LABEL: func.func @scatter_gather(%a: memref<8x4xf32>, %b: memref<4x8xf32>, %result0: memref<8x4xf32>, %result1: memref<4x8xf32>)
// CHECK-NEXT:    %b_flat = memref.collapse_shape %b
// CHECK:         %result1_flat = memref.collapse_shape %result1
// CHECK-NEXT:    %s0 = memref.alloc() : memref<4x4xf32>
// CHECK-NEXT:    coco_gpu.nccl_reduce_scatter %a, %s0 reduction = sum : memref<8x4xf32>, memref<4x4xf32>
// CHECK-NEXT:    coco_gpu.nccl_all_gather %s0, %result0 : memref<4x4xf32>, memref<8x4xf32>
// CHECK-NEXT:    %s1 = memref.alloc() : memref<4x4xf32>
// CHECK-NEXT:    %packed = memref.alloc() : memref<32xf32>
// CHECK-NEXT:    gpu.launch_func  @kernels::@scatter_gather_pack_0 blocks in {{.*}}  args({{(.*, )?}}%b_flat : {{[^,]*}}, %packed : {{[^,]*}})
// CHECK-NEXT:    coco_gpu.nccl_reduce_scatter %packed, %s1 reduction = max : memref<32xf32>, memref<4x4xf32>
// CHECK-NEXT:    %gathered = memref.alloc() : memref<32xf32>
// CHECK-NEXT:    coco_gpu.nccl_all_gather %s1, %gathered : memref<4x4xf32>, memref<32xf32>
// CHECK-NEXT:    gpu.launch_func  @kernels::@scatter_gather_unpack_0 blocks in {{.*}}  args({{(.*, )?}}%gathered : {{[^,]*}}, %result1_flat : {{[^,]*}})
// CHECK-NEXT:    memref.dealloc %s0 : memref<4x4xf32>
// CHECK-NEXT:    memref.dealloc %s1 : memref<4x4xf32>
// CHECK-NEXT:    memref.dealloc %packed : memref<32xf32>
// CHECK-NEXT:    memref.dealloc %gathered : memref<32xf32>
// CHECK-NEXT:    func.return

// CHECK-LABEL: func.func @others(%a: memref<4x8xf32>, %b: memref<4x4xf32>, %result0: memref<4x8xf32>, %result1: memref<4x8xf32>, %result2: memref<2x8xf32>)
// CHECK:         %result2_flat = memref.collapse_shape %result2
// CHECK:         coco_gpu.nccl_all_reduce %a, %result0 reduction = prod : memref<4x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    coco_gpu.nccl_broadcast %a, %result1 root = 1 : memref<4x8xf32>, memref<4x8xf32>
// CHECK-NEXT:    %received = memref.alloc() : memref<16xf32>
// CHECK-NEXT:    coco_gpu.nccl_all_to_all %b, %received : memref<4x4xf32>, memref<16xf32>
// CHECK-NEXT:    gpu.launch_func  @kernels::@others_unpack_0 blocks in {{.*}}  args({{(.*, )?}}%received : {{[^,]*}}, %result2_flat : {{[^,]*}})

// CHECK-LABEL: func.func @first(%x: memref<4x4xf32>)
// CHECK-NEXT:    coco_gpu.nccl_send %x to @second channel = 3 : memref<4x4xf32>
// CHECK-NEXT:    func.return
// CHECK-LABEL: func.func @second(%result0: memref<4x4xf32>)
// CHECK-NEXT:    coco_gpu.nccl_recv %result0 from @first channel = 3 : memref<4x4xf32>
// CHECK-NEXT:    func.return

module attributes {coco.world_size = 2 : i64} {
  func.func @scatter_gather(%a: !coco.tensor<8x4xf32, local>, %b: !coco.tensor<4x8xf32, local>) -> (!coco.tensor<8x4xf32, replicated>, !coco.tensor<4x8xf32, replicated>) {
    %s0 = coco.reduce_scatter %a reduction = sum dim = 0 : !coco.tensor<8x4xf32, local> -> !coco.tensor<8x4xf32, sliced<0>>
    %g0 = coco.all_gather %s0 : !coco.tensor<8x4xf32, sliced<0>> -> !coco.tensor<8x4xf32, replicated>
    %s1 = coco.reduce_scatter %b reduction = max dim = 1 : !coco.tensor<4x8xf32, local> -> !coco.tensor<4x8xf32, sliced<1>>
    %g1 = coco.all_gather %s1 : !coco.tensor<4x8xf32, sliced<1>> -> !coco.tensor<4x8xf32, replicated>
    func.return %g0, %g1 : !coco.tensor<8x4xf32, replicated>, !coco.tensor<4x8xf32, replicated>
  }
  func.func @others(%a: !coco.tensor<4x8xf32, local>, %b: !coco.tensor<4x8xf32, sliced<1>>) -> (!coco.tensor<4x8xf32, replicated>, !coco.tensor<4x8xf32, replicated>, !coco.tensor<4x8xf32, sliced<0>>) {
    %r = coco.all_reduce %a reduction = prod : !coco.tensor<4x8xf32, local> -> !coco.tensor<4x8xf32, replicated>
    %c = coco.broadcast %a root = 1 : !coco.tensor<4x8xf32, local> -> !coco.tensor<4x8xf32, replicated>
    %t = coco.all_to_all %b dim = 0 : !coco.tensor<4x8xf32, sliced<1>> -> !coco.tensor<4x8xf32, sliced<0>>
    func.return %r, %c, %t : !coco.tensor<4x8xf32, replicated>, !coco.tensor<4x8xf32, replicated>, !coco.tensor<4x8xf32, sliced<0>>
  }
  func.func @first(%x: !coco.tensor<4x8xf32, sliced<1>>) {
    coco.send %x to @second channel = 3 : !coco.tensor<4x8xf32, sliced<1>>
    func.return
  }
  func.func @second() -> !coco.tensor<4x8xf32, sliced<1>> {
    %y = coco.recv from @first channel = 3 : !coco.tensor<4x8xf32, sliced<1>>
    func.return %y : !coco.tensor<4x8xf32, sliced<1>>
  }
}
