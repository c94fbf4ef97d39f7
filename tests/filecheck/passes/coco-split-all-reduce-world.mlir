// RUN: coconet-opt %s -p coco-split-all-reduce | filecheck %s
// RUN: coconet-opt %s -p coco-split-all-reduce -o %t
// RUN: coconet-run --compare %s %t --world 4

// A known world size picks the first dimension it divides; max is kept.
// CHECK-LABEL: func.func @known
// CHECK-NEXT:    coco.reduce_scatter %x reduction = max dim = 1 : !coco.tensor<6x16xf32, local> -> !coco.tensor<6x16xf32, sliced<1>>
// CHECK-NEXT:    coco.all_gather
module attributes {coco.world_size = 4 : i64} {
  func.func @known(%x: !coco.tensor<6x16xf32, local>) -> !coco.tensor<6x16xf32, replicated> {
    %s = coco.all_reduce %x reduction = max : !coco.tensor<6x16xf32, local> -> !coco.tensor<6x16xf32, replicated>
    func.return %s : !coco.tensor<6x16xf32, replicated>
  }
}
