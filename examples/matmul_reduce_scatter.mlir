// Matmul + reduce_scatter (the row-parallel layer of sequence-parallel tensor
// parallelism): %a [M, K] sliced along K times %b [K, N] sliced along its rows
// gives each rank a partial sum (local); the reduce_scatter adds them up and
// leaves rank r with block r of the rows. A chunked-overlap schedule overlaps
// the scatter with the matmul. Built in Python by examples/matmul_reduce_scatter.py.
//
// Run: coconet-run examples/matmul_reduce_scatter.mlir --world 4

func.func @matmul_reduce_scatter(%a: !coco.tensor<32x64xf32, sliced<1>>,
                                 %b: !coco.tensor<64x32xf32, sliced<0>>) -> !coco.tensor<32x32xf32, sliced<0>> {
  %partial = coco.matmul %a, %b {name = "matmul"} : (!coco.tensor<32x64xf32, sliced<1>>, !coco.tensor<64x32xf32, sliced<0>>) -> !coco.tensor<32x32xf32, local>
  %c = coco.reduce_scatter %partial reduction = sum dim = 0 {name = "reduce_scatter"} : !coco.tensor<32x32xf32, local> -> !coco.tensor<32x32xf32, sliced<0>>
  func.return %c : !coco.tensor<32x32xf32, sliced<0>>
}
