// RUN: coconet-opt %s | filecheck %s
// RUN: coconet-opt %s --print-op-generic | coconet-opt | filecheck %s
// RUN: coconet-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC
// RUN: coconet-run %s --world 4 --entry layer_norm | filecheck %s --check-prefix=INTERP
// RUN: coconet-run %s --world 4 --entry layer_norm --backend emu --check | filecheck %s --check-prefix=EMU

// The ops a norm layer is written with (docs/dialect.md, "Norm layers"): a
// keep-dims reduction, transpose, reshape and splat constants.

// CHECK-LABEL: func.func @layouts(
// CHECK-NEXT:    %rows = coco.reduce %x kind = sum dims = [1] keep_dims : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<8x1xf32, sliced<0>>
// CHECK-NEXT:    %part = coco.reduce %h kind = max dims = [1] keep_dims {name = "p"} : (!coco.tensor<8x16xf32, sliced<1>>) -> !coco.tensor<8x1xf32, local>
// CHECK-NEXT:    %all = coco.reduce %x kind = min dims = [0, 1] keep_dims : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<1x1xf32, local>
// CHECK-NEXT:    %t = coco.transpose %x perm = [1, 0] : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<16x8xf32, sliced<1>>
// CHECK-NEXT:    %t3 = coco.transpose %c perm = [2, 0, 1] : (!coco.tensor<2x4x8xbf16, sliced<2>>) -> !coco.tensor<8x2x4xbf16, sliced<0>>
// CHECK-NEXT:    %flat = coco.reshape %x : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<128xf32, sliced<0>>
// CHECK-NEXT:    %split = coco.reshape %h : (!coco.tensor<8x16xf32, sliced<1>>) -> !coco.tensor<8x4x4xf32, sliced<1>>
// CHECK-NEXT:    %heads = coco.reshape %r : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<2x4x16xf32, replicated>
// CHECK-NEXT:    %ones = coco.constant 1.000000e+00 : !coco.tensor<16x1xf32, replicated>
// CHECK-NEXT:    %zeros = coco.constant 0 : !coco.tensor<4xi32, replicated>
// GENERIC:       "coco.reduce"(%x) <{kind = #coco<reduce_kind sum>, dims = array<i64: 1>, keep_dims}>
// GENERIC:       "coco.transpose"(%x) <{perm = array<i64: 1, 0>}>
// GENERIC:       "coco.reshape"(%x) : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<128xf32, sliced<0>>
func.func @layouts(%x: !coco.tensor<8x16xf32, sliced<0>>, %h: !coco.tensor<8x16xf32, sliced<1>>,
                   %r: !coco.tensor<8x16xf32, replicated>, %c: !coco.tensor<2x4x8xbf16, sliced<2>>) {
  %rows = coco.reduce %x kind = sum dims = [1] keep_dims : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<8x1xf32, sliced<0>>
  %part = coco.reduce %h kind = max dims = [1] keep_dims {name = "p"} : (!coco.tensor<8x16xf32, sliced<1>>) -> !coco.tensor<8x1xf32, local>
  %all = coco.reduce %x kind = min dims = [0, 1] keep_dims : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<1x1xf32, local>
  %t = coco.transpose %x perm = [1, 0] : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<16x8xf32, sliced<1>>
  %t3 = coco.transpose %c perm = [2, 0, 1] : (!coco.tensor<2x4x8xbf16, sliced<2>>) -> !coco.tensor<8x2x4xbf16, sliced<0>>
  %flat = coco.reshape %x : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<128xf32, sliced<0>>
  %split = coco.reshape %h : (!coco.tensor<8x16xf32, sliced<1>>) -> !coco.tensor<8x4x4xf32, sliced<1>>
  %heads = coco.reshape %r : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<2x4x16xf32, replicated>
  %ones = coco.constant 1.0 : !coco.tensor<16x1xf32, replicated>
  %zeros = coco.constant 0 : !coco.tensor<4xi32, replicated>
  func.return
}

// LayerNorm over the hidden dim of rows cut across ranks, as cc.layer_norm
// writes it: the statistics are per-rank rows of size 1, broadcast back.
// INTERP: norm-layers.mlir: 1 output on 4 ranks (seed 0, backend numpy)
// INTERP-NEXT: layer_norm.result0 16x32xf32 sliced<0>
// EMU: matches the interpreter: 1 output agrees on 4 ranks (seed 0)
func.func @layer_norm(%x: !coco.tensor<16x32xf32, sliced<0>>, %w: !coco.tensor<32xf32, replicated>) -> !coco.tensor<16x32xf32, sliced<0>> {
  %sum = coco.reduce %x kind = sum dims = [1] keep_dims : (!coco.tensor<16x32xf32, sliced<0>>) -> !coco.tensor<16x1xf32, sliced<0>>
  %inv = coco.constant 3.125000e-02 : !coco.tensor<f32, replicated>
  %mean = coco.mul %sum, %inv : (!coco.tensor<16x1xf32, sliced<0>>, !coco.tensor<f32, replicated>) -> !coco.tensor<16x1xf32, sliced<0>>
  %xc = coco.sub %x, %mean : (!coco.tensor<16x32xf32, sliced<0>>, !coco.tensor<16x1xf32, sliced<0>>) -> !coco.tensor<16x32xf32, sliced<0>>
  %sq = coco.mul %xc, %xc : (!coco.tensor<16x32xf32, sliced<0>>, !coco.tensor<16x32xf32, sliced<0>>) -> !coco.tensor<16x32xf32, sliced<0>>
  %ssq = coco.reduce %sq kind = sum dims = [1] keep_dims : (!coco.tensor<16x32xf32, sliced<0>>) -> !coco.tensor<16x1xf32, sliced<0>>
  %var = coco.mul %ssq, %inv : (!coco.tensor<16x1xf32, sliced<0>>, !coco.tensor<f32, replicated>) -> !coco.tensor<16x1xf32, sliced<0>>
  %eps = coco.constant 1.000000e-05 : !coco.tensor<f32, replicated>
  %ve = coco.add %var, %eps : (!coco.tensor<16x1xf32, sliced<0>>, !coco.tensor<f32, replicated>) -> !coco.tensor<16x1xf32, sliced<0>>
  %rstd = coco.rsqrt %ve : (!coco.tensor<16x1xf32, sliced<0>>) -> !coco.tensor<16x1xf32, sliced<0>>
  %n = coco.mul %xc, %rstd : (!coco.tensor<16x32xf32, sliced<0>>, !coco.tensor<16x1xf32, sliced<0>>) -> !coco.tensor<16x32xf32, sliced<0>>
  %y = coco.mul %n, %w : (!coco.tensor<16x32xf32, sliced<0>>, !coco.tensor<32xf32, replicated>) -> !coco.tensor<16x32xf32, sliced<0>>
  func.return %y : !coco.tensor<16x32xf32, sliced<0>>
}
