// coco.shift and coco.per_peer (docs/dialect.md): they print as they parse,
// in both the custom and the generic form, and what the verifier rejects
// names the op and the rule (per_peer-invalid.mlir).

// RUN: coconet-opt %s | filecheck %s
// RUN: coconet-opt %s | coconet-opt | filecheck %s
// RUN: coconet-opt %s --print-op-generic | coconet-opt | filecheck %s

// CHECK-LABEL: func.func @shift
// CHECK-NEXT:    %s = coco.shift %x by = 1 {name = "ring"} : !coco.tensor<16x32xf32, sliced<0>> -> !coco.tensor<16x32xf32, sliced<0>>
// CHECK-NEXT:    %l = coco.shift %g by = -3 : !coco.tensor<8xbf16, local> -> !coco.tensor<8xbf16, local>
func.func @shift(%x: !coco.tensor<16x32xf32, sliced<0>>, %g: !coco.tensor<8xbf16, local>) -> (!coco.tensor<16x32xf32, sliced<0>>, !coco.tensor<8xbf16, local>) {
  %s = coco.shift %x by = 1 {name = "ring"} : !coco.tensor<16x32xf32, sliced<0>> -> !coco.tensor<16x32xf32, sliced<0>>
  %l = coco.shift %g by = -3 : !coco.tensor<8xbf16, local> -> !coco.tensor<8xbf16, local>
  func.return %s, %l : !coco.tensor<16x32xf32, sliced<0>>, !coco.tensor<8xbf16, local>
}

// A gathered input (dim 0 is %x's sliced dim: the body sees it replicated)
// and a reduce-scattered output (sliced<0> outside, local yielded).
// CHECK-LABEL: func.func @mlp
// CHECK-NEXT:    %y = coco.per_peer (%x, %w1, %w2) dims = [0, -1, -1] -> [0] {name = "mlp"} : (!coco.tensor<16x32xf16, sliced<0>>, !coco.tensor<32x64xf16, sliced<1>>, !coco.tensor<64x32xf16, sliced<0>>) -> !coco.tensor<16x32xf16, sliced<0>> {
// CHECK-NEXT:    ^bb0(%a: !coco.tensor<16x32xf16, replicated>, %b: !coco.tensor<32x64xf16, sliced<1>>, %c: !coco.tensor<64x32xf16, sliced<0>>):
// CHECK:           coco.yield %p : !coco.tensor<16x32xf16, local>
func.func @mlp(%x: !coco.tensor<16x32xf16, sliced<0>>, %w1: !coco.tensor<32x64xf16, sliced<1>>, %w2: !coco.tensor<64x32xf16, sliced<0>>) -> !coco.tensor<16x32xf16, sliced<0>> {
  %y = coco.per_peer (%x, %w1, %w2) dims = [0, -1, -1] -> [0] {name = "mlp"} : (!coco.tensor<16x32xf16, sliced<0>>, !coco.tensor<32x64xf16, sliced<1>>, !coco.tensor<64x32xf16, sliced<0>>) -> !coco.tensor<16x32xf16, sliced<0>> {
  ^bb0(%a: !coco.tensor<16x32xf16, replicated>, %b: !coco.tensor<32x64xf16, sliced<1>>, %c: !coco.tensor<64x32xf16, sliced<0>>):
    %h = coco.matmul %a, %b : (!coco.tensor<16x32xf16, replicated>, !coco.tensor<32x64xf16, sliced<1>>) -> !coco.tensor<16x64xf16, sliced<1>>
    %g = coco.gelu %h : (!coco.tensor<16x64xf16, sliced<1>>) -> !coco.tensor<16x64xf16, sliced<1>>
    %p = coco.matmul %g, %c : (!coco.tensor<16x64xf16, sliced<1>>, !coco.tensor<64x32xf16, sliced<0>>) -> !coco.tensor<16x32xf16, local>
    coco.yield %p : !coco.tensor<16x32xf16, local>
  }
  func.return %y : !coco.tensor<16x32xf16, sliced<0>>
}
