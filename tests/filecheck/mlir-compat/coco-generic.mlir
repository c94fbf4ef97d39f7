// REQUIRES: mlir-opt
// RUN: coconet-opt --print-op-generic %s | %mlir-opt --allow-unregistered-dialect --mlir-print-op-generic | filecheck %s --check-prefix=MLIR
// RUN: coconet-opt --print-op-generic %s | %mlir-opt --allow-unregistered-dialect --mlir-print-op-generic | coconet-opt | filecheck %s
// RUN: coconet-opt %s > %t.direct.mlir
// RUN: coconet-opt --print-op-generic %s | %mlir-opt --allow-unregistered-dialect --mlir-print-op-generic | coconet-opt > %t.via-mlir.mlir
// RUN: diff %t.direct.mlir %t.via-mlir.mlir
// Real MLIR (mlir-opt 22) accepts the generic form of every coco op and type as an
// unregistered dialect, and what it prints back parses to the same program. The
// values are named as MLIR names them (%argN, %N), so the program printed
// directly and the one that went through mlir-opt must be identical.

// MLIR-LABEL: "func.func"() <{function_type = {{.*}}, sym_name = "all_ops"}>
// MLIR: "coco.reduce_scatter"(%arg0) <{dim = 1 : i64, reduction = #coco<reduction max>}> : (!coco.tensor<4x8xf32, local>) -> !coco.tensor<4x8xf32, sliced<1>>
// MLIR: "coco.constant"() <{value = 0xFFF0000000000000 : f64}> : () -> !coco.tensor<f32, replicated>
// MLIR: "coco.reduce"(%arg1) <{dims = array<i64: 0, 1>, kind = #coco<reduce_kind max>}>
// MLIR: "coco.send"(%{{.*}}) <{channel = 3 : i64, to = @next}>
// MLIR: "coco.recv"() <{channel = 3 : i64, from = @all_ops}>
// MLIR: {coco.world_size = 2 : i64}

// CHECK-LABEL: func.func @all_ops
// CHECK-SAME: (%arg0: !coco.tensor<4x8xf32, local>, %arg1: !coco.tensor<4x8xf32, replicated>, %arg2: !coco.tensor<f32, replicated>, %arg3: !coco.tensor<8x2xf32, replicated>)
// CHECK-NEXT: %0 = coco.all_reduce %arg0 reduction = sum : !coco.tensor<4x8xf32, local> -> !coco.tensor<4x8xf32, replicated>
// CHECK-NEXT: %1 = coco.reduce_scatter %arg0 reduction = max dim = 1 : !coco.tensor<4x8xf32, local> -> !coco.tensor<4x8xf32, sliced<1>>
// CHECK-NEXT: %2 = coco.all_gather %1 : !coco.tensor<4x8xf32, sliced<1>> -> !coco.tensor<4x8xf32, replicated>
// CHECK-NEXT: %3 = coco.broadcast %arg0 root = 1 : !coco.tensor<4x8xf32, local> -> !coco.tensor<4x8xf32, replicated>
// CHECK-NEXT: %4 = coco.all_to_all %1 dim = 0 : !coco.tensor<4x8xf32, sliced<1>> -> !coco.tensor<4x8xf32, sliced<0>>
// CHECK-NEXT: %5 = coco.all_slice %arg1 dim = 0 : (!coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xf32, sliced<0>>
// CHECK-NEXT: %6 = coco.cmp %arg1, %arg2 predicate = le : (!coco.tensor<4x8xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<4x8xi1, replicated>
// CHECK-NEXT: %7 = coco.select %6, %arg1, %arg2 : (!coco.tensor<4x8xi1, replicated>, !coco.tensor<4x8xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<4x8xf32, replicated>
// CHECK-NEXT: %8 = coco.constant 9.000000e-01 : !coco.tensor<f32, replicated>
// CHECK-NEXT: %9 = coco.constant 0xFF800000 : !coco.tensor<f32, replicated>
// CHECK-NEXT: %10 = coco.constant true : !coco.tensor<i1, replicated>
// CHECK-NEXT: %11 = coco.dropout %arg1 p = 2.500000e-01 seed = 42 : (!coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xf32, replicated>
// CHECK-NEXT: %12 = coco.reduce %arg1 kind = max dims = [0, 1] : (!coco.tensor<4x8xf32, replicated>) -> !coco.tensor<f32, replicated>
// CHECK-NEXT: %13 = coco.norm %arg0 : (!coco.tensor<4x8xf32, local>) -> !coco.tensor<f32, local>
// CHECK-NEXT: %14 = coco.matmul %arg1, %arg3 : (!coco.tensor<4x8xf32, replicated>, !coco.tensor<8x2xf32, replicated>) -> !coco.tensor<4x2xf32, replicated>
// CHECK-NEXT: %15 = coco.convert %arg1 : (!coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xbf16, replicated>
// CHECK-NEXT: %16 = coco.gelu %15 : (!coco.tensor<4x8xbf16, replicated>) -> !coco.tensor<4x8xbf16, replicated>
// CHECK-NEXT: %17 = coco.sub %arg1, %0 {name = "sgd"} : (!coco.tensor<4x8xf32, replicated>, !coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xf32, replicated>
// CHECK-NEXT: coco.update %arg1, %17 : !coco.tensor<4x8xf32, replicated>
// CHECK-NEXT: coco.send %17 to @next channel = 3 : !coco.tensor<4x8xf32, replicated>
// CHECK-LABEL: func.func @next
// CHECK-NEXT: %0 = coco.recv from @all_ops channel = 3 : !coco.tensor<4x8xf32, replicated>

builtin.module attributes {coco.world_size = 2 : i64} {
func.func @all_ops(%arg0: !coco.tensor<4x8xf32, local>, %arg1: !coco.tensor<4x8xf32, replicated>,
                   %arg2: !coco.tensor<f32, replicated>, %arg3: !coco.tensor<8x2xf32, replicated>) {
  %0 = coco.all_reduce %arg0 reduction = sum : !coco.tensor<4x8xf32, local> -> !coco.tensor<4x8xf32, replicated>
  %1 = coco.reduce_scatter %arg0 reduction = max dim = 1 : !coco.tensor<4x8xf32, local> -> !coco.tensor<4x8xf32, sliced<1>>
  %2 = coco.all_gather %1 : !coco.tensor<4x8xf32, sliced<1>> -> !coco.tensor<4x8xf32, replicated>
  %3 = coco.broadcast %arg0 root = 1 : !coco.tensor<4x8xf32, local> -> !coco.tensor<4x8xf32, replicated>
  %4 = coco.all_to_all %1 dim = 0 : !coco.tensor<4x8xf32, sliced<1>> -> !coco.tensor<4x8xf32, sliced<0>>
  %5 = coco.all_slice %arg1 dim = 0 : (!coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xf32, sliced<0>>
  %6 = coco.cmp %arg1, %arg2 predicate = le : (!coco.tensor<4x8xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<4x8xi1, replicated>
  %7 = coco.select %6, %arg1, %arg2 : (!coco.tensor<4x8xi1, replicated>, !coco.tensor<4x8xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<4x8xf32, replicated>
  %8 = coco.constant 9.000000e-01 : !coco.tensor<f32, replicated>
  %9 = coco.constant 0xFF800000 : !coco.tensor<f32, replicated>
  %10 = coco.constant true : !coco.tensor<i1, replicated>
  %11 = coco.dropout %arg1 p = 2.500000e-01 seed = 42 : (!coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xf32, replicated>
  %12 = coco.reduce %arg1 kind = max dims = [0, 1] : (!coco.tensor<4x8xf32, replicated>) -> !coco.tensor<f32, replicated>
  %13 = coco.norm %arg0 : (!coco.tensor<4x8xf32, local>) -> !coco.tensor<f32, local>
  %14 = coco.matmul %arg1, %arg3 : (!coco.tensor<4x8xf32, replicated>, !coco.tensor<8x2xf32, replicated>) -> !coco.tensor<4x2xf32, replicated>
  %15 = coco.convert %arg1 : (!coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xbf16, replicated>
  %16 = coco.gelu %15 : (!coco.tensor<4x8xbf16, replicated>) -> !coco.tensor<4x8xbf16, replicated>
  %17 = coco.sub %arg1, %0 {name = "sgd"} : (!coco.tensor<4x8xf32, replicated>, !coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xf32, replicated>
  coco.update %arg1, %17 : !coco.tensor<4x8xf32, replicated>
  coco.send %17 to @next channel = 3 : !coco.tensor<4x8xf32, replicated>
  func.return
}

func.func @next() {
  %0 = coco.recv from @all_ops channel = 3 : !coco.tensor<4x8xf32, replicated>
  func.return
}
}
