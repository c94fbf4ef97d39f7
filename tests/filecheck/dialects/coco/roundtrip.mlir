// RUN: coconet-opt %s > %t.1.mlir
// RUN: coconet-opt %t.1.mlir > %t.2.mlir
// RUN: diff %t.1.mlir %t.2.mlir
// RUN: coconet-opt %S/ops.mlir > %t.ops.1.mlir
// RUN: coconet-opt %t.ops.1.mlir > %t.ops.2.mlir
// RUN: diff %t.ops.1.mlir %t.ops.2.mlir
// RUN: coconet-opt %S/generic.mlir > %t.gen.1.mlir
// RUN: coconet-opt %t.gen.1.mlir > %t.gen.2.mlir
// RUN: diff %t.gen.1.mlir %t.gen.2.mlir
// RUN: coconet-opt %s | filecheck %s
// Printing is a fixed point after one print, including for the lenient
// spellings the parser accepts (integer literals for floats and for p, 0/1 for
// i1, hexadecimal bit patterns, extra spaces).

// CHECK-LABEL: func.func @lenient
// CHECK-NEXT: coco.constant 2.000000e+00 : !coco.tensor<f16, replicated>
// CHECK-NEXT: coco.constant -1.000000e+00 : !coco.tensor<f32, replicated>
// CHECK-NEXT: coco.constant true : !coco.tensor<i1, replicated>
// CHECK-NEXT: coco.constant 0x7FF0000000000000 : !coco.tensor<f64, replicated>
// CHECK-NEXT: coco.constant 0x7FC00000 : !coco.tensor<f32, replicated>
// CHECK-NEXT: coco.constant 0xFF80 : !coco.tensor<bf16, replicated>
// CHECK-NEXT: coco.dropout %a p = 0.000000e+00 seed = 3
// CHECK-NEXT: coco.dropout %a p = 0.33333333333333331 seed = 9223372036854775807
// CHECK-NEXT: coco.reduce %a kind = sum dims = [1, 0] : (!coco.tensor<4x2xf32, sliced<1>>) -> !coco.tensor<f32, local>
// CHECK-NEXT: coco.update %a, %a : !coco.tensor<4x2xf32, sliced<1>>
func.func @lenient(%a : !coco.tensor< 4x2xf32 ,  sliced < 1 > >) {
  %0 = coco.constant 2 : !coco.tensor<f16, replicated>
  %1 = coco.constant -1 : !coco.tensor<f32, replicated>
  %2 = coco.constant 1 : !coco.tensor<i1, replicated>
  %3 = coco.constant 0x7FF0000000000000 : !coco.tensor<f64, replicated>
  %4 = coco.constant 0x7FC00000 : !coco.tensor<f32, replicated>
  %5 = coco.constant 0xFF80 : !coco.tensor<bf16, replicated>
  %6 = coco.dropout %a p = 0 seed = 3 : (!coco.tensor<4x2xf32, sliced<1>>) -> !coco.tensor<4x2xf32, sliced<1>>
  %7 = coco.dropout %a p = 0.333333333333333333 seed = 9223372036854775807 : (!coco.tensor<4x2xf32, sliced<1>>) -> !coco.tensor<4x2xf32, sliced<1>>
  %8 = coco.reduce %a kind = sum dims = [1, 0] : (!coco.tensor<4x2xf32, sliced<1>>) -> !coco.tensor<f32, local>
  coco.update %a, %a : !coco.tensor<4x2xf32, sliced<1>>
  func.return
}
