// RUN: coconet-opt %s -p 'coco-optimize{world=4},convert-coco-to-gpu{world=4}' --remarks -o /dev/null 2>&1 | filecheck %s
// RUN: coconet-opt %s -p 'coco-optimize{world=4},convert-coco-to-gpu{world=4}' --remarks-filter-missed='convert-.*' -o /dev/null 2>&1 | filecheck %s --check-prefix=MISSED
// RUN: coconet-opt %s -p 'coco-optimize{world=4},convert-coco-to-gpu{world=4}' -o /dev/null 2>&1 | filecheck %s --check-prefix=NONE --allow-empty
// RUN: not coconet-opt %s --remarks-filter='(' 2>&1 | filecheck %s --check-prefix=BAD
// Optimization remarks, as mlir-opt prints them (docs/cli.md, "Remarks"): an
// expert GEMM behind a gelu is one tile kernel that applies the gelu to each
// token it loads; behind `d * d` (two operands) the mul stays a kernel of its
// own, and a missed remark says so.

// CHECK-DAG: remarks.mlir:[[# @LINE + 17]]:3: remark: [Passed] FusedCollective | Category:coco-fuse-collective | Function=moe | Remark="'coco.batch_matmul' and its 'coco.all_to_all' made one region"
// CHECK-DAG: remarks.mlir:[[# @LINE + 15]]:3: remark: [Passed] Prologue | Category:convert-coco-to-gpu | Function=moe | Remark="'coco.gelu' is applied by the tile kernel to each element it loads"
// CHECK-DAG: remarks.mlir:[[# @LINE + 15]]:3: remark: [Passed] OneKernel | Category:convert-coco-to-gpu | Function=moe | Remark="lowered as one kernel: a tile kernel (docs/fused-operators.md)"
// CHECK-DAG: remarks.mlir:[[# @LINE + 22]]:3: remark: [Missed] Prologue | Category:convert-coco-to-gpu | Function=square | Reason="'coco.mul' runs as a kernel of its own before the tile kernel that reads its result: a tile kernel applies single elementwise ops of one operand, of their result's type, to its first operand (docs/fused-operators.md)"

// MISSED-NOT: [Passed]
// MISSED: remark: [Missed] Prologue | Category:convert-coco-to-gpu | Function=square
// MISSED-NOT: remark:

// NONE-NOT: remark

// BAD: coconet-opt: error: bad remarks filter '(': missing ), unterminated subpattern at position 0

func.func @moe(%tokens: !coco.tensor<8x8x2x32xf32, sliced<1>>,
               %w: !coco.tensor<8x32x32xf32, sliced<0>>) -> !coco.tensor<8x8x2x32xf32, sliced<1>> {
  %dispatch = coco.all_to_all %tokens dim = 0 : !coco.tensor<8x8x2x32xf32, sliced<1>> -> !coco.tensor<8x8x2x32xf32, sliced<0>>
  %act = coco.gelu %dispatch : (!coco.tensor<8x8x2x32xf32, sliced<0>>) -> !coco.tensor<8x8x2x32xf32, sliced<0>>
  %experts = coco.batch_matmul %act, %w : (!coco.tensor<8x8x2x32xf32, sliced<0>>, !coco.tensor<8x32x32xf32, sliced<0>>) -> !coco.tensor<8x8x2x32xf32, sliced<0>>
  %combine = coco.all_to_all %experts dim = 1 : !coco.tensor<8x8x2x32xf32, sliced<0>> -> !coco.tensor<8x8x2x32xf32, sliced<1>>
  func.return %combine : !coco.tensor<8x8x2x32xf32, sliced<1>>
}

func.func @square(%tokens: !coco.tensor<8x8x2x32xf32, sliced<1>>,
                  %w: !coco.tensor<8x32x32xf32, sliced<0>>) -> !coco.tensor<8x8x2x32xf32, sliced<1>> {
  %dispatch = coco.all_to_all %tokens dim = 0 : !coco.tensor<8x8x2x32xf32, sliced<1>> -> !coco.tensor<8x8x2x32xf32, sliced<0>>
  %act = coco.mul %dispatch, %dispatch : (!coco.tensor<8x8x2x32xf32, sliced<0>>, !coco.tensor<8x8x2x32xf32, sliced<0>>) -> !coco.tensor<8x8x2x32xf32, sliced<0>>
  %experts = coco.batch_matmul %act, %w : (!coco.tensor<8x8x2x32xf32, sliced<0>>, !coco.tensor<8x32x32xf32, sliced<0>>) -> !coco.tensor<8x8x2x32xf32, sliced<0>>
  %combine = coco.all_to_all %experts dim = 1 : !coco.tensor<8x8x2x32xf32, sliced<0>> -> !coco.tensor<8x8x2x32xf32, sliced<1>>
  func.return %combine : !coco.tensor<8x8x2x32xf32, sliced<1>>
}
