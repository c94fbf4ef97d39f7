// Megatron-LM's row-parallel layer and the LayerNorm after it:
// matmul -> all_reduce -> + bias -> dropout -> + residual -> LayerNorm over
// the hidden dim. %x [B, S, H] is sliced along H and %w [H, H] along its
// rows, so each rank's matmul is a partial sum (local); the bias, gamma,
// beta and the residual are replicated. The LayerNorm is cc.layer_norm's
// ops: row statistics with `coco.reduce ... keep_dims` broadcast back over
// the hidden dim. coco-optimize fuses everything after the matmul into one
// kernel. Built by megatron_norm.py; megatron.mlir is the layer alone.
// Run: coconet-run examples/megatron_norm.mlir --world 4

builtin.module {
  func.func @megatron_norm(%x: !coco.tensor<4x8x64xf32, sliced<2>>, %w: !coco.tensor<64x64xf32, sliced<0>>, %bias: !coco.tensor<64xf32, replicated>, %r: !coco.tensor<4x8x64xf32, replicated>, %gamma: !coco.tensor<64xf32, replicated>, %beta: !coco.tensor<64xf32, replicated>) -> (!coco.tensor<4x8x64xf32, replicated>, !coco.tensor<4x8x64xf32, replicated>) {
    %layer = coco.matmul %x, %w {name = "layer"} : (!coco.tensor<4x8x64xf32, sliced<2>>, !coco.tensor<64x64xf32, sliced<0>>) -> !coco.tensor<4x8x64xf32, local>
    %sum = coco.all_reduce %layer reduction = sum {name = "sum"} : !coco.tensor<4x8x64xf32, local> -> !coco.tensor<4x8x64xf32, replicated>
    %0 = coco.add %sum, %bias : (!coco.tensor<4x8x64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated>
    %dropout = coco.dropout %0 p = 1.000000e-01 seed = 7 {name = "dropout"} : (!coco.tensor<4x8x64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated>
    %out = coco.add %dropout, %r {name = "out"} : (!coco.tensor<4x8x64xf32, replicated>, !coco.tensor<4x8x64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated>
    %1 = coco.reduce %out kind = sum dims = [2] keep_dims : (!coco.tensor<4x8x64xf32, replicated>) -> !coco.tensor<4x8x1xf32, replicated>
    %2 = coco.constant 1.562500e-02 : !coco.tensor<f32, replicated>
    %3 = coco.mul %1, %2 : (!coco.tensor<4x8x1xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<4x8x1xf32, replicated>
    %4 = coco.sub %out, %3 : (!coco.tensor<4x8x64xf32, replicated>, !coco.tensor<4x8x1xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated>
    %5 = coco.mul %4, %4 : (!coco.tensor<4x8x64xf32, replicated>, !coco.tensor<4x8x64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated>
    %6 = coco.reduce %5 kind = sum dims = [2] keep_dims : (!coco.tensor<4x8x64xf32, replicated>) -> !coco.tensor<4x8x1xf32, replicated>
    %7 = coco.constant 1.562500e-02 : !coco.tensor<f32, replicated>
    %8 = coco.mul %6, %7 : (!coco.tensor<4x8x1xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<4x8x1xf32, replicated>
    %9 = coco.constant 1.000000e-05 : !coco.tensor<f32, replicated>
    %10 = coco.add %8, %9 : (!coco.tensor<4x8x1xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<4x8x1xf32, replicated>
    %11 = coco.rsqrt %10 : (!coco.tensor<4x8x1xf32, replicated>) -> !coco.tensor<4x8x1xf32, replicated>
    %12 = coco.mul %4, %11 : (!coco.tensor<4x8x64xf32, replicated>, !coco.tensor<4x8x1xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated>
    %13 = coco.mul %12, %gamma : (!coco.tensor<4x8x64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated>
    %ln = coco.add %13, %beta {name = "ln"} : (!coco.tensor<4x8x64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated>
    func.return %out, %ln : !coco.tensor<4x8x64xf32, replicated>, !coco.tensor<4x8x64xf32, replicated>
  }
}
