// REQUIRES: mlir-opt
// RUN: coconet-opt %s -p convert-coco-to-gpu --print-op-generic | %mlir-opt --allow-unregistered-dialect --pass-pipeline='builtin.module(gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm,reconcile-unrealized-casts))' | filecheck %s
// Real MLIR (mlir-opt 22) accepts the converted module (coco_gpu as an
// unregistered dialect) and takes its kernels — elementwise, dropout's
// Philox, reductions, pack kernels — through its own NVVM lowering: the
// kernels are made of upstream ops only.

// CHECK: gpu.module @kernels
// CHECK: llvm.func @f_dropout_0({{.*}}) attributes {gpu.kernel, nvvm.kernel}
// CHECK: llvm.mul
// CHECK: llvm.func @f_reduce_0({{.*}}) attributes {gpu.kernel, nvvm.kernel}
// CHECK: llvm.func @f_pack_0({{.*}}) attributes {gpu.kernel, nvvm.kernel}
// CHECK: func.func @f(
// CHECK: gpu.launch_func  @kernels::@f_dropout_0
module attributes {coco.world_size = 2 : i64} {
  func.func @f(%x: !coco.tensor<4x8xf16, sliced<1>>, %y: !coco.tensor<4x8xf32, local>) -> (!coco.tensor<4x8xf16, sliced<1>>, !coco.tensor<4xf32, local>, !coco.tensor<4x8xf32, sliced<1>>) {
    %d = coco.dropout %x p = 1.000000e-01 seed = 5 : (!coco.tensor<4x8xf16, sliced<1>>) -> !coco.tensor<4x8xf16, sliced<1>>
    %r = coco.reduce %y kind = sum dims = [1] : (!coco.tensor<4x8xf32, local>) -> !coco.tensor<4xf32, local>
    %s = coco.reduce_scatter %y reduction = sum dim = 1 : !coco.tensor<4x8xf32, local> -> !coco.tensor<4x8xf32, sliced<1>>
    func.return %d, %r, %s : !coco.tensor<4x8xf16, sliced<1>>, !coco.tensor<4xf32, local>, !coco.tensor<4x8xf32, sliced<1>>
  }
}
