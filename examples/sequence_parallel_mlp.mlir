// A transformer's MLP block with Megatron-LM's sequence parallelism:
// %x [S, B, H] is sliced along the sequence; the all_gather rebuilds it before
// the column-parallel first layer (%w1 [H, F] sliced along its columns), so
// "fc1" is sliced along F; the replicated bias %b1 [F] is added to each
// rank's columns and GELU applied to them; the row-parallel second layer
// (%w2 [F, H] sliced along its rows) is a partial sum (local) that the
// reduce_scatter adds up and cuts along the sequence again. Built in Python
// by examples/sequence_parallel_mlp.py.
//
// Run: coconet-run examples/sequence_parallel_mlp.mlir --world 4

func.func @sequence_parallel_mlp(%x: !coco.tensor<16x4x32xf32, sliced<0>>,
                                 %w1: !coco.tensor<32x64xf32, sliced<1>>,
                                 %b1: !coco.tensor<64xf32, replicated>,
                                 %w2: !coco.tensor<64x32xf32, sliced<0>>) -> !coco.tensor<16x4x32xf32, sliced<0>> {
  %full = coco.all_gather %x {name = "gather"} : !coco.tensor<16x4x32xf32, sliced<0>> -> !coco.tensor<16x4x32xf32, replicated>
  %h = coco.matmul %full, %w1 {name = "fc1"} : (!coco.tensor<16x4x32xf32, replicated>, !coco.tensor<32x64xf32, sliced<1>>) -> !coco.tensor<16x4x64xf32, sliced<2>>
  %biased = coco.add %h, %b1 {name = "bias"} : (!coco.tensor<16x4x64xf32, sliced<2>>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<16x4x64xf32, sliced<2>>
  %act = coco.gelu %biased {name = "gelu"} : (!coco.tensor<16x4x64xf32, sliced<2>>) -> !coco.tensor<16x4x64xf32, sliced<2>>
  %partial = coco.matmul %act, %w2 {name = "fc2"} : (!coco.tensor<16x4x64xf32, sliced<2>>, !coco.tensor<64x32xf32, sliced<0>>) -> !coco.tensor<16x4x32xf32, local>
  %y = coco.reduce_scatter %partial reduction = sum dim = 0 {name = "scatter"} : !coco.tensor<16x4x32xf32, local> -> !coco.tensor<16x4x32xf32, sliced<0>>
  func.return %y : !coco.tensor<16x4x32xf32, sliced<0>>
}
