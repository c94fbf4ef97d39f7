// Megatron-LM's sequence parallelism around a LayerNorm (Korthikanti et al.,
// 2022): the row-parallel matmul's partial sums %partial (local) are
// reduce-scattered along the sequence (dim 0), then + bias -> dropout ->
// + residual -> LayerNorm over the hidden dim on each rank's rows, and the
// normalized rows are all-gathered for the next column-parallel matmul. The
// LayerNorm is cc.layer_norm's ops: row statistics with `coco.reduce ...
// keep_dims` broadcast back over the hidden dim. Built by
// sequence_parallel_norm.py.
// Run: coconet-run examples/sequence_parallel_norm.mlir --world 4

builtin.module {
  func.func @sequence_parallel_norm(%partial: !coco.tensor<64x32xf32, local>, %bias: !coco.tensor<32xf32, replicated>, %r: !coco.tensor<64x32xf32, sliced<0>>, %gamma: !coco.tensor<32xf32, replicated>, %beta: !coco.tensor<32xf32, replicated>) -> (!coco.tensor<64x32xf32, sliced<0>>, !coco.tensor<64x32xf32, replicated>) {
    %rs = coco.reduce_scatter %partial reduction = sum dim = 0 {name = "rs"} : !coco.tensor<64x32xf32, local> -> !coco.tensor<64x32xf32, sliced<0>>
    %0 = coco.add %rs, %bias : (!coco.tensor<64x32xf32, sliced<0>>, !coco.tensor<32xf32, replicated>) -> !coco.tensor<64x32xf32, sliced<0>>
    %dropout = coco.dropout %0 p = 1.000000e-01 seed = 11 {name = "dropout"} : (!coco.tensor<64x32xf32, sliced<0>>) -> !coco.tensor<64x32xf32, sliced<0>>
    %residual = coco.add %dropout, %r {name = "residual"} : (!coco.tensor<64x32xf32, sliced<0>>, !coco.tensor<64x32xf32, sliced<0>>) -> !coco.tensor<64x32xf32, sliced<0>>
    %1 = coco.reduce %residual kind = sum dims = [1] keep_dims : (!coco.tensor<64x32xf32, sliced<0>>) -> !coco.tensor<64x1xf32, sliced<0>>
    %2 = coco.constant 3.125000e-02 : !coco.tensor<f32, replicated>
    %3 = coco.mul %1, %2 : (!coco.tensor<64x1xf32, sliced<0>>, !coco.tensor<f32, replicated>) -> !coco.tensor<64x1xf32, sliced<0>>
    %4 = coco.sub %residual, %3 : (!coco.tensor<64x32xf32, sliced<0>>, !coco.tensor<64x1xf32, sliced<0>>) -> !coco.tensor<64x32xf32, sliced<0>>
    %5 = coco.mul %4, %4 : (!coco.tensor<64x32xf32, sliced<0>>, !coco.tensor<64x32xf32, sliced<0>>) -> !coco.tensor<64x32xf32, sliced<0>>
    %6 = coco.reduce %5 kind = sum dims = [1] keep_dims : (!coco.tensor<64x32xf32, sliced<0>>) -> !coco.tensor<64x1xf32, sliced<0>>
    %7 = coco.constant 3.125000e-02 : !coco.tensor<f32, replicated>
    %8 = coco.mul %6, %7 : (!coco.tensor<64x1xf32, sliced<0>>, !coco.tensor<f32, replicated>) -> !coco.tensor<64x1xf32, sliced<0>>
    %9 = coco.constant 1.000000e-05 : !coco.tensor<f32, replicated>
    %10 = coco.add %8, %9 : (!coco.tensor<64x1xf32, sliced<0>>, !coco.tensor<f32, replicated>) -> !coco.tensor<64x1xf32, sliced<0>>
    %11 = coco.rsqrt %10 : (!coco.tensor<64x1xf32, sliced<0>>) -> !coco.tensor<64x1xf32, sliced<0>>
    %12 = coco.mul %4, %11 : (!coco.tensor<64x32xf32, sliced<0>>, !coco.tensor<64x1xf32, sliced<0>>) -> !coco.tensor<64x32xf32, sliced<0>>
    %13 = coco.mul %12, %gamma : (!coco.tensor<64x32xf32, sliced<0>>, !coco.tensor<32xf32, replicated>) -> !coco.tensor<64x32xf32, sliced<0>>
    %ln = coco.add %13, %beta {name = "ln"} : (!coco.tensor<64x32xf32, sliced<0>>, !coco.tensor<32xf32, replicated>) -> !coco.tensor<64x32xf32, sliced<0>>
    %ag = coco.all_gather %ln {name = "ag"} : !coco.tensor<64x32xf32, sliced<0>> -> !coco.tensor<64x32xf32, replicated>
    func.return %residual, %ag : !coco.tensor<64x32xf32, sliced<0>>, !coco.tensor<64x32xf32, replicated>
  }
}
