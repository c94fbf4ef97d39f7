// Decode-time row-parallel projection (one token at batch 1): %x [1, 1, H] is
// sliced along H and %w [H, H] along its rows, so each rank's GEMV is a
// partial sum (local) that the all_reduce adds up; the replicated bias is
// added after it, as a real layer does. coco-optimize fuses "proj" and "sum"
// into one coco.fusion (the bias stays outside), lowered to ONE tile-granular
// kernel (docs/fused-operators.md).
// Built in Python by examples/gemv_allreduce.py.
//
// Run: coconet-run examples/gemv_allreduce.mlir --world 4

func.func @gemv_allreduce(%x: !coco.tensor<1x1x256xf32, sliced<2>>,
                          %w: !coco.tensor<256x256xf32, sliced<0>>,
                          %bias: !coco.tensor<256xf32, replicated>) -> !coco.tensor<1x1x256xf32, replicated> {
  %proj = coco.matmul %x, %w {name = "proj"} : (!coco.tensor<1x1x256xf32, sliced<2>>, !coco.tensor<256x256xf32, sliced<0>>) -> !coco.tensor<1x1x256xf32, local>
  %sum = coco.all_reduce %proj reduction = sum {name = "sum"} : !coco.tensor<1x1x256xf32, local> -> !coco.tensor<1x1x256xf32, replicated>
  %out = coco.add %sum, %bias {name = "out"} : (!coco.tensor<1x1x256xf32, replicated>, !coco.tensor<256xf32, replicated>) -> !coco.tensor<1x1x256xf32, replicated>
  func.return %out : !coco.tensor<1x1x256xf32, replicated>
}
