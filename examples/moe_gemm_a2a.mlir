// A mixture of experts' combine, expert-parallel: each rank holds E/N of the
// E = 8 experts. %tokens [E, S, C, F] = [8, 8, 2, 32] holds, for expert e,
// the C tokens source rank s routed to it (after the dispatch), in the
// experts' inner width F, cut along the experts like the experts'
// down-projections %w [E, F, H] (H = 32). Each rank's experts multiply
// their tokens (coco.batch_matmul: group e times expert e's matrix), then the
// all_to_all sends every token's result back to its source rank (dim = 1).
// coco-optimize fuses "experts" and "combine" into one coco.fusion, lowered to
// ONE tile-granular kernel (docs/fused-operators.md).
// Built in Python by examples/moe_gemm_a2a.py.
//
// Run: coconet-run examples/moe_gemm_a2a.mlir --world 4

func.func @moe_gemm_a2a(%tokens: !coco.tensor<8x8x2x32xf32, sliced<0>>,
                        %w: !coco.tensor<8x32x32xf32, sliced<0>>) -> !coco.tensor<8x8x2x32xf32, sliced<1>> {
  %experts = coco.batch_matmul %tokens, %w {name = "experts"} : (!coco.tensor<8x8x2x32xf32, sliced<0>>, !coco.tensor<8x32x32xf32, sliced<0>>) -> !coco.tensor<8x8x2x32xf32, sliced<0>>
  %combine = coco.all_to_all %experts dim = 1 {name = "combine"} : !coco.tensor<8x8x2x32xf32, sliced<0>> -> !coco.tensor<8x8x2x32xf32, sliced<1>>
  func.return %combine : !coco.tensor<8x8x2x32xf32, sliced<1>>
}
