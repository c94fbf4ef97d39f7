// RUN: coconet-opt %s | filecheck %s
// RUN: coconet-opt %s --print-op-generic | coconet-opt | filecheck %s
// RUN: coconet-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC
// RUN: coconet-run %s --world 4 --entry experts | filecheck %s --check-prefix=RESULT
// RUN: coconet-opt %s -p coco-fuse-collective | coconet-run --compare %s - --world 8 --entry experts | filecheck %s --check-prefix=SAME

// coco.batch_matmul: group g of a times matrix g of b (a mixture of experts'
// GEMMs), docs/dialect.md.

// CHECK-LABEL: func.func @layouts(
// CHECK-NEXT:    %rep = coco.batch_matmul %a, %b : (!coco.tensor<8x16x32xf32, replicated>, !coco.tensor<8x32x24xf32, replicated>) -> !coco.tensor<8x16x24xf32, replicated>
// CHECK-NEXT:    %experts = coco.batch_matmul %as, %bs {name = "experts"} : (!coco.tensor<8x16x32xf32, sliced<0>>, !coco.tensor<8x32x24xf32, sliced<0>>) -> !coco.tensor<8x16x24xf32, sliced<0>>
// CHECK-NEXT:    %rows = coco.batch_matmul %ar, %b : (!coco.tensor<8x16x32xf32, sliced<1>>, !coco.tensor<8x32x24xf32, replicated>) -> !coco.tensor<8x16x24xf32, sliced<1>>
// CHECK-NEXT:    %part = coco.batch_matmul %al, %b : (!coco.tensor<8x16x32xf32, local>, !coco.tensor<8x32x24xf32, replicated>) -> !coco.tensor<8x16x24xf32, local>
// CHECK-NEXT:    %vec = coco.batch_matmul %av, %bs : (!coco.tensor<8x32xf32, sliced<0>>, !coco.tensor<8x32x24xf32, sliced<0>>) -> !coco.tensor<8x24xf32, sliced<0>>
// CHECK-NEXT:    %int = coco.batch_matmul %ai, %bi : (!coco.tensor<8x2x4x32xi32, sliced<0>>, !coco.tensor<8x32x24xi32, sliced<0>>) -> !coco.tensor<8x2x4x24xi32, sliced<0>>
// GENERIC:       "coco.batch_matmul"(%a, %b) : (!coco.tensor<8x16x32xf32, replicated>, !coco.tensor<8x32x24xf32, replicated>) -> !coco.tensor<8x16x24xf32, replicated>
func.func @layouts(%a: !coco.tensor<8x16x32xf32, replicated>, %b: !coco.tensor<8x32x24xf32, replicated>,
                   %as: !coco.tensor<8x16x32xf32, sliced<0>>, %bs: !coco.tensor<8x32x24xf32, sliced<0>>,
                   %ar: !coco.tensor<8x16x32xf32, sliced<1>>, %al: !coco.tensor<8x16x32xf32, local>,
                   %av: !coco.tensor<8x32xf32, sliced<0>>,
                   %ai: !coco.tensor<8x2x4x32xi32, sliced<0>>, %bi: !coco.tensor<8x32x24xi32, sliced<0>>) {
  %rep = coco.batch_matmul %a, %b : (!coco.tensor<8x16x32xf32, replicated>, !coco.tensor<8x32x24xf32, replicated>) -> !coco.tensor<8x16x24xf32, replicated>
  %experts = coco.batch_matmul %as, %bs {name = "experts"} : (!coco.tensor<8x16x32xf32, sliced<0>>, !coco.tensor<8x32x24xf32, sliced<0>>) -> !coco.tensor<8x16x24xf32, sliced<0>>
  %rows = coco.batch_matmul %ar, %b : (!coco.tensor<8x16x32xf32, sliced<1>>, !coco.tensor<8x32x24xf32, replicated>) -> !coco.tensor<8x16x24xf32, sliced<1>>
  %part = coco.batch_matmul %al, %b : (!coco.tensor<8x16x32xf32, local>, !coco.tensor<8x32x24xf32, replicated>) -> !coco.tensor<8x16x24xf32, local>
  %vec = coco.batch_matmul %av, %bs : (!coco.tensor<8x32xf32, sliced<0>>, !coco.tensor<8x32x24xf32, sliced<0>>) -> !coco.tensor<8x24xf32, sliced<0>>
  %int = coco.batch_matmul %ai, %bi : (!coco.tensor<8x2x4x32xi32, sliced<0>>, !coco.tensor<8x32x24xi32, sliced<0>>) -> !coco.tensor<8x2x4x24xi32, sliced<0>>
  func.return
}

// The mixture of experts' pattern: each rank's experts, then the tokens back.
// RESULT: experts.result0 8x8x4x24xf32 sliced<1>
// SAME: equivalent: 1 output agrees on 8 ranks
func.func @experts(%x: !coco.tensor<8x8x4x32xf32, sliced<0>>, %w: !coco.tensor<8x32x24xf32, sliced<0>>) -> !coco.tensor<8x8x4x24xf32, sliced<1>> {
  %h = coco.batch_matmul %x, %w : (!coco.tensor<8x8x4x32xf32, sliced<0>>, !coco.tensor<8x32x24xf32, sliced<0>>) -> !coco.tensor<8x8x4x24xf32, sliced<0>>
  %o = coco.all_to_all %h dim = 1 : !coco.tensor<8x8x4x24xf32, sliced<0>> -> !coco.tensor<8x8x4x24xf32, sliced<1>>
  func.return %o : !coco.tensor<8x8x4x24xf32, sliced<1>>
}
