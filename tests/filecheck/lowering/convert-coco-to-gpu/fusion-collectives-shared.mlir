// RUN: coconet-opt %s -p 'convert-coco-to-gpu{world=4}' | filecheck %s
// RUN: coconet-opt %s -p 'convert-coco-to-gpu{world=4}' -t cuda | filecheck %s --check-prefix=CUDA

// Fusions that compute the same thing on the same types launch ONE kernel,
// whatever their labels: each launch passes the fusion's own first signal
// slot (`slots`) and its dropout's seed as arguments (docs/gpu/fused.md, "Symmetric
// buffers and signal slots"). A kernel launched under several labels is named
// after its kind (`<function>_fused_<n>`); one asked for under one label
// keeps it. Map kernels are shared the same way (`<function>_dropout_<n>`).

// Slots: 2 phases x 4 ranks x 1 chunk = 8 per fusion, 3 fusions.
// CHECK:      builtin.module attributes {{{.*}}coco_gpu.signal_slots = 24 : i64
// CHECK:      gpu.module @kernels {
// CHECK:        gpu.func @layers_fused_0(%rank: index, %epoch: i64, %peers: !coco_gpu.peers, %slots: index, %seed: i64, %input0: memref<64xf16>,
// CHECK:        gpu.func @layers_layer2_0(%rank: index, %epoch: i64, %peers: !coco_gpu.peers, %slots: index, %seed: i64, %input0: memref<128xf16>,
// CHECK:        gpu.func @layers_dropout_0(
// CHECK-NOT:    gpu.func

// CHECK-LABEL: func.func @layers(
// CHECK:       gpu.launch_func  @kernels::@layers_fused_0 {{.*}} args(%rank : index, %epoch : i64, %peers : !coco_gpu.peers, %c0 : index, %c7_i64 : i64,
// CHECK:       gpu.launch_func  @kernels::@layers_fused_0 {{.*}} args(%rank : index, %epoch{{.*}} : i64, %peers : !coco_gpu.peers, %c8 : index, %c11_i64 : i64,
// CHECK:       gpu.launch_func  @kernels::@layers_layer2_0 {{.*}} args(%rank : index, %epoch{{.*}} : i64, %peers : !coco_gpu.peers, %c16 : index, %c13_i64 : i64,
// CHECK:       gpu.launch_func  @kernels::@layers_dropout_0 {{.*}} args(%{{.*}} : index, %c3_i64 : i64,
// CHECK:       gpu.launch_func  @kernels::@layers_dropout_0 {{.*}} args(%{{.*}} : index, %c5_i64 : i64,
// CHECK-NOT:   gpu.launch_func
// CHECK:       func.return

// CUDA-COUNT-3: extern "C" __global__ void
// CUDA-NOT:     __global__

func.func @layers(%x0: !coco.tensor<2x8x4xf16, local>, %x1: !coco.tensor<2x8x4xf16, local>, %x2: !coco.tensor<2x16x4xf16, local>, %bias: !coco.tensor<4xf16, replicated>, %y: !coco.tensor<16xf32, replicated>) -> (!coco.tensor<2x8x4xf16, replicated>, !coco.tensor<2x8x4xf16, replicated>, !coco.tensor<2x16x4xf16, replicated>, !coco.tensor<16xf32, replicated>, !coco.tensor<16xf32, replicated>) {
  %o0 = coco.fusion (%x0, %bias) {name = "layer0"} : (!coco.tensor<2x8x4xf16, local>, !coco.tensor<4xf16, replicated>) -> !coco.tensor<2x8x4xf16, replicated> {
  ^bb0(%a: !coco.tensor<2x8x4xf16, local>, %b: !coco.tensor<4xf16, replicated>):
    %s = coco.reduce_scatter %a reduction = sum dim = 1 {name = "layer0_rs"} : !coco.tensor<2x8x4xf16, local> -> !coco.tensor<2x8x4xf16, sliced<1>>
    %t = coco.add %s, %b {name = "layer0_bias"} : (!coco.tensor<2x8x4xf16, sliced<1>>, !coco.tensor<4xf16, replicated>) -> !coco.tensor<2x8x4xf16, sliced<1>>
    %d = coco.dropout %t p = 1.000000e-01 seed = 7 : (!coco.tensor<2x8x4xf16, sliced<1>>) -> !coco.tensor<2x8x4xf16, sliced<1>>
    %g = coco.all_gather %d {name = "layer0_ag"} : !coco.tensor<2x8x4xf16, sliced<1>> -> !coco.tensor<2x8x4xf16, replicated>
    coco.yield %g : !coco.tensor<2x8x4xf16, replicated>
  }
  %o1 = coco.fusion (%x1, %bias) {name = "layer1"} : (!coco.tensor<2x8x4xf16, local>, !coco.tensor<4xf16, replicated>) -> !coco.tensor<2x8x4xf16, replicated> {
  ^bb0(%a: !coco.tensor<2x8x4xf16, local>, %b: !coco.tensor<4xf16, replicated>):
    %s = coco.reduce_scatter %a reduction = sum dim = 1 {name = "layer1_rs"} : !coco.tensor<2x8x4xf16, local> -> !coco.tensor<2x8x4xf16, sliced<1>>
    %t = coco.add %s, %b {name = "layer1_bias"} : (!coco.tensor<2x8x4xf16, sliced<1>>, !coco.tensor<4xf16, replicated>) -> !coco.tensor<2x8x4xf16, sliced<1>>
    %d = coco.dropout %t p = 1.000000e-01 seed = 11 : (!coco.tensor<2x8x4xf16, sliced<1>>) -> !coco.tensor<2x8x4xf16, sliced<1>>
    %g = coco.all_gather %d {name = "layer1_ag"} : !coco.tensor<2x8x4xf16, sliced<1>> -> !coco.tensor<2x8x4xf16, replicated>
    coco.yield %g : !coco.tensor<2x8x4xf16, replicated>
  }
  %o2 = coco.fusion (%x2, %bias) {name = "layer2"} : (!coco.tensor<2x16x4xf16, local>, !coco.tensor<4xf16, replicated>) -> !coco.tensor<2x16x4xf16, replicated> {
  ^bb0(%a: !coco.tensor<2x16x4xf16, local>, %b: !coco.tensor<4xf16, replicated>):
    %s = coco.reduce_scatter %a reduction = sum dim = 1 : !coco.tensor<2x16x4xf16, local> -> !coco.tensor<2x16x4xf16, sliced<1>>
    %t = coco.add %s, %b : (!coco.tensor<2x16x4xf16, sliced<1>>, !coco.tensor<4xf16, replicated>) -> !coco.tensor<2x16x4xf16, sliced<1>>
    %d = coco.dropout %t p = 1.000000e-01 seed = 13 : (!coco.tensor<2x16x4xf16, sliced<1>>) -> !coco.tensor<2x16x4xf16, sliced<1>>
    %g = coco.all_gather %d : !coco.tensor<2x16x4xf16, sliced<1>> -> !coco.tensor<2x16x4xf16, replicated>
    coco.yield %g : !coco.tensor<2x16x4xf16, replicated>
  }
  %y0 = coco.dropout %y p = 5.000000e-01 seed = 3 {name = "first"} : (!coco.tensor<16xf32, replicated>) -> !coco.tensor<16xf32, replicated>
  %y1 = coco.dropout %y p = 5.000000e-01 seed = 5 {name = "second"} : (!coco.tensor<16xf32, replicated>) -> !coco.tensor<16xf32, replicated>
  func.return %o0, %o1, %o2, %y0, %y1 : !coco.tensor<2x8x4xf16, replicated>, !coco.tensor<2x8x4xf16, replicated>, !coco.tensor<2x16x4xf16, replicated>, !coco.tensor<16xf32, replicated>, !coco.tensor<16xf32, replicated>
}
