// A value used but never defined is reported at its first use, as mlir-opt
// does ("use of undeclared SSA value name"), not at the end of the input; with
// --split-input-file, at its line in the whole file.

// RUN: not coconet-opt %s 2>&1 | filecheck %s
// RUN: not coconet-opt %s --split-input-file 2>&1 | filecheck %s
// RUN: coconet-opt %s --split-input-file --parsing-diagnostics | filecheck %s --check-prefix=EACH

// CHECK:      undefined-value.mlir:[[# @LINE + 22]]:21: error: use of undefined value '%zz'
// CHECK-NEXT: %s = coco.add %g, %zz
// CHECK-NEXT: {{^}}                    ^^^
// CHECK-NOT:  Traceback

// --parsing-diagnostics prints each chunk's parse error (in xDSL's layout) and
// goes on with the next chunk.
// EACH:       func.func @valid
// EACH:       // {{-}}----
// EACH-NEXT:  undefined-value.mlir:[[# @LINE + 13]]:21
// EACH:       use of undefined value '%zz'
// EACH:       // {{-}}----
// EACH-NEXT:  undefined-value.mlir:[[# @LINE + 23]]:15
// EACH:       use of undefined value '%y'

func.func @valid(%g: !coco.tensor<8xf32, replicated>) -> !coco.tensor<8xf32, replicated> {
  func.return %g : !coco.tensor<8xf32, replicated>
}

// -----

func.func @undefined(%g: !coco.tensor<8xf32, replicated>) -> !coco.tensor<8xf32, replicated> {
  %s = coco.add %g, %zz : (!coco.tensor<8xf32, replicated>, !coco.tensor<8xf32, replicated>) -> !coco.tensor<8xf32, replicated>
  %t = coco.add %zz, %s : (!coco.tensor<8xf32, replicated>, !coco.tensor<8xf32, replicated>) -> !coco.tensor<8xf32, replicated>
  func.return %t : !coco.tensor<8xf32, replicated>
}

// -----

func.func @defined_in_a_region(%g: !coco.tensor<8xf32, replicated>) -> !coco.tensor<8xf32, replicated> {
  %r = coco.fusion (%g) : (!coco.tensor<8xf32, replicated>) -> (!coco.tensor<8xf32, replicated>) {
  ^bb0(%x: !coco.tensor<8xf32, replicated>):
    %y = coco.neg %x : (!coco.tensor<8xf32, replicated>) -> !coco.tensor<8xf32, replicated>
    coco.yield %y : !coco.tensor<8xf32, replicated>
  }
  func.return %y : !coco.tensor<8xf32, replicated>
}
