// RUN: coconet-opt --split-input-file --verify-diagnostics %s | filecheck %s
// The rules of the norm-layer ops (docs/dialect.md, "Norm layers"): each
// rejected with a diagnostic that names the op and states the rule.

// CHECK: 'coco.reduce' op result type must be !coco.tensor<8x1xf32, sliced<0>> by the layout rules, got !coco.tensor<8xf32, sliced<0>>
func.func @keep_dims_shape(%x: !coco.tensor<8x16xf32, sliced<0>>) {
  %r = coco.reduce %x kind = sum dims = [1] keep_dims : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<8xf32, sliced<0>>
  func.return
}

// -----

// CHECK: 'coco.reduce' op result type must be !coco.tensor<8x1xf32, local> by the layout rules, got !coco.tensor<8x1xf32, sliced<1>>
func.func @keep_dims_sliced(%x: !coco.tensor<8x16xf32, sliced<1>>) {
  %r = coco.reduce %x kind = sum dims = [1] keep_dims : (!coco.tensor<8x16xf32, sliced<1>>) -> !coco.tensor<8x1xf32, sliced<1>>
  func.return
}

// -----

// CHECK: 'coco.transpose' op perm must be a permutation of the operand's 2 dims, got [0, 0]
func.func @perm(%x: !coco.tensor<8x16xf32, replicated>) {
  %t = coco.transpose %x perm = [0, 0] : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x8xf32, replicated>
  func.return
}

// -----

// CHECK: 'coco.transpose' op result type must be !coco.tensor<16x8xf32, sliced<1>> by the layout rules, got !coco.tensor<16x8xf32, sliced<0>>
func.func @transpose_cut(%x: !coco.tensor<8x16xf32, sliced<0>>) {
  %t = coco.transpose %x perm = [1, 0] : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<16x8xf32, sliced<0>>
  func.return
}

// -----

// CHECK: 'coco.reshape' op cannot reshape [8, 16] (128 elements) into [8, 15] (120 elements)
func.func @count(%x: !coco.tensor<8x16xf32, replicated>) {
  %r = coco.reshape %x : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x15xf32, replicated>
  func.return
}

// -----

// CHECK: 'coco.reshape' op cannot reshape !coco.tensor<8x16xf32, sliced<1>> into [128]: the dims before the sliced dim 1 hold 8 rows, and no prefix of [128] does (a reshape of a sliced value may merge or split dims before the sliced one, or from it on, but not across it)
func.func @across_the_cut(%x: !coco.tensor<8x16xf32, sliced<1>>) {
  %r = coco.reshape %x : (!coco.tensor<8x16xf32, sliced<1>>) -> !coco.tensor<128xf32, sliced<0>>
  func.return
}

// -----

// CHECK: 'coco.reshape' op result type must be !coco.tensor<2x4x16xf32, sliced<0>> by the layout rules, got !coco.tensor<2x4x16xf32, sliced<1>>
func.func @reshape_cut(%x: !coco.tensor<8x16xf32, sliced<0>>) {
  %r = coco.reshape %x : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<2x4x16xf32, sliced<1>>
  func.return
}

// -----

// CHECK: 'coco.reshape' op result type must be !coco.tensor<128xf32, local> by the layout rules, got !coco.tensor<128xf16, local>
func.func @reshape_type(%x: !coco.tensor<8x16xf32, local>) {
  %r = coco.reshape %x : (!coco.tensor<8x16xf32, local>) -> !coco.tensor<128xf16, local>
  func.return
}

// -----

// CHECK: 'coco.constant' op result must be a replicated tensor, got !coco.tensor<4x4xf32, sliced<0>>
func.func @splat_sliced() {
  %c = coco.constant 1.0 : !coco.tensor<4x4xf32, sliced<0>>
  func.return
}
