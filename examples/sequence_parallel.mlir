// Sequence-parallel tensor parallelism (Megatron-LM's sequence parallelism):
// %x [S, B, H] is sliced along the sequence; an all_gather rebuilds it before
// a column-parallel matmul with %w [H, F] sliced along its columns, so the
// result is sliced along F. A chunked-overlap schedule overlaps the gather with
// the matmul, chunk by chunk along the batch dim B (S is sliced, H contracted).
// Built in Python by examples/sequence_parallel.py.
//
// Run: coconet-run examples/sequence_parallel.mlir --world 4

func.func @sequence_parallel(%x: !coco.tensor<16x8x32xf32, sliced<0>>,
                             %w: !coco.tensor<32x64xf32, sliced<1>>) -> !coco.tensor<16x8x64xf32, sliced<2>> {
  %full = coco.all_gather %x {name = "gather"} : !coco.tensor<16x8x32xf32, sliced<0>> -> !coco.tensor<16x8x32xf32, replicated>
  %y = coco.matmul %full, %w {name = "matmul"} : (!coco.tensor<16x8x32xf32, replicated>, !coco.tensor<32x64xf32, sliced<1>>) -> !coco.tensor<16x8x64xf32, sliced<2>>
  func.return %y : !coco.tensor<16x8x64xf32, sliced<2>>
}
