// RUN: coconet-opt %s | filecheck %s
// RUN: coconet-opt %s --print-op-generic | coconet-opt | filecheck %s
// RUN: coconet-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC
// The interpreter draws the indices in [0, R) and runs DLRM's pattern.
// RUN: coconet-run %s --world 4 --entry table_parallel | filecheck %s --check-prefix=RESULT

// coco.embedding: pooled lookup (DLRM's EmbeddingBag), docs/dialect.md.

// CHECK-LABEL: func.func @layouts(
// CHECK-NEXT:    %rep = coco.embedding %t, %i pooling = sum : (!coco.tensor<8x10x4xf32, replicated>, !coco.tensor<8x6x3xi32, replicated>) -> !coco.tensor<8x6x4xf32, replicated>
// CHECK-NEXT:    %tables = coco.embedding %ts, %i pooling = mean {name = "emb"} : (!coco.tensor<8x10x4xf32, sliced<0>>, !coco.tensor<8x6x3xi32, replicated>) -> !coco.tensor<8x6x4xf32, sliced<0>>
// CHECK-NEXT:    %both = coco.embedding %ts, %is pooling = max : (!coco.tensor<8x10x4xf32, sliced<0>>, !coco.tensor<8x6x3xi32, sliced<0>>) -> !coco.tensor<8x6x4xf32, sliced<0>>
// CHECK-NEXT:    %rows = coco.embedding %tr, %i pooling = sum : (!coco.tensor<8x10x4xf32, sliced<1>>, !coco.tensor<8x6x3xi32, replicated>) -> !coco.tensor<8x6x4xf32, local>
// CHECK-NEXT:    %cols = coco.embedding %tc, %i pooling = sum : (!coco.tensor<8x10x4xf32, sliced<2>>, !coco.tensor<8x6x3xi32, replicated>) -> !coco.tensor<8x6x4xf32, sliced<2>>
// CHECK-NEXT:    %batch = coco.embedding %t, %ib pooling = sum : (!coco.tensor<8x10x4xf32, replicated>, !coco.tensor<8x6x3xi32, sliced<1>>) -> !coco.tensor<8x6x4xf32, sliced<1>>
// CHECK-NEXT:    %half = coco.embedding %th, %il pooling = sum : (!coco.tensor<8x10x4xbf16, replicated>, !coco.tensor<8x6x3xi32, local>) -> !coco.tensor<8x6x4xbf16, local>
// GENERIC:       "coco.embedding"(%t, %i) <{pooling = #coco<pooling sum>}> : (!coco.tensor<8x10x4xf32, replicated>, !coco.tensor<8x6x3xi32, replicated>) -> !coco.tensor<8x6x4xf32, replicated>
func.func @layouts(%t: !coco.tensor<8x10x4xf32, replicated>, %ts: !coco.tensor<8x10x4xf32, sliced<0>>,
                   %tr: !coco.tensor<8x10x4xf32, sliced<1>>, %tc: !coco.tensor<8x10x4xf32, sliced<2>>,
                   %th: !coco.tensor<8x10x4xbf16, replicated>,
                   %i: !coco.tensor<8x6x3xi32, replicated>, %is: !coco.tensor<8x6x3xi32, sliced<0>>,
                   %ib: !coco.tensor<8x6x3xi32, sliced<1>>, %il: !coco.tensor<8x6x3xi32, local>) {
  %rep = coco.embedding %t, %i pooling = sum : (!coco.tensor<8x10x4xf32, replicated>, !coco.tensor<8x6x3xi32, replicated>) -> !coco.tensor<8x6x4xf32, replicated>
  %tables = coco.embedding %ts, %i pooling = mean {name = "emb"} : (!coco.tensor<8x10x4xf32, sliced<0>>, !coco.tensor<8x6x3xi32, replicated>) -> !coco.tensor<8x6x4xf32, sliced<0>>
  %both = coco.embedding %ts, %is pooling = max : (!coco.tensor<8x10x4xf32, sliced<0>>, !coco.tensor<8x6x3xi32, sliced<0>>) -> !coco.tensor<8x6x4xf32, sliced<0>>
  %rows = coco.embedding %tr, %i pooling = sum : (!coco.tensor<8x10x4xf32, sliced<1>>, !coco.tensor<8x6x3xi32, replicated>) -> !coco.tensor<8x6x4xf32, local>
  %cols = coco.embedding %tc, %i pooling = sum : (!coco.tensor<8x10x4xf32, sliced<2>>, !coco.tensor<8x6x3xi32, replicated>) -> !coco.tensor<8x6x4xf32, sliced<2>>
  %batch = coco.embedding %t, %ib pooling = sum : (!coco.tensor<8x10x4xf32, replicated>, !coco.tensor<8x6x3xi32, sliced<1>>) -> !coco.tensor<8x6x4xf32, sliced<1>>
  %half = coco.embedding %th, %il pooling = sum : (!coco.tensor<8x10x4xbf16, replicated>, !coco.tensor<8x6x3xi32, local>) -> !coco.tensor<8x6x4xbf16, local>
  func.return
}

// RESULT: table_parallel.result0 8x8x4xf32 sliced<1>
func.func @table_parallel(%t: !coco.tensor<8x16x4xf32, sliced<0>>, %i: !coco.tensor<8x8x3xi32, sliced<0>>) -> !coco.tensor<8x8x4xf32, sliced<1>> {
  %e = coco.embedding %t, %i pooling = sum : (!coco.tensor<8x16x4xf32, sliced<0>>, !coco.tensor<8x8x3xi32, sliced<0>>) -> !coco.tensor<8x8x4xf32, sliced<0>>
  %a = coco.all_to_all %e dim = 1 : !coco.tensor<8x8x4xf32, sliced<0>> -> !coco.tensor<8x8x4xf32, sliced<1>>
  func.return %a : !coco.tensor<8x8x4xf32, sliced<1>>
}

