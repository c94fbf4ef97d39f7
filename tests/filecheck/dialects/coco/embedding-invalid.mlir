// RUN: coconet-opt --split-input-file --verify-diagnostics %s | filecheck %s
// RUN: sed -e 's/pooling = sum/pooling = prod/' %s | not coconet-opt --split-input-file 2>&1 | filecheck %s --check-prefix=POOLING
// POOLING: <stdin>:{{[0-9]+}}:40: error: Expected `sum`, `mean`, or `max`.
// coco.embedding's rules (docs/dialect.md): each rejected with a diagnostic
// that names the op and states the rule.

// CHECK: 'coco.embedding' op needs tables [T, R, D] and indices [T, B, L], got ranks 2 and 3
func.func @rank(%t: !coco.tensor<10x4xf32, replicated>, %i: !coco.tensor<8x6x3xi32, replicated>) {
  %e = coco.embedding %t, %i pooling = sum : (!coco.tensor<10x4xf32, replicated>, !coco.tensor<8x6x3xi32, replicated>) -> !coco.tensor<8x6x4xf32, replicated>
  func.return
}

// -----

// CHECK: 'coco.embedding' op needs i32 indices, got f32
func.func @float_indices(%t: !coco.tensor<8x10x4xf32, replicated>, %i: !coco.tensor<8x6x3xf32, replicated>) {
  %e = coco.embedding %t, %i pooling = sum : (!coco.tensor<8x10x4xf32, replicated>, !coco.tensor<8x6x3xf32, replicated>) -> !coco.tensor<8x6x4xf32, replicated>
  func.return
}

// -----

// CHECK: 'coco.embedding' op needs floating-point tables, got i32
func.func @int_tables(%t: !coco.tensor<8x10x4xi32, replicated>, %i: !coco.tensor<8x6x3xi32, replicated>) {
  %e = coco.embedding %t, %i pooling = sum : (!coco.tensor<8x10x4xi32, replicated>, !coco.tensor<8x6x3xi32, replicated>) -> !coco.tensor<8x6x4xi32, replicated>
  func.return
}

// -----

// CHECK: 'coco.embedding' op tables [8, 10, 4] and indices [4, 6, 3] have different numbers of tables
func.func @tables(%t: !coco.tensor<8x10x4xf32, replicated>, %i: !coco.tensor<4x6x3xi32, replicated>) {
  %e = coco.embedding %t, %i pooling = sum : (!coco.tensor<8x10x4xf32, replicated>, !coco.tensor<4x6x3xi32, replicated>) -> !coco.tensor<8x6x4xf32, replicated>
  func.return
}

// -----

// CHECK: 'coco.embedding' op has no layout rule for tables sliced<1> and indices sliced<0> (allowed: tables replicated with indices replicated, sliced<0> or sliced<1>;
func.func @rows_and_tables(%t: !coco.tensor<8x10x4xf32, sliced<1>>, %i: !coco.tensor<8x6x3xi32, sliced<0>>) {
  %e = coco.embedding %t, %i pooling = sum : (!coco.tensor<8x10x4xf32, sliced<1>>, !coco.tensor<8x6x3xi32, sliced<0>>) -> !coco.tensor<8x6x4xf32, local>
  func.return
}

// -----

// CHECK: 'coco.embedding' op has no layout rule for tables replicated and indices sliced<2>
func.func @split_bags(%t: !coco.tensor<8x10x4xf32, replicated>, %i: !coco.tensor<8x6x4xi32, sliced<2>>) {
  %e = coco.embedding %t, %i pooling = sum : (!coco.tensor<8x10x4xf32, replicated>, !coco.tensor<8x6x4xi32, sliced<2>>) -> !coco.tensor<8x6x4xf32, sliced<2>>
  func.return
}

// -----

// CHECK: 'coco.embedding' op result type must be !coco.tensor<8x6x4xf32, local> by the layout rules, got !coco.tensor<8x6x4xf32, replicated>
func.func @partial(%t: !coco.tensor<8x10x4xf32, sliced<1>>, %i: !coco.tensor<8x6x3xi32, replicated>) {
  %e = coco.embedding %t, %i pooling = sum : (!coco.tensor<8x10x4xf32, sliced<1>>, !coco.tensor<8x6x3xi32, replicated>) -> !coco.tensor<8x6x4xf32, replicated>
  func.return
}

