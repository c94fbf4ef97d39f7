// RUN: coconet-opt %s -p coco-slice-norm | filecheck %s
// RUN: not coconet-opt %s -p 'coco-slice-norm{op=whole_norm}' 2>&1 | filecheck %s --check-prefix=REFUSE

// LAMB's norm of the replicated weights, which the update reads sliced: the
// squares and the sum of each rank's block, then a scalar all_reduce.
// CHECK-LABEL: func.func @lamb_norm(
// CHECK-NEXT:    %w_slice = coco.all_slice %w dim = 0
// CHECK-NEXT:    %n_square = coco.mul %w_slice, %w_slice : (!coco.tensor<1024xf32, sliced<0>>, !coco.tensor<1024xf32, sliced<0>>) -> !coco.tensor<1024xf32, sliced<0>>
// CHECK-NEXT:    %n_partial = coco.reduce %n_square kind = sum dims = [0] : (!coco.tensor<1024xf32, sliced<0>>) -> !coco.tensor<f32, local>
// CHECK-NEXT:    %n_squared = coco.all_reduce %n_partial reduction = sum {name = "w_norm_ar"} : !coco.tensor<f32, local> -> !coco.tensor<f32, replicated>
// CHECK-NEXT:    %n = coco.sqrt %n_squared {name = "w_norm"} : (!coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
// CHECK-NOT:     coco.norm
func.func @lamb_norm(%w: !coco.tensor<1024xf32, replicated>, %d: !coco.tensor<1024xf32, sliced<0>>) -> (!coco.tensor<f32, replicated>, !coco.tensor<1024xf32, sliced<0>>) {
  %w_slice = coco.all_slice %w dim = 0 : (!coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, sliced<0>>
  %n = coco.norm %w {name = "w_norm"} : (!coco.tensor<1024xf32, replicated>) -> !coco.tensor<f32, replicated>
  %w1 = coco.sub %w_slice, %d : (!coco.tensor<1024xf32, sliced<0>>, !coco.tensor<1024xf32, sliced<0>>) -> !coco.tensor<1024xf32, sliced<0>>
  func.return %n, %w1 : !coco.tensor<f32, replicated>, !coco.tensor<1024xf32, sliced<0>>
}

// bf16, the slice after the norm: the all_slice moves up; squares and sums in
// f32, the root rounded once.
// CHECK-LABEL: func.func @half_norm(
// CHECK-NEXT:    %s = coco.all_slice %x dim = 1
// CHECK-NEXT:    %{{.*}} = coco.convert %s : (!coco.tensor<8x512xbf16, sliced<1>>) -> !coco.tensor<8x512xf32, sliced<1>>
// CHECK-NEXT:    %{{.*}} = coco.mul
// CHECK-NEXT:    %{{.*}} = coco.reduce %{{.*}} kind = sum dims = [0, 1] : (!coco.tensor<8x512xf32, sliced<1>>) -> !coco.tensor<f32, local>
// CHECK-NEXT:    %{{.*}} = coco.all_reduce
// CHECK-NEXT:    %{{.*}} = coco.sqrt
// CHECK-NEXT:    %n = coco.convert %{{.*}} {name = "x_norm"} : (!coco.tensor<f32, replicated>) -> !coco.tensor<bf16, replicated>
func.func @half_norm(%x: !coco.tensor<8x512xbf16, replicated>) -> (!coco.tensor<bf16, replicated>, !coco.tensor<8x512xbf16, sliced<1>>) {
  %n = coco.norm %x {name = "x_norm"} : (!coco.tensor<8x512xbf16, replicated>) -> !coco.tensor<bf16, replicated>
  %s = coco.all_slice %x dim = 1 : (!coco.tensor<8x512xbf16, replicated>) -> !coco.tensor<8x512xbf16, sliced<1>>
  func.return %n, %s : !coco.tensor<bf16, replicated>, !coco.tensor<8x512xbf16, sliced<1>>
}

// Nothing slices %w: the norm stays (and op= refuses, naming the rule).
// CHECK-LABEL: func.func @whole(
// CHECK-NEXT:    coco.norm %w
// REFUSE: error: 'coco.norm' op coco-slice-norm cannot apply: nothing slices its operand (no coco.all_slice of it in the same block)
func.func @whole(%w: !coco.tensor<64xf32, replicated>) -> !coco.tensor<f32, replicated> {
  %n = coco.norm %w {name = "whole_norm"} : (!coco.tensor<64xf32, replicated>) -> !coco.tensor<f32, replicated>
  func.return %n : !coco.tensor<f32, replicated>
}
