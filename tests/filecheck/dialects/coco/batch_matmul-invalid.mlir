// RUN: coconet-opt --split-input-file --verify-diagnostics %s | filecheck %s
// coco.batch_matmul's rules (docs/dialect.md): each rejected with a
// diagnostic that names the op and states the rule.

// CHECK: 'coco.batch_matmul' op needs a lhs of rank >= 2 and a rhs of rank 3, got ranks 3 and 2
func.func @rank(%a: !coco.tensor<8x16x32xf32, replicated>, %b: !coco.tensor<32x24xf32, replicated>) {
  %c = coco.batch_matmul %a, %b : (!coco.tensor<8x16x32xf32, replicated>, !coco.tensor<32x24xf32, replicated>) -> !coco.tensor<8x16x24xf32, replicated>
  func.return
}

// -----

// CHECK: 'coco.batch_matmul' op group counts differ: lhs [8, 16, 32] has G = 8 but rhs [4, 32, 24] has G = 4
func.func @groups(%a: !coco.tensor<8x16x32xf32, replicated>, %b: !coco.tensor<4x32x24xf32, replicated>) {
  %c = coco.batch_matmul %a, %b : (!coco.tensor<8x16x32xf32, replicated>, !coco.tensor<4x32x24xf32, replicated>) -> !coco.tensor<8x16x24xf32, replicated>
  func.return
}

// -----

// CHECK: 'coco.batch_matmul' op contraction sizes differ: lhs [8, 16, 32] has K = 32 but rhs [8, 16, 24] has K = 16
func.func @contraction(%a: !coco.tensor<8x16x32xf32, replicated>, %b: !coco.tensor<8x16x24xf32, replicated>) {
  %c = coco.batch_matmul %a, %b : (!coco.tensor<8x16x32xf32, replicated>, !coco.tensor<8x16x24xf32, replicated>) -> !coco.tensor<8x16x24xf32, replicated>
  func.return
}

// -----

// CHECK: 'coco.batch_matmul' op has no layout rule for lhs sliced<0> and rhs replicated (allowed: replicated x replicated -> replicated, sliced<0> x sliced<0> -> sliced<0>, sliced<d not 0, not last> x replicated -> sliced<d>, local x replicated -> local)
func.func @layout(%a: !coco.tensor<8x16x32xf32, sliced<0>>, %b: !coco.tensor<8x32x24xf32, replicated>) {
  %c = coco.batch_matmul %a, %b : (!coco.tensor<8x16x32xf32, sliced<0>>, !coco.tensor<8x32x24xf32, replicated>) -> !coco.tensor<8x16x24xf32, sliced<0>>
  func.return
}

// -----

// CHECK: 'coco.batch_matmul' op has no layout rule for lhs sliced<2> and rhs replicated
func.func @contracted_slice(%a: !coco.tensor<8x16x32xf32, sliced<2>>, %b: !coco.tensor<8x32x24xf32, replicated>) {
  %c = coco.batch_matmul %a, %b : (!coco.tensor<8x16x32xf32, sliced<2>>, !coco.tensor<8x32x24xf32, replicated>) -> !coco.tensor<8x16x24xf32, local>
  func.return
}

// -----

// CHECK: 'coco.batch_matmul' op does not take i1 operands (i1 is not arithmetic)
func.func @bits(%a: !coco.tensor<8x16x32xi1, replicated>, %b: !coco.tensor<8x32x24xi1, replicated>) {
  %c = coco.batch_matmul %a, %b : (!coco.tensor<8x16x32xi1, replicated>, !coco.tensor<8x32x24xi1, replicated>) -> !coco.tensor<8x16x24xi1, replicated>
  func.return
}

// -----

// CHECK: 'coco.batch_matmul' op result type must be !coco.tensor<8x16x24xf32, sliced<0>> by the layout rules, got !coco.tensor<8x16x24xf32, replicated>
func.func @result(%a: !coco.tensor<8x16x32xf32, sliced<0>>, %b: !coco.tensor<8x32x24xf32, sliced<0>>) {
  %c = coco.batch_matmul %a, %b : (!coco.tensor<8x16x32xf32, sliced<0>>, !coco.tensor<8x32x24xf32, sliced<0>>) -> !coco.tensor<8x16x24xf32, replicated>
  func.return
}
