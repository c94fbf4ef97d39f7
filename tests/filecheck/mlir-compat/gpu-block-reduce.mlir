// REQUIRES: mlir-opt, ptxas
// RUN: coconet-opt %s -p convert-coco-to-gpu -t upstream-kernels > %t.kernels.mlir
// RUN: %mlir-opt %t.kernels.mlir --pass-pipeline='builtin.module(nvvm-attach-target{chip=sm_90},gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm),reconcile-unrealized-casts,gpu-module-to-binary{format=isa toolkit=%cuda-toolkit})' > %t.binary.mlir
// RUN: python -m coconet_ir.backend.cuda.mlir_interop ptx %t.binary.mlir > %t.ptx
// RUN: filecheck %s < %t.ptx
// RUN: %ptxas -arch=sm_90 %t.ptx -o %t.cubin
// A reduction with a block per output keeps its partials in a workgroup
// attribution (`workgroup(%partials : memref<256xf32,
// #gpu.address_space<workgroup>>)`), which MLIR's NVVM lowering turns into
// static shared memory; gpu.barrier becomes bar.sync. ptxas assembles it.

// CHECK: .shared .align 4 .b8 __wg_norm_reduce_0_0[1024]
// CHECK: st.shared.b32
// CHECK: bar.sync 0
// CHECK: ld.shared.b32
// CHECK: .shared .align 4 .b8 __wg_rows_reduce_0_0[1024]

module attributes {coco.world_size = 2 : i64} {
  func.func @norm(%x: !coco.tensor<128x64xbf16, sliced<0>>) -> !coco.tensor<f32, local> {
    %c = coco.convert %x : (!coco.tensor<128x64xbf16, sliced<0>>) -> !coco.tensor<128x64xf32, sliced<0>>
    %s = coco.mul %c, %c : (!coco.tensor<128x64xf32, sliced<0>>, !coco.tensor<128x64xf32, sliced<0>>) -> !coco.tensor<128x64xf32, sliced<0>>
    %r = coco.reduce %s kind = sum dims = [0, 1] : (!coco.tensor<128x64xf32, sliced<0>>) -> !coco.tensor<f32, local>
    func.return %r : !coco.tensor<f32, local>
  }
  func.func @rows(%x: !coco.tensor<8x512xf16, replicated>) -> !coco.tensor<8xf16, replicated> {
    %m = coco.reduce %x kind = min dims = [1] : (!coco.tensor<8x512xf16, replicated>) -> !coco.tensor<8xf16, replicated>
    func.return %m : !coco.tensor<8xf16, replicated>
  }
}
