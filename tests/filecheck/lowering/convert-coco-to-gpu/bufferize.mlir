// RUN: coconet-opt %s -p 'convert-coco-to-gpu{world=4}' | filecheck %s
// RUN: coconet-opt %s -p convert-coco-to-gpu -o %t.mlir && coconet-opt %t.mlir | filecheck %s --check-prefix=REPARSED
// Bufferization (docs/gpu/device.md): per-rank buffers, results as trailing
// out-parameters, coco.update written in place when the old value is dead.

// CHECK:      builtin.module attributes {gpu.container_module, coco.world_size = 4 : i64} {
// CHECK-NEXT:   gpu.module @kernels {

// CHECK-LABEL: func.func @signature(%s: memref<2x8xf32>, %l: memref<8xf16>, %c: memref<f32>, %result0: memref<8x2xf32>, %result1: memref<f32>) attributes {coco_gpu.bytes = array<i64: 64, 48>, coco_gpu.entry = (!coco.tensor<8x8xf32, sliced<0>>, !coco.tensor<8xf16, local>, !coco.tensor<f32, replicated>) -> (!coco.tensor<8x8xf32, sliced<1>>, !coco.tensor<f32, replicated>)} {
// CHECK:         coco_gpu.nccl_all_to_all %{{.*}}, %result0
// CHECK:         "memref.copy"(%c, %result1) : (memref<f32>, memref<f32>) -> ()
// CHECK-NEXT:    memref.dealloc
// CHECK-NEXT:    func.return
// CHECK-NEXT:  }

// The sub writes %w directly: nothing reads the old %w after it.
// CHECK-LABEL: func.func @in_place(%g: memref<16xf32>, %w: memref<16xf32>) attributes
// CHECK:         %sum = memref.alloc() : memref<16xf32>
// CHECK-NEXT:    coco_gpu.nccl_all_reduce %g, %sum reduction = sum : memref<16xf32>, memref<16xf32>
// CHECK:         gpu.launch_func  @kernels::@in_place_sub_0 blocks in {{.*}}  args({{(.*, )?}}%c16 : {{[^,]*}}, %w : {{[^,]*}}, %sum : {{[^,]*}}, %w : {{[^,]*}})
// CHECK-NEXT:    memref.dealloc %sum : memref<16xf32>
// CHECK-NEXT:    func.return

// The old %w is read after %w1 is computed, so %w1 gets its own buffer and is
// copied into %w at the end.
// CHECK-LABEL: func.func @copy_back(%w: memref<16xf32>, %result0: memref<16xf32>)
// CHECK:         %w1 = memref.alloc() : memref<16xf32>
// CHECK:         gpu.launch_func  @kernels::@copy_back_neg_0 blocks in {{.*}}  args({{(.*, )?}}%c16 : {{[^,]*}}, %w : {{[^,]*}}, %w1 : {{[^,]*}})
// CHECK:         gpu.launch_func  @kernels::@copy_back_add_0 blocks in {{.*}}  args({{(.*, )?}}%c16 : {{[^,]*}}, %w : {{[^,]*}}, %w1 : {{[^,]*}}, %result0 : {{[^,]*}})
// CHECK-NEXT:    "memref.copy"(%w1, %w) : (memref<16xf32>, memref<16xf32>) -> ()
// CHECK-NEXT:    memref.dealloc %w1 : memref<16xf32>
// CHECK-NEXT:    func.return

// Updates are a parallel assignment at the end of the function: ops after an
// update (and the out-parameters) still read the old %p; %q gets the old %p.
// CHECK-LABEL: func.func @late_read(%p: memref<8xf32>, %q: memref<8xf32>, %result0: memref<8xf32>, %result1: memref<8xf32>)
// CHECK:         gpu.launch_func  @kernels::@late_read_add_0 blocks in {{.*}}  args({{(.*, )?}}%p : {{[^,]*}}, %v : {{[^,]*}}, %result0 : {{[^,]*}})
// CHECK-NEXT:    "memref.copy"(%p, %result1) : (memref<8xf32>, memref<8xf32>) -> ()
// CHECK-NEXT:    "memref.copy"(%p, %q) : (memref<8xf32>, memref<8xf32>) -> ()
// CHECK-NEXT:    "memref.copy"(%v, %p) : (memref<8xf32>, memref<8xf32>) -> ()
// CHECK-NEXT:    memref.dealloc %v : memref<8xf32>
// CHECK-NEXT:    func.return

// A swap goes through a temporary.
// CHECK-LABEL: func.func @swap(%a: memref<4xf32>, %b: memref<4xf32>)
// CHECK-NEXT:    %a_old = memref.alloc() : memref<4xf32>
// CHECK-NEXT:    "memref.copy"(%a, %a_old) : (memref<4xf32>, memref<4xf32>) -> ()
// CHECK-NEXT:    "memref.copy"(%b, %a) : (memref<4xf32>, memref<4xf32>) -> ()
// CHECK-NEXT:    "memref.copy"(%a_old, %b) : (memref<4xf32>, memref<4xf32>) -> ()
// CHECK-NEXT:    memref.dealloc %a_old : memref<4xf32>
// CHECK-NEXT:    func.return

module attributes {coco.world_size = 4 : i64} {
  func.func @signature(%s: !coco.tensor<8x8xf32, sliced<0>>, %l: !coco.tensor<8xf16, local>, %c: !coco.tensor<f32, replicated>) -> (!coco.tensor<8x8xf32, sliced<1>>, !coco.tensor<f32, replicated>) {
    %t = coco.all_to_all %s dim = 1 : !coco.tensor<8x8xf32, sliced<0>> -> !coco.tensor<8x8xf32, sliced<1>>
    func.return %t, %c : !coco.tensor<8x8xf32, sliced<1>>, !coco.tensor<f32, replicated>
  }
  func.func @in_place(%g: !coco.tensor<16xf32, local>, %w: !coco.tensor<16xf32, replicated>) {
    %sum = coco.all_reduce %g reduction = sum : !coco.tensor<16xf32, local> -> !coco.tensor<16xf32, replicated>
    %w1 = coco.sub %w, %sum : (!coco.tensor<16xf32, replicated>, !coco.tensor<16xf32, replicated>) -> !coco.tensor<16xf32, replicated>
    coco.update %w, %w1 : !coco.tensor<16xf32, replicated>
    func.return
  }
  func.func @copy_back(%w: !coco.tensor<16xf32, replicated>) -> !coco.tensor<16xf32, replicated> {
    %w1 = coco.neg %w : (!coco.tensor<16xf32, replicated>) -> !coco.tensor<16xf32, replicated>
    %x = coco.add %w, %w1 : (!coco.tensor<16xf32, replicated>, !coco.tensor<16xf32, replicated>) -> !coco.tensor<16xf32, replicated>
    coco.update %w, %w1 : !coco.tensor<16xf32, replicated>
    func.return %x : !coco.tensor<16xf32, replicated>
  }
  func.func @late_read(%p: !coco.tensor<8xf32, replicated>, %q: !coco.tensor<8xf32, replicated>) -> (!coco.tensor<8xf32, replicated>, !coco.tensor<8xf32, replicated>) {
    %v = coco.neg %q : (!coco.tensor<8xf32, replicated>) -> !coco.tensor<8xf32, replicated>
    coco.update %p, %v : !coco.tensor<8xf32, replicated>
    %w = coco.add %p, %v : (!coco.tensor<8xf32, replicated>, !coco.tensor<8xf32, replicated>) -> !coco.tensor<8xf32, replicated>
    coco.update %q, %p : !coco.tensor<8xf32, replicated>
    func.return %w, %p : !coco.tensor<8xf32, replicated>, !coco.tensor<8xf32, replicated>
  }
  func.func @swap(%a: !coco.tensor<4xf32, local>, %b: !coco.tensor<4xf32, local>) {
    coco.update %a, %b : !coco.tensor<4xf32, local>
    coco.update %b, %a : !coco.tensor<4xf32, local>
    func.return
  }
}

// Read back, the gpu ops print in MLIR's syntax (coconet_ir/dialects/gpu.py).
// REPARSED:      builtin.module attributes {gpu.container_module, coco.world_size = 4 : i64} {
// REPARSED-NEXT:   gpu.module @kernels {
// REPARSED:          gpu.func @in_place_sub_0(%n: index, %w: memref<16xf32>, %sum: memref<16xf32>, %w_1: memref<16xf32>) kernel {
// REPARSED:          gpu.launch_func  @kernels::@in_place_sub_0 blocks in
