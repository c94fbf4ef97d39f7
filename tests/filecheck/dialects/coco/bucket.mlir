// RUN: coconet-opt %s | filecheck %s
// RUN: coconet-opt %s --print-op-generic | coconet-opt | filecheck %s
// RUN: coconet-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC
// RUN: coconet-run --compare %s %s --world 2 --entry ddp
// RUN: coconet-opt %s -p canonicalize | coconet-run --compare %s - --world 4 --entry ddp

// coco.concat and coco.split: flat buckets, rank-major (docs/dialect.md,
// "Buckets"). A bucket of local gradients, all-reduced once and split back.

// CHECK-LABEL: func.func @ddp(
// CHECK-NEXT:    %flat = coco.concat %a, %b {name = "bucket0"} : (!coco.tensor<4x8xf32, local>, !coco.tensor<16xf32, local>) -> !coco.tensor<48xf32, local>
// CHECK-NEXT:    %sum = coco.all_reduce %flat reduction = sum : !coco.tensor<48xf32, local> -> !coco.tensor<48xf32, replicated>
// CHECK-NEXT:    %x, %y = coco.split %sum : (!coco.tensor<48xf32, replicated>) -> (!coco.tensor<4x8xf32, replicated>, !coco.tensor<16xf32, replicated>)
// GENERIC:       %flat = "coco.concat"(%a, %b) {name = "bucket0"} : (!coco.tensor<4x8xf32, local>, !coco.tensor<16xf32, local>) -> !coco.tensor<48xf32, local>
// GENERIC:       "coco.split"(%sum) : (!coco.tensor<48xf32, replicated>) -> (!coco.tensor<4x8xf32, replicated>, !coco.tensor<16xf32, replicated>)
func.func @ddp(%a: !coco.tensor<4x8xf32, local>, %b: !coco.tensor<16xf32, local>) -> (!coco.tensor<4x8xf32, replicated>, !coco.tensor<16xf32, replicated>) {
  %flat = coco.concat %a, %b {name = "bucket0"} : (!coco.tensor<4x8xf32, local>, !coco.tensor<16xf32, local>) -> !coco.tensor<48xf32, local>
  %sum = coco.all_reduce %flat reduction = sum : !coco.tensor<48xf32, local> -> !coco.tensor<48xf32, replicated>
  %x, %y = coco.split %sum : (!coco.tensor<48xf32, replicated>) -> (!coco.tensor<4x8xf32, replicated>, !coco.tensor<16xf32, replicated>)
  func.return %x, %y : !coco.tensor<4x8xf32, replicated>, !coco.tensor<16xf32, replicated>
}

// A sliced<0> bucket: each rank concatenates its own blocks.
// CHECK-LABEL: func.func @sliced(
// CHECK-NEXT:    %flat = coco.concat %m, %v : (!coco.tensor<8x2xf32, sliced<0>>, !coco.tensor<8xf32, sliced<0>>) -> !coco.tensor<24xf32, sliced<0>>
// CHECK-NEXT:    %m1, %v1 = coco.split %flat : (!coco.tensor<24xf32, sliced<0>>) -> (!coco.tensor<8x2xf32, sliced<0>>, !coco.tensor<8xf32, sliced<0>>)
func.func @sliced(%m: !coco.tensor<8x2xf32, sliced<0>>, %v: !coco.tensor<8xf32, sliced<0>>) {
  %flat = coco.concat %m, %v : (!coco.tensor<8x2xf32, sliced<0>>, !coco.tensor<8xf32, sliced<0>>) -> !coco.tensor<24xf32, sliced<0>>
  %m1, %v1 = coco.split %flat : (!coco.tensor<24xf32, sliced<0>>) -> (!coco.tensor<8x2xf32, sliced<0>>, !coco.tensor<8xf32, sliced<0>>)
  coco.update %m, %m1 : !coco.tensor<8x2xf32, sliced<0>>
  coco.update %v, %v1 : !coco.tensor<8xf32, sliced<0>>
  func.return
}
