// A two-stage pipeline (CoCoNet, ASPLOS'22, section 6): @stage1 ends with
// Megatron's row-parallel layer (matmul -> all_reduce -> + bias -> dropout ->
// + residual) and sends its output to @stage2, which applies GELU and a
// replicated matmul. Each stage runs on its own group of N ranks; rank r of
// @stage1 sends to rank r of @stage2 on channel 0.
// Built in Python by examples/pipeline.py.
//
// Run: coconet-run examples/pipeline.mlir --world 4

func.func @stage1(%x: !coco.tensor<4x8x64xf32, sliced<2>>,
                  %w: !coco.tensor<64x64xf32, sliced<0>>,
                  %bias: !coco.tensor<64xf32, replicated>,
                  %r: !coco.tensor<4x8x64xf32, replicated>) {
  %layer = coco.matmul %x, %w {name = "layer"} : (!coco.tensor<4x8x64xf32, sliced<2>>, !coco.tensor<64x64xf32, sliced<0>>) -> !coco.tensor<4x8x64xf32, local>
  %sum = coco.all_reduce %layer reduction = sum {name = "sum"} : !coco.tensor<4x8x64xf32, local> -> !coco.tensor<4x8x64xf32, replicated>
  %biased = coco.add %sum, %bias : (!coco.tensor<4x8x64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated>
  %dropout = coco.dropout %biased p = 1.000000e-01 seed = 7 {name = "dropout"} : (!coco.tensor<4x8x64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated>
  %out = coco.add %dropout, %r {name = "out"} : (!coco.tensor<4x8x64xf32, replicated>, !coco.tensor<4x8x64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated>
  coco.send %out to @stage2 channel = 0 {name = "send"} : !coco.tensor<4x8x64xf32, replicated>
  func.return
}

func.func @stage2(%w2: !coco.tensor<64x64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated> {
  %h = coco.recv from @stage1 channel = 0 {name = "recv"} : !coco.tensor<4x8x64xf32, replicated>
  %act = coco.gelu %h : (!coco.tensor<4x8x64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated>
  %mlp = coco.matmul %act, %w2 {name = "mlp"} : (!coco.tensor<4x8x64xf32, replicated>, !coco.tensor<64x64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated>
  func.return %mlp : !coco.tensor<4x8x64xf32, replicated>
}
