// REQUIRES: mlir-opt, ptxas
// RUN: coconet-opt %s -p convert-coco-to-gpu -t upstream-kernels > %t.kernels.mlir
// RUN: %mlir-opt %t.kernels.mlir --pass-pipeline='builtin.module(nvvm-attach-target{chip=sm_90},gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm),reconcile-unrealized-casts,gpu-module-to-binary{format=isa toolkit=%cuda-toolkit})' > %t.binary.mlir
// RUN: python -m coconet_ir.backend.cuda.mlir_interop ptx %t.binary.mlir > %t.ptx
// RUN: filecheck %s < %t.ptx
// RUN: %ptxas -arch=sm_90 %t.ptx -o %t.cubin
// The norm-layer ops' kernels (docs/gpu/device.md, "Transpose and reshape"):
// a keep-dims row reduction, a transpose and a reshape (copy kernels), a
// splat constant filling the buffer a matmul reads, all upstream ops that
// MLIR's NVVM pipeline takes to PTX.

// CHECK-DAG: .entry norms_reduce
// CHECK-DAG: .entry norms_transpose
// CHECK-DAG: .entry norms_reshape
// CHECK-DAG: .entry norms_constant

module attributes {coco.world_size = 4 : i64} {
  func.func @norms(%x: !coco.tensor<8x16xbf16, sliced<0>>, %w: !coco.tensor<16x4xbf16, replicated>) -> (!coco.tensor<8x1xbf16, sliced<0>>, !coco.tensor<16x8xbf16, sliced<1>>, !coco.tensor<128xbf16, sliced<0>>, !coco.tensor<8x4xbf16, replicated>) {
    %rows = coco.reduce %x kind = sum dims = [1] keep_dims : (!coco.tensor<8x16xbf16, sliced<0>>) -> !coco.tensor<8x1xbf16, sliced<0>>
    %t = coco.transpose %x perm = [1, 0] : (!coco.tensor<8x16xbf16, sliced<0>>) -> !coco.tensor<16x8xbf16, sliced<1>>
    %flat = coco.reshape %x : (!coco.tensor<8x16xbf16, sliced<0>>) -> !coco.tensor<128xbf16, sliced<0>>
    %ones = coco.constant 1.0 : !coco.tensor<8x16xbf16, replicated>
    %sums = coco.matmul %ones, %w : (!coco.tensor<8x16xbf16, replicated>, !coco.tensor<16x4xbf16, replicated>) -> !coco.tensor<8x4xbf16, replicated>
    func.return %rows, %t, %flat, %sums : !coco.tensor<8x1xbf16, sliced<0>>, !coco.tensor<16x8xbf16, sliced<1>>, !coco.tensor<128xbf16, sliced<0>>, !coco.tensor<8x4xbf16, replicated>
  }
}
