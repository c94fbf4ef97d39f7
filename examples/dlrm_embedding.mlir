// DLRM's table-parallel embedding layer: %tables [T, R, D] = [16, 64, 16] are
// sliced along the tables (each rank owns T/N of them) and so are the i32
// %indices [T, B, L] = [16, 16, 4]; each rank pools (sums) L rows per bag for
// the whole batch in its tables, then the all_to_all leaves rank r with bags
// r*B/N .. of every table (the batch split DLRM's interaction needs).
// coco-optimize fuses "lookup" and "to_batch" into one coco.fusion, lowered to
// ONE tile-granular kernel (docs/fused-operators.md).
// Built in Python by examples/dlrm_embedding.py.
//
// Run: coconet-run examples/dlrm_embedding.mlir --world 4

func.func @dlrm_embedding(%tables: !coco.tensor<16x64x16xf32, sliced<0>>,
                          %indices: !coco.tensor<16x16x4xi32, sliced<0>>) -> !coco.tensor<16x16x16xf32, sliced<1>> {
  %lookup = coco.embedding %tables, %indices pooling = sum {name = "lookup"} : (!coco.tensor<16x64x16xf32, sliced<0>>, !coco.tensor<16x16x4xi32, sliced<0>>) -> !coco.tensor<16x16x16xf32, sliced<0>>
  %to_batch = coco.all_to_all %lookup dim = 1 {name = "to_batch"} : !coco.tensor<16x16x16xf32, sliced<0>> -> !coco.tensor<16x16x16xf32, sliced<1>>
  func.return %to_batch : !coco.tensor<16x16x16xf32, sliced<1>>
}
