// RUN: coconet-opt --print-op-generic %s | filecheck %s --check-prefix=GENERIC
// RUN: coconet-opt --print-op-generic %s | coconet-opt | filecheck %s
// RUN: coconet-opt %s > %t.custom
// RUN: coconet-opt --print-op-generic %s | coconet-opt > %t.regen
// RUN: diff %t.custom %t.regen
// The generic form of every op with a property or a custom parser re-parses to
// the same program. Enum properties are spelled #coco<KIND VALUE>.

builtin.module attributes {coco.world_size = 2 : i64} {

// GENERIC-LABEL: "func.func"() <{sym_name = "all_ops"
// GENERIC: "coco.all_reduce"(%g) <{reduction = #coco<reduction sum>}> : (!coco.tensor<4x8xf32, local>) -> !coco.tensor<4x8xf32, replicated>
// GENERIC: "coco.reduce_scatter"(%g) <{reduction = #coco<reduction max>, dim = 1 : i64}> : (!coco.tensor<4x8xf32, local>) -> !coco.tensor<4x8xf32, sliced<1>>
// GENERIC: "coco.all_gather"(%rs) : (!coco.tensor<4x8xf32, sliced<1>>) -> !coco.tensor<4x8xf32, replicated>
// GENERIC: "coco.broadcast"(%g) <{root = 1 : i64}>
// GENERIC: "coco.all_to_all"(%rs) <{dim = 0 : i64}>
// GENERIC: "coco.all_slice"(%w) <{dim = 0 : i64}> : (!coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xf32, sliced<0>>
// GENERIC: "coco.cmp"(%w, %s) <{predicate = #coco<predicate le>}> : (!coco.tensor<4x8xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<4x8xi1, replicated>
// GENERIC: "coco.select"(%c, %w, %s)
// GENERIC: "coco.constant"() <{value = 9.000000e-01 : f64}> : () -> !coco.tensor<f32, replicated>
// GENERIC: "coco.constant"() <{value = 7 : i64}> : () -> !coco.tensor<i32, replicated>
// GENERIC: "coco.dropout"(%w) <{p = 2.500000e-01 : f64, seed = 42 : i64}>
// GENERIC: "coco.reduce"(%w) <{kind = #coco<reduce_kind max>, dims = array<i64: 0, 1>}> : (!coco.tensor<4x8xf32, replicated>) -> !coco.tensor<f32, replicated>
// GENERIC: "coco.norm"(%g)
// GENERIC: "coco.matmul"(%w, %m)
// GENERIC: "coco.convert"(%w) : (!coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xbf16, replicated>
// GENERIC: "coco.sub"(%w, %ar) {name = "sgd"} : (!coco.tensor<4x8xf32, replicated>, !coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xf32, replicated>
// GENERIC: "coco.update"(%w, %w1) : (!coco.tensor<4x8xf32, replicated>, !coco.tensor<4x8xf32, replicated>) -> ()
// GENERIC: "coco.send"(%w1) <{to = @next, channel = 3 : i64}> : (!coco.tensor<4x8xf32, replicated>) -> ()
// GENERIC-LABEL: "func.func"() <{sym_name = "next"
// GENERIC: "coco.recv"() <{from = @all_ops, channel = 3 : i64}> : () -> !coco.tensor<4x8xf32, replicated>
// GENERIC: {coco.world_size = 2 : i64}

// CHECK-LABEL: func.func @all_ops
// CHECK-NEXT: %ar = coco.all_reduce %g reduction = sum : !coco.tensor<4x8xf32, local> -> !coco.tensor<4x8xf32, replicated>
// CHECK-NEXT: %rs = coco.reduce_scatter %g reduction = max dim = 1 : !coco.tensor<4x8xf32, local> -> !coco.tensor<4x8xf32, sliced<1>>
// CHECK-NEXT: %ag = coco.all_gather %rs : !coco.tensor<4x8xf32, sliced<1>> -> !coco.tensor<4x8xf32, replicated>
// CHECK-NEXT: %b = coco.broadcast %g root = 1 : !coco.tensor<4x8xf32, local> -> !coco.tensor<4x8xf32, replicated>
// CHECK-NEXT: %a2a = coco.all_to_all %rs dim = 0 : !coco.tensor<4x8xf32, sliced<1>> -> !coco.tensor<4x8xf32, sliced<0>>
// CHECK-NEXT: %sl = coco.all_slice %w dim = 0 : (!coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xf32, sliced<0>>
// CHECK-NEXT: %c = coco.cmp %w, %s predicate = le : (!coco.tensor<4x8xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<4x8xi1, replicated>
// CHECK-NEXT: %sel = coco.select %c, %w, %s : (!coco.tensor<4x8xi1, replicated>, !coco.tensor<4x8xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<4x8xf32, replicated>
// CHECK-NEXT: %k = coco.constant 9.000000e-01 : !coco.tensor<f32, replicated>
// CHECK-NEXT: %ki = coco.constant 7 : !coco.tensor<i32, replicated>
// CHECK-NEXT: %d = coco.dropout %w p = 2.500000e-01 seed = 42 : (!coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xf32, replicated>
// CHECK-NEXT: %r = coco.reduce %w kind = max dims = [0, 1] : (!coco.tensor<4x8xf32, replicated>) -> !coco.tensor<f32, replicated>
// CHECK-NEXT: %n = coco.norm %g : (!coco.tensor<4x8xf32, local>) -> !coco.tensor<f32, local>
// CHECK-NEXT: %mm = coco.matmul %w, %m : (!coco.tensor<4x8xf32, replicated>, !coco.tensor<8x2xf32, replicated>) -> !coco.tensor<4x2xf32, replicated>
// CHECK-NEXT: %h = coco.convert %w : (!coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xbf16, replicated>
// CHECK-NEXT: %w1 = coco.sub %w, %ar {name = "sgd"} : (!coco.tensor<4x8xf32, replicated>, !coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xf32, replicated>
// CHECK-NEXT: coco.update %w, %w1 : !coco.tensor<4x8xf32, replicated>
// CHECK-NEXT: coco.send %w1 to @next channel = 3 : !coco.tensor<4x8xf32, replicated>
// CHECK-LABEL: func.func @next
// CHECK-NEXT: %x = coco.recv from @all_ops channel = 3 : !coco.tensor<4x8xf32, replicated>
func.func @all_ops(%g: !coco.tensor<4x8xf32, local>, %w: !coco.tensor<4x8xf32, replicated>,
                   %s: !coco.tensor<f32, replicated>, %m: !coco.tensor<8x2xf32, replicated>) {
  %ar = coco.all_reduce %g reduction = sum : !coco.tensor<4x8xf32, local> -> !coco.tensor<4x8xf32, replicated>
  %rs = coco.reduce_scatter %g reduction = max dim = 1 : !coco.tensor<4x8xf32, local> -> !coco.tensor<4x8xf32, sliced<1>>
  %ag = coco.all_gather %rs : !coco.tensor<4x8xf32, sliced<1>> -> !coco.tensor<4x8xf32, replicated>
  %b = coco.broadcast %g root = 1 : !coco.tensor<4x8xf32, local> -> !coco.tensor<4x8xf32, replicated>
  %a2a = coco.all_to_all %rs dim = 0 : !coco.tensor<4x8xf32, sliced<1>> -> !coco.tensor<4x8xf32, sliced<0>>
  %sl = coco.all_slice %w dim = 0 : (!coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xf32, sliced<0>>
  %c = coco.cmp %w, %s predicate = le : (!coco.tensor<4x8xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<4x8xi1, replicated>
  %sel = coco.select %c, %w, %s : (!coco.tensor<4x8xi1, replicated>, !coco.tensor<4x8xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<4x8xf32, replicated>
  %k = coco.constant 0.9 : !coco.tensor<f32, replicated>
  %ki = coco.constant 7 : !coco.tensor<i32, replicated>
  %d = coco.dropout %w p = 0.25 seed = 42 : (!coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xf32, replicated>
  %r = coco.reduce %w kind = max dims = [0, 1] : (!coco.tensor<4x8xf32, replicated>) -> !coco.tensor<f32, replicated>
  %n = coco.norm %g : (!coco.tensor<4x8xf32, local>) -> !coco.tensor<f32, local>
  %mm = coco.matmul %w, %m : (!coco.tensor<4x8xf32, replicated>, !coco.tensor<8x2xf32, replicated>) -> !coco.tensor<4x2xf32, replicated>
  %h = coco.convert %w : (!coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xbf16, replicated>
  %w1 = coco.sub %w, %ar {name = "sgd"} : (!coco.tensor<4x8xf32, replicated>, !coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xf32, replicated>
  coco.update %w, %w1 : !coco.tensor<4x8xf32, replicated>
  coco.send %w1 to @next channel = 3 : !coco.tensor<4x8xf32, replicated>
  func.return
}

func.func @next() {
  %x = coco.recv from @all_ops channel = 3 : !coco.tensor<4x8xf32, replicated>
  func.return
}

}
