// coconet-opt on bad input: one located diagnostic on stderr, exit 1, never a
// Python traceback.

// RUN: not coconet-opt %s 2>&1 | filecheck %s --check-prefix=SYNTAX
// RUN: printf '\377\376\000garbage' > %t.bin.mlir
// RUN: not coconet-opt %t.bin.mlir 2>&1 | filecheck %s --check-prefix=BINARY
// RUN: printf '' > %t.empty.mlir
// RUN: not coconet-opt %t.empty.mlir 2>&1 | filecheck %s --check-prefix=EMPTY
// RUN: not coconet-opt %t.does-not-exist.mlir 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: grep -v '^//' %s | head -c 150 > %t.truncated.mlir
// RUN: not coconet-opt %t.truncated.mlir 2>&1 | filecheck %s --check-prefix=TRUNCATED
// RUN: sed -e 's/coco.all_reduce/coco.all_reduse/' %s > %t.unknown.mlir
// RUN: not coconet-opt %t.unknown.mlir 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: not coconet-opt %s -p canonicalize,no-such-pass 2>&1 | filecheck %s --check-prefix=PASS

// SYNTAX:      errors.mlir:[[# @LINE + 20]]:6: error: operation name expected
// SYNTAX-NEXT: %x = = 3
// SYNTAX-NEXT: {{^}}     ^
// SYNTAX-NOT:  Traceback
// BINARY:      bin.mlir: error: input is not UTF-8 text (byte 0)
// BINARY-NOT:  Traceback
// EMPTY:       empty.mlir: error: empty input, expected a module
// MISSING:     does-not-exist.mlir: error: No such file or directory
// TRUNCATED:   truncated.mlir:5:{{[0-9]+}}: error: Expected
// TRUNCATED-NOT: Traceback
// UNKNOWN:     unknown.mlir:[[# @LINE + 6]]:3: error: Operation coco.all_reduse is not registered
// UNKNOWN-NOT: Traceback
// PASS:        coconet-opt: error: unknown pass 'no-such-pass'
// PASS-NOT:    Traceback

func.func @f(%g: !coco.tensor<8xf32, local>) -> !coco.tensor<8xf32, replicated> {
  %s = coco.all_reduce %g reduction = sum : !coco.tensor<8xf32, local> -> !coco.tensor<8xf32, replicated>
  func.return %s : !coco.tensor<8xf32, replicated>
}

%x = = 3
