// LLaMA's RMSNorm under sequence parallelism, bf16: the partial sums are
// reduce-scattered along the sequence, the residual added, and RMSNorm
// (x / sqrt(mean(x*x) + eps) * weight, computed in f32 as cc.rms_norm writes
// it) runs on each rank's rows before the all_gather. Built by
// sequence_parallel_rmsnorm.py.
// Run: coconet-run examples/sequence_parallel_rmsnorm.mlir --world 4

builtin.module {
  func.func @sequence_parallel_rmsnorm(%partial: !coco.tensor<32x64xbf16, local>, %r: !coco.tensor<32x64xbf16, sliced<0>>, %weight: !coco.tensor<64xbf16, replicated>) -> (!coco.tensor<32x64xbf16, sliced<0>>, !coco.tensor<32x64xbf16, replicated>) {
    %rs = coco.reduce_scatter %partial reduction = sum dim = 0 {name = "rs"} : !coco.tensor<32x64xbf16, local> -> !coco.tensor<32x64xbf16, sliced<0>>
    %residual = coco.add %rs, %r {name = "residual"} : (!coco.tensor<32x64xbf16, sliced<0>>, !coco.tensor<32x64xbf16, sliced<0>>) -> !coco.tensor<32x64xbf16, sliced<0>>
    %0 = coco.convert %residual : (!coco.tensor<32x64xbf16, sliced<0>>) -> !coco.tensor<32x64xf32, sliced<0>>
    %1 = coco.mul %0, %0 : (!coco.tensor<32x64xf32, sliced<0>>, !coco.tensor<32x64xf32, sliced<0>>) -> !coco.tensor<32x64xf32, sliced<0>>
    %2 = coco.reduce %1 kind = sum dims = [1] keep_dims : (!coco.tensor<32x64xf32, sliced<0>>) -> !coco.tensor<32x1xf32, sliced<0>>
    %3 = coco.constant 1.562500e-02 : !coco.tensor<f32, replicated>
    %4 = coco.mul %2, %3 : (!coco.tensor<32x1xf32, sliced<0>>, !coco.tensor<f32, replicated>) -> !coco.tensor<32x1xf32, sliced<0>>
    %5 = coco.constant 1.000000e-05 : !coco.tensor<f32, replicated>
    %6 = coco.add %4, %5 : (!coco.tensor<32x1xf32, sliced<0>>, !coco.tensor<f32, replicated>) -> !coco.tensor<32x1xf32, sliced<0>>
    %7 = coco.rsqrt %6 : (!coco.tensor<32x1xf32, sliced<0>>) -> !coco.tensor<32x1xf32, sliced<0>>
    %8 = coco.mul %0, %7 : (!coco.tensor<32x64xf32, sliced<0>>, !coco.tensor<32x1xf32, sliced<0>>) -> !coco.tensor<32x64xf32, sliced<0>>
    %9 = coco.convert %weight : (!coco.tensor<64xbf16, replicated>) -> !coco.tensor<64xf32, replicated>
    %10 = coco.mul %8, %9 : (!coco.tensor<32x64xf32, sliced<0>>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<32x64xf32, sliced<0>>
    %rms = coco.convert %10 {name = "rms"} : (!coco.tensor<32x64xf32, sliced<0>>) -> !coco.tensor<32x64xbf16, sliced<0>>
    %ag = coco.all_gather %rms {name = "ag"} : !coco.tensor<32x64xbf16, sliced<0>> -> !coco.tensor<32x64xbf16, replicated>
    func.return %residual, %ag : !coco.tensor<32x64xbf16, sliced<0>>, !coco.tensor<32x64xbf16, replicated>
  }
}
