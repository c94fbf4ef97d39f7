// RUN: not coconet-opt %s -t cuda 2>&1 | filecheck %s
// An op the CUDA target does not know, in a kernel.

builtin.module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @k(%x: memref<4xf32>) kernel {
      // CHECK: errors-unknown.mlir:[[# @LINE + 1]]:7: error: 'gpu.lane_id' op the CUDA target does not know 'gpu.lane_id' (in a kernel)
      %l = "gpu.lane_id"() : () -> index
      gpu.return
    }
  }
}
