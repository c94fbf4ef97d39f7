// RUN: not coconet-opt %s -t cuda 2>&1 | filecheck %s
// An op the CUDA target does not print is one located diagnostic, not a
// traceback.

builtin.module {
  func.func @f(%x: memref<4xf32>) {
    %c0 = arith.constant 0 : index
    // CHECK: errors.mlir:[[# @LINE + 1]]:5: error: 'memref.load' op the CUDA target reads and writes device memory only in kernels
    %v = memref.load %x[%c0] : memref<4xf32>
    func.return
  }
}

// RUN: not coconet-opt %S/../../../../examples/sgd.mlir -t cuda 2>&1 | filecheck %s --check-prefix=TENSOR
// TENSOR: sgd.mlir:{{[0-9]+}}:{{[0-9]+}}: error: 'func.func' op the CUDA target cannot print this: type !coco.tensor<1024xf32, local> has no CUDA C spelling (the CUDA target prints the device level: run convert-coco-to-gpu first)
