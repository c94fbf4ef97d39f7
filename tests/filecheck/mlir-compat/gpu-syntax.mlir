// REQUIRES: mlir-opt
// RUN: coconet-opt %s | sed -e 's/^builtin.module/module/' -e 's/func.return/return/' > %t.xdsl.mlir
// RUN: %mlir-opt %s > %t.mlir.mlir
// RUN: coconet-opt %t.mlir.mlir | sed -e 's/^builtin.module/module/' -e 's/func.return/return/' > %t.back.mlir
// RUN: coconet-opt --print-op-generic %s | %mlir-opt --mlir-print-op-generic | filecheck %s --check-prefix=GENERIC
// RUN: coconet-opt --print-op-generic %s | %mlir-opt > %t.generic.mlir
// (diff last: lit's built-in diff leaves PYTHONPATH set for the commands after it.)
// RUN: diff %t.xdsl.mlir %t.mlir.mlir
// RUN: diff %t.back.mlir %t.xdsl.mlir
// RUN: diff %t.generic.mlir %t.mlir.mlir
// The kernel syntax is MLIR's: coconet-opt (xDSL's gpu dialect with MLIR's
// syntax for gpu.module, gpu.func, gpu.launch_func, the ids, gpu.barrier and
// gpu.return; coconet_ir/dialects/gpu.py) prints this file exactly as
// mlir-opt 22 does, reads what mlir-opt prints, and its generic form marks a
// kernel with MLIR's `gpu.kernel` attribute (xDSL's own uses a `kernel`
// property, which MLIR rejects). The only other differences are xDSL's own
// spellings `builtin.module` and `func.return`, which MLIR reads too.

module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @scale(%arg0: index, %arg1: memref<f32>, %arg2: memref<1024xf32>, %arg3: memref<1024xf32>) kernel {
      %block_id_x = gpu.block_id  x
      %block_dim_x = gpu.block_dim  x
      %thread_id_x = gpu.thread_id  x
      %grid_dim_x = gpu.grid_dim  x
      %0 = arith.muli %block_id_x, %block_dim_x : index
      %1 = arith.addi %0, %thread_id_x : index
      %2 = arith.muli %grid_dim_x, %block_dim_x : index
      scf.for %arg4 = %1 to %arg0 step %2 {
        %3 = memref.load %arg1[] : memref<f32>
        %4 = memref.load %arg2[%arg4] : memref<1024xf32>
        %5 = arith.mulf %3, %4 : f32
        memref.store %5, %arg3[%arg4] : memref<1024xf32>
      }
      gpu.barrier
      gpu.return
    }
    gpu.func @helper(%arg0: f32) -> f32 {
      gpu.return %arg0 : f32
    }
  }
  func.func @launch(%arg0: memref<1024xf32>, %arg1: memref<1024xf32>, %arg2: memref<f32>) {
    %c1024 = arith.constant 1024 : index
    %c256 = arith.constant 256 : index
    %c4 = arith.constant 4 : index
    %c1 = arith.constant 1 : index
    gpu.launch_func  @kernels::@scale blocks in (%c4, %c1, %c1) threads in (%c256, %c1, %c1)  args(%c1024 : index, %arg2 : memref<f32>, %arg0 : memref<1024xf32>, %arg1 : memref<1024xf32>) {coco_gpu.stream = 1 : i64}
    return
  }
}

// GENERIC: "gpu.func"() <{function_type = (index, memref<f32>, memref<1024xf32>, memref<1024xf32>) -> ()}> ({
// GENERIC: }) {gpu.kernel, sym_name = "scale"{{.*}}} : () -> ()
// GENERIC: "gpu.launch_func"({{.*}}) <{kernel = @kernels::@scale, operandSegmentSizes = array<i32: 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 4, 0>}> {coco_gpu.stream = 1 : i64}
