// RUN: coconet-opt %s | coconet-opt | filecheck %s
// Every coco type and op in its custom syntax: parse, print, parse again.

builtin.module attributes {coco.world_size = 4 : i64} {

// CHECK-LABEL: func.func @types
// CHECK-SAME: %a: !coco.tensor<f32, replicated>
// CHECK-SAME: %b: !coco.tensor<8x1024x3072xf16, sliced<2>>
// CHECK-SAME: %c: !coco.tensor<4xbf16, local>
// CHECK-SAME: %d: !coco.tensor<4x8xf64, sliced<0>>
// CHECK-SAME: %e: !coco.tensor<4xi32, replicated>
// CHECK-SAME: %f: !coco.tensor<4xi1, local>
func.func @types(%a: !coco.tensor<f32, replicated>,
                 %b: !coco.tensor<8x1024x3072xf16, sliced<2>>,
                 %c: !coco.tensor<4xbf16, local>,
                 %d: !coco.tensor<4x8xf64, sliced<0>>,
                 %e: !coco.tensor<4xi32, replicated>,
                 %f: !coco.tensor<4xi1, local>) {
  func.return
}

// CHECK-LABEL: func.func @sgd
// CHECK-NEXT: %s = coco.all_reduce %g reduction = sum : !coco.tensor<1024xf32, local> -> !coco.tensor<1024xf32, replicated>
// CHECK-NEXT: %d = coco.mul %lr, %s : (!coco.tensor<f32, replicated>, !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated>
// CHECK-NEXT: %w1 = coco.sub %w, %d : (!coco.tensor<1024xf32, replicated>, !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated>
// CHECK-NEXT: coco.update %w, %w1 : !coco.tensor<1024xf32, replicated>
// CHECK-NEXT: func.return
func.func @sgd(%g: !coco.tensor<1024xf32, local>,
               %w: !coco.tensor<1024xf32, replicated>,
               %lr: !coco.tensor<f32, replicated>) {
  %s = coco.all_reduce %g reduction = sum : !coco.tensor<1024xf32, local> -> !coco.tensor<1024xf32, replicated>
  %d = coco.mul %lr, %s : (!coco.tensor<f32, replicated>, !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated>
  %w1 = coco.sub %w, %d : (!coco.tensor<1024xf32, replicated>, !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated>
  coco.update %w, %w1 : !coco.tensor<1024xf32, replicated>
  func.return
}

// CHECK-LABEL: func.func @binary
// CHECK-NEXT: %0 = coco.add %x, %r : (!coco.tensor<8x16xf32, sliced<0>>, !coco.tensor<16xf32, replicated>) -> !coco.tensor<8x16xf32, sliced<0>>
// CHECK-NEXT: %1 = coco.sub %x, %x : (!coco.tensor<8x16xf32, sliced<0>>, !coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<8x16xf32, sliced<0>>
// CHECK-NEXT: %2 = coco.mul %l, %r : (!coco.tensor<8x16xf32, local>, !coco.tensor<16xf32, replicated>) -> !coco.tensor<8x16xf32, local>
// CHECK-NEXT: %3 = coco.div %r, %r : (!coco.tensor<16xf32, replicated>, !coco.tensor<16xf32, replicated>) -> !coco.tensor<16xf32, replicated>
// CHECK-NEXT: %4 = coco.max %i, %i : (!coco.tensor<4xi32, replicated>, !coco.tensor<4xi32, replicated>) -> !coco.tensor<4xi32, replicated>
// CHECK-NEXT: %5 = coco.min %s, %x : (!coco.tensor<f32, replicated>, !coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<8x16xf32, sliced<0>>
// CHECK-NEXT: %6 = coco.pow %c, %r : (!coco.tensor<8x1xf32, replicated>, !coco.tensor<16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
// CHECK-NEXT: %7 = coco.add %y, %x1 {name = "residual"} : (!coco.tensor<16xf32, sliced<0>>, !coco.tensor<8x16xf32, sliced<1>>) -> !coco.tensor<8x16xf32, sliced<1>>
func.func @binary(%x: !coco.tensor<8x16xf32, sliced<0>>, %r: !coco.tensor<16xf32, replicated>,
                  %l: !coco.tensor<8x16xf32, local>, %i: !coco.tensor<4xi32, replicated>,
                  %s: !coco.tensor<f32, replicated>, %c: !coco.tensor<8x1xf32, replicated>,
                  %y: !coco.tensor<16xf32, sliced<0>>, %x1: !coco.tensor<8x16xf32, sliced<1>>) {
  %0 = coco.add %x, %r : (!coco.tensor<8x16xf32, sliced<0>>, !coco.tensor<16xf32, replicated>) -> !coco.tensor<8x16xf32, sliced<0>>
  %1 = coco.sub %x, %x : (!coco.tensor<8x16xf32, sliced<0>>, !coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<8x16xf32, sliced<0>>
  %2 = coco.mul %l, %r : (!coco.tensor<8x16xf32, local>, !coco.tensor<16xf32, replicated>) -> !coco.tensor<8x16xf32, local>
  %3 = coco.div %r, %r : (!coco.tensor<16xf32, replicated>, !coco.tensor<16xf32, replicated>) -> !coco.tensor<16xf32, replicated>
  %4 = coco.max %i, %i : (!coco.tensor<4xi32, replicated>, !coco.tensor<4xi32, replicated>) -> !coco.tensor<4xi32, replicated>
  %5 = coco.min %s, %x : (!coco.tensor<f32, replicated>, !coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<8x16xf32, sliced<0>>
  %6 = coco.pow %c, %r : (!coco.tensor<8x1xf32, replicated>, !coco.tensor<16xf32, replicated>) -> !coco.tensor<8x16xf32, replicated>
  %7 = coco.add %y, %x1 {name = "residual"} : (!coco.tensor<16xf32, sliced<0>>, !coco.tensor<8x16xf32, sliced<1>>) -> !coco.tensor<8x16xf32, sliced<1>>
  func.return
}

// CHECK-LABEL: func.func @compare_select
// CHECK-NEXT: %m = coco.cmp %a, %b predicate = gt : (!coco.tensor<8xf32, local>, !coco.tensor<f32, replicated>) -> !coco.tensor<8xi1, local>
// CHECK-NEXT: %e = coco.cmp %a, %a predicate = eq
// CHECK-NEXT: %n = coco.cmp %a, %a predicate = ne
// CHECK-NEXT: %lt = coco.cmp %a, %a predicate = lt
// CHECK-NEXT: %le = coco.cmp %a, %a predicate = le
// CHECK-NEXT: %ge = coco.cmp %a, %a predicate = ge
// CHECK-NEXT: %s = coco.select %m, %a, %b : (!coco.tensor<8xi1, local>, !coco.tensor<8xf32, local>, !coco.tensor<f32, replicated>) -> !coco.tensor<8xf32, local>
func.func @compare_select(%a: !coco.tensor<8xf32, local>, %b: !coco.tensor<f32, replicated>) {
  %m = coco.cmp %a, %b predicate = gt : (!coco.tensor<8xf32, local>, !coco.tensor<f32, replicated>) -> !coco.tensor<8xi1, local>
  %e = coco.cmp %a, %a predicate = eq : (!coco.tensor<8xf32, local>, !coco.tensor<8xf32, local>) -> !coco.tensor<8xi1, local>
  %n = coco.cmp %a, %a predicate = ne : (!coco.tensor<8xf32, local>, !coco.tensor<8xf32, local>) -> !coco.tensor<8xi1, local>
  %lt = coco.cmp %a, %a predicate = lt : (!coco.tensor<8xf32, local>, !coco.tensor<8xf32, local>) -> !coco.tensor<8xi1, local>
  %le = coco.cmp %a, %a predicate = le : (!coco.tensor<8xf32, local>, !coco.tensor<8xf32, local>) -> !coco.tensor<8xi1, local>
  %ge = coco.cmp %a, %a predicate = ge : (!coco.tensor<8xf32, local>, !coco.tensor<8xf32, local>) -> !coco.tensor<8xi1, local>
  %s = coco.select %m, %a, %b : (!coco.tensor<8xi1, local>, !coco.tensor<8xf32, local>, !coco.tensor<f32, replicated>) -> !coco.tensor<8xf32, local>
  func.return
}

// CHECK-LABEL: func.func @unary
// CHECK-NEXT: %0 = coco.neg %a : (!coco.tensor<4x8xf16, sliced<1>>) -> !coco.tensor<4x8xf16, sliced<1>>
// CHECK-NEXT: %1 = coco.abs %i : (!coco.tensor<4xi32, local>) -> !coco.tensor<4xi32, local>
// CHECK-NEXT: %2 = coco.sqrt %a
// CHECK-NEXT: %3 = coco.rsqrt %a
// CHECK-NEXT: %4 = coco.exp %a
// CHECK-NEXT: %5 = coco.log %a
// CHECK-NEXT: %6 = coco.tanh %a
// CHECK-NEXT: %7 = coco.relu %i : (!coco.tensor<4xi32, local>) -> !coco.tensor<4xi32, local>
// CHECK-NEXT: %8 = coco.gelu %a : (!coco.tensor<4x8xf16, sliced<1>>) -> !coco.tensor<4x8xf16, sliced<1>>
// CHECK-NEXT: %9 = coco.convert %a : (!coco.tensor<4x8xf16, sliced<1>>) -> !coco.tensor<4x8xf32, sliced<1>>
// CHECK-NEXT: %10 = coco.convert %i : (!coco.tensor<4xi32, local>) -> !coco.tensor<4xbf16, local>
func.func @unary(%a: !coco.tensor<4x8xf16, sliced<1>>, %i: !coco.tensor<4xi32, local>) {
  %0 = coco.neg %a : (!coco.tensor<4x8xf16, sliced<1>>) -> !coco.tensor<4x8xf16, sliced<1>>
  %1 = coco.abs %i : (!coco.tensor<4xi32, local>) -> !coco.tensor<4xi32, local>
  %2 = coco.sqrt %a : (!coco.tensor<4x8xf16, sliced<1>>) -> !coco.tensor<4x8xf16, sliced<1>>
  %3 = coco.rsqrt %a : (!coco.tensor<4x8xf16, sliced<1>>) -> !coco.tensor<4x8xf16, sliced<1>>
  %4 = coco.exp %a : (!coco.tensor<4x8xf16, sliced<1>>) -> !coco.tensor<4x8xf16, sliced<1>>
  %5 = coco.log %a : (!coco.tensor<4x8xf16, sliced<1>>) -> !coco.tensor<4x8xf16, sliced<1>>
  %6 = coco.tanh %a : (!coco.tensor<4x8xf16, sliced<1>>) -> !coco.tensor<4x8xf16, sliced<1>>
  %7 = coco.relu %i : (!coco.tensor<4xi32, local>) -> !coco.tensor<4xi32, local>
  %8 = coco.gelu %a : (!coco.tensor<4x8xf16, sliced<1>>) -> !coco.tensor<4x8xf16, sliced<1>>
  %9 = coco.convert %a : (!coco.tensor<4x8xf16, sliced<1>>) -> !coco.tensor<4x8xf32, sliced<1>>
  %10 = coco.convert %i : (!coco.tensor<4xi32, local>) -> !coco.tensor<4xbf16, local>
  func.return
}

// CHECK-LABEL: func.func @constants
// CHECK-NEXT: coco.constant 9.000000e-01 : !coco.tensor<f32, replicated>
// CHECK-NEXT: coco.constant 1.000000e+00 : !coco.tensor<f32, replicated>
// CHECK-NEXT: coco.constant -2.500000e-01 : !coco.tensor<bf16, replicated>
// CHECK-NEXT: coco.constant 1.000000e-01 : !coco.tensor<f64, replicated>
// CHECK-NEXT: coco.constant 0.12345678901234568 : !coco.tensor<f64, replicated>
// CHECK-NEXT: coco.constant -3 : !coco.tensor<i32, replicated>
// CHECK-NEXT: coco.constant true : !coco.tensor<i1, replicated>
// CHECK-NEXT: coco.constant false : !coco.tensor<i1, replicated>
// CHECK-NEXT: coco.constant 0xFF800000 : !coco.tensor<f32, replicated>
// CHECK-NEXT: coco.constant 0x7C00 : !coco.tensor<f16, replicated>
// CHECK-NEXT: coco.constant 1.000000e+00 : !coco.tensor<f32, replicated>
// CHECK-NEXT: coco.constant 5.000000e-01 {name = "half"} : !coco.tensor<f64, replicated>
func.func @constants() {
  %0 = coco.constant 9.000000e-01 : !coco.tensor<f32, replicated>
  %1 = coco.constant 1 : !coco.tensor<f32, replicated>
  %2 = coco.constant -0.25 : !coco.tensor<bf16, replicated>
  %3 = coco.constant 0.1 : !coco.tensor<f64, replicated>
  %p = coco.constant 0.123456789012345678 : !coco.tensor<f64, replicated>
  %4 = coco.constant -3 : !coco.tensor<i32, replicated>
  %5 = coco.constant true : !coco.tensor<i1, replicated>
  %6 = coco.constant 0 : !coco.tensor<i1, replicated>
  %7 = coco.constant 0xFF800000 : !coco.tensor<f32, replicated>
  %8 = coco.constant 0x7C00 : !coco.tensor<f16, replicated>
  %9 = coco.constant 0x3F800000 : !coco.tensor<f32, replicated>
  %10 = coco.constant 0.5 {name = "half"} : !coco.tensor<f64, replicated>
  func.return
}

// CHECK-LABEL: func.func @reductions
// CHECK-NEXT: %d = coco.dropout %x p = 1.000000e-01 seed = 7 : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<8x16xf32, sliced<0>>
// CHECK-NEXT: %d0 = coco.dropout %x p = 0.000000e+00 seed = 0 : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<8x16xf32, sliced<0>>
// CHECK-NEXT: %r0 = coco.reduce %x kind = sum dims = [0] : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<16xf32, local>
// CHECK-NEXT: %r1 = coco.reduce %x kind = max dims = [1] : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<8xf32, sliced<0>>
// CHECK-NEXT: %r2 = coco.reduce %y kind = min dims = [0, 2] : (!coco.tensor<2x8x4xf32, sliced<1>>) -> !coco.tensor<8xf32, sliced<0>>
// CHECK-NEXT: %r3 = coco.reduce %l kind = sum dims = [0, 1] : (!coco.tensor<8x16xf32, local>) -> !coco.tensor<f32, local>
// CHECK-NEXT: %n = coco.norm %l : (!coco.tensor<8x16xf32, local>) -> !coco.tensor<f32, local>
// CHECK-NEXT: %nr = coco.norm %r : (!coco.tensor<16xf32, replicated>) -> !coco.tensor<f32, replicated>
func.func @reductions(%x: !coco.tensor<8x16xf32, sliced<0>>, %y: !coco.tensor<2x8x4xf32, sliced<1>>,
                      %l: !coco.tensor<8x16xf32, local>, %r: !coco.tensor<16xf32, replicated>) {
  %d = coco.dropout %x p = 0.1 seed = 7 : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<8x16xf32, sliced<0>>
  %d0 = coco.dropout %x p = 0 seed = 0 : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<8x16xf32, sliced<0>>
  %r0 = coco.reduce %x kind = sum dims = [0] : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<16xf32, local>
  %r1 = coco.reduce %x kind = max dims = [1] : (!coco.tensor<8x16xf32, sliced<0>>) -> !coco.tensor<8xf32, sliced<0>>
  %r2 = coco.reduce %y kind = min dims = [0, 2] : (!coco.tensor<2x8x4xf32, sliced<1>>) -> !coco.tensor<8xf32, sliced<0>>
  %r3 = coco.reduce %l kind = sum dims = [0, 1] : (!coco.tensor<8x16xf32, local>) -> !coco.tensor<f32, local>
  %n = coco.norm %l : (!coco.tensor<8x16xf32, local>) -> !coco.tensor<f32, local>
  %nr = coco.norm %r : (!coco.tensor<16xf32, replicated>) -> !coco.tensor<f32, replicated>
  func.return
}

// CHECK-LABEL: func.func @matmuls
// CHECK-NEXT: %0 = coco.matmul %a, %w : (!coco.tensor<8x16xf32, replicated>, !coco.tensor<16x4xf32, replicated>) -> !coco.tensor<8x4xf32, replicated>
// CHECK-NEXT: %1 = coco.matmul %s, %w : (!coco.tensor<4x8x16xf32, sliced<0>>, !coco.tensor<16x4xf32, replicated>) -> !coco.tensor<4x8x4xf32, sliced<0>>
// CHECK-NEXT: %2 = coco.matmul %a, %wc : (!coco.tensor<8x16xf32, replicated>, !coco.tensor<16x4xf32, sliced<1>>) -> !coco.tensor<8x4xf32, sliced<1>>
// CHECK-NEXT: %3 = coco.matmul %ak, %wr : (!coco.tensor<8x16xf32, sliced<1>>, !coco.tensor<16x4xf32, sliced<0>>) -> !coco.tensor<8x4xf32, local>
// CHECK-NEXT: %4 = coco.matmul %l, %w : (!coco.tensor<8x16xf32, local>, !coco.tensor<16x4xf32, replicated>) -> !coco.tensor<8x4xf32, local>
func.func @matmuls(%a: !coco.tensor<8x16xf32, replicated>, %w: !coco.tensor<16x4xf32, replicated>,
                   %s: !coco.tensor<4x8x16xf32, sliced<0>>, %wc: !coco.tensor<16x4xf32, sliced<1>>,
                   %ak: !coco.tensor<8x16xf32, sliced<1>>, %wr: !coco.tensor<16x4xf32, sliced<0>>,
                   %l: !coco.tensor<8x16xf32, local>) {
  %0 = coco.matmul %a, %w : (!coco.tensor<8x16xf32, replicated>, !coco.tensor<16x4xf32, replicated>) -> !coco.tensor<8x4xf32, replicated>
  %1 = coco.matmul %s, %w : (!coco.tensor<4x8x16xf32, sliced<0>>, !coco.tensor<16x4xf32, replicated>) -> !coco.tensor<4x8x4xf32, sliced<0>>
  %2 = coco.matmul %a, %wc : (!coco.tensor<8x16xf32, replicated>, !coco.tensor<16x4xf32, sliced<1>>) -> !coco.tensor<8x4xf32, sliced<1>>
  %3 = coco.matmul %ak, %wr : (!coco.tensor<8x16xf32, sliced<1>>, !coco.tensor<16x4xf32, sliced<0>>) -> !coco.tensor<8x4xf32, local>
  %4 = coco.matmul %l, %w : (!coco.tensor<8x16xf32, local>, !coco.tensor<16x4xf32, replicated>) -> !coco.tensor<8x4xf32, local>
  func.return
}

// CHECK-LABEL: func.func @collectives
// CHECK-NEXT: %0 = coco.all_slice %r dim = 1 : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, sliced<1>>
// CHECK-NEXT: %1 = coco.all_reduce %l reduction = sum : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, replicated>
// CHECK-NEXT: %2 = coco.all_reduce %r reduction = prod : !coco.tensor<8x16xf32, replicated> -> !coco.tensor<8x16xf32, replicated>
// CHECK-NEXT: %3 = coco.all_reduce %l reduction = max : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, replicated>
// CHECK-NEXT: %4 = coco.all_reduce %l reduction = min : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, replicated>
// CHECK-NEXT: %5 = coco.reduce_scatter %l reduction = sum dim = 0 : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, sliced<0>>
// CHECK-NEXT: %6 = coco.all_gather %5 : !coco.tensor<8x16xf32, sliced<0>> -> !coco.tensor<8x16xf32, replicated>
// CHECK-NEXT: %7 = coco.broadcast %l root = 3 : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, replicated>
// CHECK-NEXT: %8 = coco.all_to_all %5 dim = 1 : !coco.tensor<8x16xf32, sliced<0>> -> !coco.tensor<8x16xf32, sliced<1>>
// CHECK-NEXT: %9 = coco.all_reduce %l reduction = sum {name = "grads"} : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, replicated>
func.func @collectives(%l: !coco.tensor<8x16xf32, local>, %r: !coco.tensor<8x16xf32, replicated>) {
  %0 = coco.all_slice %r dim = 1 : (!coco.tensor<8x16xf32, replicated>) -> !coco.tensor<8x16xf32, sliced<1>>
  %1 = coco.all_reduce %l reduction = sum : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, replicated>
  %2 = coco.all_reduce %r reduction = prod : !coco.tensor<8x16xf32, replicated> -> !coco.tensor<8x16xf32, replicated>
  %3 = coco.all_reduce %l reduction = max : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, replicated>
  %4 = coco.all_reduce %l reduction = min : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, replicated>
  %5 = coco.reduce_scatter %l reduction = sum dim = 0 : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, sliced<0>>
  %6 = coco.all_gather %5 : !coco.tensor<8x16xf32, sliced<0>> -> !coco.tensor<8x16xf32, replicated>
  %7 = coco.broadcast %l root = 3 : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, replicated>
  %8 = coco.all_to_all %5 dim = 1 : !coco.tensor<8x16xf32, sliced<0>> -> !coco.tensor<8x16xf32, sliced<1>>
  %9 = coco.all_reduce %l reduction = sum {name = "grads"} : !coco.tensor<8x16xf32, local> -> !coco.tensor<8x16xf32, replicated>
  func.return
}

// CHECK-LABEL: func.func @stage0
// CHECK-NEXT: coco.send %x to @stage1 channel = 0 : !coco.tensor<8x16xf32, sliced<0>>
// CHECK-NEXT: coco.send %x to @stage1 channel = 1 : !coco.tensor<8x16xf32, sliced<0>>
func.func @stage0(%x: !coco.tensor<8x16xf32, sliced<0>>) {
  coco.send %x to @stage1 channel = 0 : !coco.tensor<8x16xf32, sliced<0>>
  coco.send %x to @stage1 channel = 1 : !coco.tensor<8x16xf32, sliced<0>>
  func.return
}

// CHECK-LABEL: func.func @stage1
// CHECK-NEXT: %y = coco.recv from @stage0 channel = 0 : !coco.tensor<8x16xf32, sliced<0>>
// CHECK-NEXT: %z = coco.recv from @stage0 channel = 1 : !coco.tensor<8x16xf32, sliced<0>>
func.func @stage1() {
  %y = coco.recv from @stage0 channel = 0 : !coco.tensor<8x16xf32, sliced<0>>
  %z = coco.recv from @stage0 channel = 1 : !coco.tensor<8x16xf32, sliced<0>>
  func.return
}

}
