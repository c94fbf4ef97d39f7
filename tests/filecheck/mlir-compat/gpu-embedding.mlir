// REQUIRES: mlir-opt, ptxas
// RUN: coconet-opt %s -p convert-coco-to-gpu -t upstream-kernels > %t.kernels.mlir
// RUN: %mlir-opt %t.kernels.mlir --pass-pipeline='builtin.module(nvvm-attach-target{chip=sm_90},gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm),reconcile-unrealized-casts,gpu-module-to-binary{format=isa toolkit=%cuda-toolkit})' > %t.binary.mlir
// RUN: python -m coconet_ir.backend.cuda.mlir_interop ptx %t.binary.mlir > %t.ptx
// RUN: filecheck %s < %t.ptx
// RUN: %ptxas -arch=sm_90 %t.ptx -o %t.cubin
// The lookup's bounds check is a `cf.assert`, which MLIR's NVVM lowering
// turns into a call of CUDA's `__assertfail` with the op's message; the
// kernel is upstream (gpu, arith, scf, memref, cf) and ptxas assembles it.

// CHECK: .extern .func __assertfail
// CHECK: .entry dlrm_embedding_0
// CHECK: call.uni __assertfail,

module attributes {coco.world_size = 4 : i64} {
  func.func @dlrm(%t: !coco.tensor<8x16x8xbf16, sliced<0>>, %i: !coco.tensor<8x8x3xi32, replicated>) -> !coco.tensor<8x8x8xbf16, sliced<0>> {
    %e = coco.embedding %t, %i pooling = mean : (!coco.tensor<8x16x8xbf16, sliced<0>>, !coco.tensor<8x8x3xi32, replicated>) -> !coco.tensor<8x8x8xbf16, sliced<0>>
    func.return %e : !coco.tensor<8x8x8xbf16, sliced<0>>
  }
}
