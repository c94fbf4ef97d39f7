// Megatron-LM's row-parallel layer (CoCoNet, ASPLOS'22, section 6):
// matmul -> all_reduce -> + bias -> dropout -> + residual.
// %x [B, S, H] is sliced along H and %w [H, H] along its rows, so each rank's
// matmul is a partial sum (local) that the all_reduce adds up; the bias and
// the residual are replicated. The named ops ("layer", "sum", "dropout",
// "out") are the stages a CoCoNet schedule targets.
// Built in Python by examples/megatron.py.
//
// Run: coconet-run examples/megatron.mlir --world 4

func.func @megatron(%x: !coco.tensor<4x8x64xf32, sliced<2>>,
                    %w: !coco.tensor<64x64xf32, sliced<0>>,
                    %bias: !coco.tensor<64xf32, replicated>,
                    %r: !coco.tensor<4x8x64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated> {
  %layer = coco.matmul %x, %w {name = "layer"} : (!coco.tensor<4x8x64xf32, sliced<2>>, !coco.tensor<64x64xf32, sliced<0>>) -> !coco.tensor<4x8x64xf32, local>
  %sum = coco.all_reduce %layer reduction = sum {name = "sum"} : !coco.tensor<4x8x64xf32, local> -> !coco.tensor<4x8x64xf32, replicated>
  %biased = coco.add %sum, %bias : (!coco.tensor<4x8x64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated>
  %dropout = coco.dropout %biased p = 1.000000e-01 seed = 7 {name = "dropout"} : (!coco.tensor<4x8x64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated>
  %out = coco.add %dropout, %r {name = "out"} : (!coco.tensor<4x8x64xf32, replicated>, !coco.tensor<4x8x64xf32, replicated>) -> !coco.tensor<4x8x64xf32, replicated>
  func.return %out : !coco.tensor<4x8x64xf32, replicated>
}
