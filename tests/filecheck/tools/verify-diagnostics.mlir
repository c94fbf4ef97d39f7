// RUN: coconet-opt %s --split-input-file --verify-diagnostics | filecheck %s
// RUN: not coconet-opt %s --split-input-file 2>&1 | filecheck %s --check-prefix=FAIL

// With --verify-diagnostics the verifier's message is printed (with its
// location in the whole file) and coconet-opt goes on to the next chunk;
// without it, the first invalid chunk ends the run with exit 1.

// CHECK-LABEL: func.func @valid
// CHECK:       // {{-}}----
// CHECK-NEXT:  verify-diagnostics.mlir:[[# @LINE + 17]]:3: error: 'coco.all_reduce' op {{.*}}result type must be !coco.tensor<8xf32, replicated> by the layout rules, got !coco.tensor<8xf32, local>
// CHECK-NEXT:  // {{-}}----
// CHECK-NEXT:  verify-diagnostics.mlir:[[# @LINE + 22]]:3: error: 'coco.add' op cannot combine a local operand with a sliced one
// CHECK-NEXT:  // {{-}}----
// CHECK-LABEL: func.func @also_valid

// FAIL:       verify-diagnostics.mlir:[[# @LINE + 11]]:3: error: 'coco.all_reduce' op
// FAIL-NOT:   Traceback

func.func @valid(%g: !coco.tensor<8xf32, local>) -> !coco.tensor<8xf32, replicated> {
  %s = coco.all_reduce %g reduction = sum : !coco.tensor<8xf32, local> -> !coco.tensor<8xf32, replicated>
  func.return %s : !coco.tensor<8xf32, replicated>
}

// -----

func.func @wrong_layout(%g: !coco.tensor<8xf32, local>) -> !coco.tensor<8xf32, local> {
  %s = coco.all_reduce %g reduction = sum : !coco.tensor<8xf32, local> -> !coco.tensor<8xf32, local>
  func.return %s : !coco.tensor<8xf32, local>
}

// -----

func.func @local_plus_sliced(%a: !coco.tensor<8xf32, local>, %b: !coco.tensor<8xf32, sliced<0>>) {
  %c = coco.add %a, %b : (!coco.tensor<8xf32, local>, !coco.tensor<8xf32, sliced<0>>) -> !coco.tensor<8xf32, local>
  func.return
}

// -----

func.func @also_valid(%g: !coco.tensor<8xf32, local>) {
  func.return
}
