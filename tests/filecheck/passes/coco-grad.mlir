// RUN: coconet-opt %s -p coco-grad | filecheck %s
// RUN: coconet-opt %s -p 'coco-grad{func=gathered suffix=_backward}' | filecheck %s --check-prefix=ONE

// Megatron's MLP: column-parallel matmul, relu, row-parallel matmul, one
// all_reduce. The backward recomputes what it reads of the forward (%h, %a),
// transposes the matmuls, and all-reduces the input's partial gradient once
// (Megatron's f); the all_reduce's own transpose is the identity (its g).
// CHECK-LABEL: func.func @mlp_grad(%x: !coco.tensor<8x16xf32, replicated>, %w1: !coco.tensor<16x64xf32, sliced<1>>, %w2: !coco.tensor<64x16xf32, sliced<0>>, %d_y: !coco.tensor<8x16xf32, replicated>) -> (!coco.tensor<8x16xf32, replicated>, !coco.tensor<16x64xf32, sliced<1>>, !coco.tensor<64x16xf32, sliced<0>>) {
// CHECK-NEXT:    %h = coco.matmul %x, %w1
// CHECK-NEXT:    %a = coco.relu %h
// CHECK-NEXT:    %0 = coco.transpose %w2 perm = [1, 0]
// CHECK-NEXT:    %d_a = coco.matmul %d_y, %0 : (!coco.tensor<8x16xf32, replicated>, !coco.tensor<16x64xf32, sliced<1>>) -> !coco.tensor<8x64xf32, sliced<1>>
// CHECK-NEXT:    %1 = coco.transpose %a perm = [1, 0]
// CHECK-NEXT:    %d_w2 = coco.matmul %1, %d_y : (!coco.tensor<64x8xf32, sliced<0>>, !coco.tensor<8x16xf32, replicated>) -> !coco.tensor<64x16xf32, sliced<0>>
// CHECK-NEXT:    %2 = coco.constant 0.000000e+00
// CHECK-NEXT:    %3 = coco.cmp %h, %2 predicate = gt
// CHECK-NEXT:    %d_h = coco.select %3, %d_a, %2
// CHECK-NEXT:    %4 = coco.transpose %w1 perm = [1, 0]
// CHECK-NEXT:    %d_x_partial = coco.matmul %d_h, %4 : (!coco.tensor<8x64xf32, sliced<1>>, !coco.tensor<64x16xf32, sliced<0>>) -> !coco.tensor<8x16xf32, local>
// CHECK-NEXT:    %5 = coco.transpose %x perm = [1, 0]
// CHECK-NEXT:    %d_w1 = coco.matmul %5, %d_h : (!coco.tensor<16x8xf32, replicated>, !coco.tensor<8x64xf32, sliced<1>>) -> !coco.tensor<16x64xf32, sliced<1>>
// CHECK-NEXT:    %d_x = coco.all_reduce %d_x_partial reduction = sum : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, replicated>
// CHECK-NEXT:    func.return %d_x, %d_w1, %d_w2
// CHECK-NOT:     coco.all_reduce
func.func @mlp(%x: !coco.tensor<8x16xf32, replicated>, %w1: !coco.tensor<16x64xf32, sliced<1>>, %w2: !coco.tensor<64x16xf32, sliced<0>>) -> !coco.tensor<8x16xf32, replicated> {
  %h = coco.matmul %x, %w1 : (!coco.tensor<8x16xf32, replicated>, !coco.tensor<16x64xf32, sliced<1>>) -> !coco.tensor<8x64xf32, sliced<1>>
  %a = coco.relu %h : (!coco.tensor<8x64xf32, sliced<1>>) -> !coco.tensor<8x64xf32, sliced<1>>
  %p = coco.matmul %a, %w2 : (!coco.tensor<8x64xf32, sliced<1>>, !coco.tensor<64x16xf32, sliced<0>>) -> !coco.tensor<8x16xf32, local>
  %y = coco.all_reduce %p reduction = sum : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, replicated>
  func.return %y : !coco.tensor<8x16xf32, replicated>
}

// all_gather <-> reduce_scatter: the gathered value's cotangent is partial
// (it meets a local value), so the slice's gradient is its reduce_scatter;
// the i32 argument has no gradient.
// CHECK-LABEL: func.func @gathered_grad(%s: !coco.tensor<16x8xf32, sliced<0>>, %m: !coco.tensor<16x8xf32, local>, %k: !coco.tensor<16x8xi32, replicated>, %d_y: !coco.tensor<16x8xf32, local>) -> (!coco.tensor<16x8xf32, sliced<0>>, !coco.tensor<16x8xf32, local>) {
// CHECK:         %d_s = coco.reduce_scatter %{{.*}} reduction = sum dim = 0 : !coco.tensor<16x8xf32, local> -> !coco.tensor<16x8xf32, sliced<0>>
// CHECK:         func.return %d_s, %d_m
// ONE-NOT:       @mlp_grad
// ONE:           func.func @gathered_backward(
// ONE-NOT:       @mlp_grad
func.func @gathered(%s: !coco.tensor<16x8xf32, sliced<0>>, %m: !coco.tensor<16x8xf32, local>, %k: !coco.tensor<16x8xi32, replicated>) -> !coco.tensor<16x8xf32, local> {
  %g = coco.all_gather %s : !coco.tensor<16x8xf32, sliced<0>> -> !coco.tensor<16x8xf32, replicated>
  %y = coco.mul %g, %m : (!coco.tensor<16x8xf32, replicated>, !coco.tensor<16x8xf32, local>) -> !coco.tensor<16x8xf32, local>
  func.return %y : !coco.tensor<16x8xf32, local>
}
