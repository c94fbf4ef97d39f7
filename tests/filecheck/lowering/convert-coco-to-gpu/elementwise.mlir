// RUN: coconet-opt %s -p convert-coco-to-gpu | filecheck %s
// Elementwise ops: one grid-stride kernel each over the result's local
// elements; operands broadcast by index arithmetic (a replicated operand of a
// sliced result is read at the rank's block); halves computed in f32 and
// rounded after the op; i32 semantics of the interpreter; dropout's
// Philox4x32-10 in arith at the GLOBAL index.

// The replicated [8] bias of a sliced<1> [4x8] result on 2 ranks: column
// i % 4 of the rank's block, i.e. bias[i % 4 + rank * 4].
// CHECK:      gpu.func @broadcast_add_0(%n: index, %rank: index, %a: memref<16xf32>, %b: memref<8xf32>, %x: memref<16xf32>) kernel {
// CHECK-NEXT:   %0 = gpu.block_id  x
// CHECK-NEXT:   %1 = gpu.block_dim  x
// CHECK-NEXT:   %2 = gpu.thread_id  x
// CHECK-NEXT:   %3 = gpu.grid_dim  x
// CHECK-NEXT:   %4 = arith.muli %0, %1 : index
// CHECK-NEXT:   %start = arith.addi %4, %2 : index
// CHECK-NEXT:   %step = arith.muli %3, %1 : index
// CHECK-NEXT:   scf.for %i = %start to %n step %step {
// CHECK-NEXT:     %5 = memref.load %a[%i] : memref<16xf32>
// CHECK-NEXT:     %6 = arith.constant 4 : index
// CHECK-NEXT:     %7 = arith.remui %i, %6 : index
// CHECK-NEXT:     %8 = arith.constant 4 : index
// CHECK-NEXT:     %9 = arith.muli %rank, %8 : index
// CHECK-NEXT:     %10 = arith.addi %7, %9 : index
// CHECK-NEXT:     %11 = memref.load %b[%10] : memref<8xf32>
// CHECK-NEXT:     %12 = arith.addf %5, %11 : f32
// CHECK-NEXT:     memref.store %12, %x[%i] : memref<16xf32>
// CHECK-NEXT:   }
// CHECK-NEXT:   gpu.return
// CHECK-NEXT: }

// A rank-0 operand is loaded with no index.
// CHECK:      gpu.func @broadcast_mul_0(
// CHECK:          %5 = memref.load %s[] : memref<f32>
// CHECK-NEXT:     %6 = memref.load %x[%i] : memref<16xf32>
// CHECK-NEXT:     %7 = arith.mulf %5, %6 : f32

// CHECK:          %6 = arith.extf %5 : f16 to f32
// CHECK-NEXT:     %7 = math.exp %6 : f32
// CHECK-NEXT:     %8 = arith.truncf %7 : f32 to f16
// CHECK:          %6 = arith.extf %5 : f16 to f32
// CHECK-NEXT:     %7 = arith.truncf %6 : f32 to bf16
// CHECK:          %9 = arith.maximumf %7, %8 : f32
// CHECK-NEXT:     %10 = arith.truncf %9 : f32 to bf16

// CHECK:          %7 = arith.divsi %5, %6 : i32
// CHECK:          %7 = arith.cmpi slt, %5, %6 : i32
// CHECK-NEXT:     memref.store %7, %c[%i] : memref<8xi1>
// CHECK:          %8 = arith.select %5, %6, %7 : i32
// float → i32 truncates, saturates, and maps NaN to 0.
// CHECK:          %6 = arith.cmpf uno, %5, %5 : f32
// CHECK:          %15 = arith.fptosi %14 : f32 to i32
// CHECK-NEXT:     %16 = arith.constant 2147483647 : i32
// CHECK-NEXT:     %17 = arith.select %12, %16, %15 : i32

// CHECK:      gpu.func @activations_gelu_0(
// CHECK:          %13 = math.tanh %12 : f32

// The dropout of a sliced<0> value: global index = i + rank * 4. The seed is
// a kernel argument (one kernel for dropouts differing only in their seed):
// Philox's key words are its halves, bumped by (W0, W1) = (0x9E3779B9,
// 0xBB67AE85) each round.
// CHECK:      gpu.func @activations_dropout_0(%n: index, %rank: index, %seed: i64, %g: memref<4xf32>, %result0: memref<4xf32>) kernel {
// CHECK:          %6 = arith.constant 4 : index
// CHECK-NEXT:     %7 = arith.muli %rank, %6 : index
// CHECK-NEXT:     %8 = arith.addi %i, %7 : index
// CHECK-NEXT:     %9 = arith.index_cast %8 : index to i64
// CHECK:          %[[K0:.*]] = arith.trunci %seed : i64 to i32
// CHECK-NEXT:     %[[HIGH:.*]] = arith.shrui %seed, %{{.*}} : i64
// CHECK-NEXT:     %[[K1:.*]] = arith.trunci %[[HIGH]] : i64 to i32
// CHECK:          %[[W0:.*]] = arith.constant -1640531527 : i32
// CHECK-NEXT:     %{{.*}} = arith.addi %[[K0]], %[[W0]] : i32
// CHECK:          %[[W1:.*]] = arith.constant -1150833019 : i32
// CHECK-NEXT:     %{{.*}} = arith.addi %[[K1]], %[[W1]] : i32
// CHECK-COUNT-16: arith.mului_extended
// CHECK:          arith.shrui %{{.*}}, %{{.*}} : i32
// keep = (out0 >> 8) >= ceil(0.25 * 2^24)
// CHECK-NEXT:     %[[T:.*]] = arith.constant 4194304 : i32
// CHECK-NEXT:     %[[KEEP:.*]] = arith.cmpi uge, %{{.*}}, %[[T]] : i32
// CHECK-NEXT:     %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:     %[[KEPT:.*]] = arith.select %[[KEEP]], %5, %[[Z]] : f32
// CHECK-NEXT:     %[[S:.*]] = arith.constant 7.500000e-01 : f32
// CHECK-NEXT:     %[[R:.*]] = arith.divf %[[KEPT]], %[[S]] : f32
// CHECK-NEXT:     memref.store %[[R]], %result0[%i] : memref<4xf32>

// A constant is a one-element kernel.
// CHECK:          %5 = arith.constant 9.000000e-01 : f32
// CHECK-NEXT:     memref.store %5, %result0[] : memref<f32>

// The host values the launches share come first, once: the rank, flat views
// of arguments, the constants (named as MLIR names them), each grid.
// CHECK-LABEL: func.func @broadcast(%a: memref<4x4xf32>, %b: memref<8xf32>, %s: memref<f32>, %result0: memref<4x4xf32>)
// CHECK-NEXT:    %rank = coco_gpu.rank
// CHECK-NEXT:    %a_flat = memref.collapse_shape %a {{\[}}[0 : i64, 1 : i64]] : memref<4x4xf32> into memref<16xf32>
// CHECK-NEXT:    %c16 = arith.constant 16 : index
// CHECK-NEXT:    %c256 = arith.constant 256 : index
// CHECK-NEXT:    %blocks = coco_gpu.grid_blocks %c16, %c256
// CHECK-NEXT:    %c1 = arith.constant 1 : index
// CHECK-NEXT:    %result0_flat = memref.collapse_shape %result0 {{\[}}[0 : i64, 1 : i64]] : memref<4x4xf32> into memref<16xf32>
// A buffer's one flat view comes with it.
// CHECK-NEXT:    %x = memref.alloc() : memref<4x4xf32>
// CHECK-NEXT:    %x_flat = memref.collapse_shape %x {{\[}}[0 : i64, 1 : i64]] : memref<4x4xf32> into memref<16xf32>
// CHECK-NEXT:    gpu.launch_func  @kernels::@broadcast_add_0 blocks in (%blocks, %c1, %c1) threads in (%c256, %c1, %c1)  args(%c16 : {{[^,]*}}, %rank : {{[^,]*}}, %a_flat : {{[^,]*}}, %b : {{[^,]*}}, %x_flat : {{[^,]*}})
// CHECK-NEXT:    gpu.launch_func  @kernels::@broadcast_mul_0 blocks in (%blocks, %c1, %c1) threads in (%c256, %c1, %c1)  args(%c16 : {{[^,]*}}, %s : {{[^,]*}}, %x_flat : {{[^,]*}}, %result0_flat : {{[^,]*}})

// The host passes the dropout's seed.
// CHECK-LABEL: func.func @activations(
// CHECK:         %c7_i64 = arith.constant 7 : i64
// CHECK:         gpu.launch_func  @kernels::@activations_dropout_0 {{.*}} args(%c4 : index, %rank : index, %c7_i64 : i64, %g : memref<4xf32>, %result0 : memref<4xf32>)

module attributes {coco.world_size = 2 : i64} {
  func.func @broadcast(%a: !coco.tensor<4x8xf32, sliced<1>>, %b: !coco.tensor<8xf32, replicated>, %s: !coco.tensor<f32, replicated>) -> !coco.tensor<4x8xf32, sliced<1>> {
    %x = coco.add %a, %b : (!coco.tensor<4x8xf32, sliced<1>>, !coco.tensor<8xf32, replicated>) -> !coco.tensor<4x8xf32, sliced<1>>
    %y = coco.mul %s, %x : (!coco.tensor<f32, replicated>, !coco.tensor<4x8xf32, sliced<1>>) -> !coco.tensor<4x8xf32, sliced<1>>
    func.return %y : !coco.tensor<4x8xf32, sliced<1>>
  }
  func.func @halves(%a: !coco.tensor<8xf16, local>, %b: !coco.tensor<8xbf16, local>) -> (!coco.tensor<8xf16, local>, !coco.tensor<8xbf16, local>) {
    %x = coco.exp %a : (!coco.tensor<8xf16, local>) -> !coco.tensor<8xf16, local>
    %y = coco.convert %x : (!coco.tensor<8xf16, local>) -> !coco.tensor<8xbf16, local>
    %z = coco.max %y, %b : (!coco.tensor<8xbf16, local>, !coco.tensor<8xbf16, local>) -> !coco.tensor<8xbf16, local>
    func.return %x, %z : !coco.tensor<8xf16, local>, !coco.tensor<8xbf16, local>
  }
  func.func @integers(%a: !coco.tensor<8xi32, local>, %b: !coco.tensor<8xi32, local>, %f: !coco.tensor<8xf32, local>) -> (!coco.tensor<8xi32, local>, !coco.tensor<8xi32, local>) {
    %q = coco.div %a, %b : (!coco.tensor<8xi32, local>, !coco.tensor<8xi32, local>) -> !coco.tensor<8xi32, local>
    %c = coco.cmp %a, %b predicate = lt : (!coco.tensor<8xi32, local>, !coco.tensor<8xi32, local>) -> !coco.tensor<8xi1, local>
    %m = coco.select %c, %q, %b : (!coco.tensor<8xi1, local>, !coco.tensor<8xi32, local>, !coco.tensor<8xi32, local>) -> !coco.tensor<8xi32, local>
    %i = coco.convert %f : (!coco.tensor<8xf32, local>) -> !coco.tensor<8xi32, local>
    func.return %m, %i : !coco.tensor<8xi32, local>, !coco.tensor<8xi32, local>
  }
  func.func @activations(%a: !coco.tensor<8xf32, sliced<0>>) -> !coco.tensor<8xf32, sliced<0>> {
    %g = coco.gelu %a : (!coco.tensor<8xf32, sliced<0>>) -> !coco.tensor<8xf32, sliced<0>>
    %d = coco.dropout %g p = 2.500000e-01 seed = 7 : (!coco.tensor<8xf32, sliced<0>>) -> !coco.tensor<8xf32, sliced<0>>
    func.return %d : !coco.tensor<8xf32, sliced<0>>
  }
  func.func @constant() -> !coco.tensor<f32, replicated> {
    %c = coco.constant 9.000000e-01 : !coco.tensor<f32, replicated>
    func.return %c : !coco.tensor<f32, replicated>
  }
}
