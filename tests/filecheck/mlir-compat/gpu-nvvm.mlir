// REQUIRES: mlir-opt, ptxas
// RUN: coconet-opt %s -t upstream-kernels > %t.kernels.mlir
// RUN: %mlir-opt %t.kernels.mlir --pass-pipeline='builtin.module(nvvm-attach-target{chip=sm_90},gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm),reconcile-unrealized-casts,gpu-module-to-binary{format=isa toolkit=%cuda-toolkit})' > %t.binary.mlir
// RUN: python -m coconet_ir.backend.cuda.mlir_interop ptx %t.binary.mlir > %t.ptx
// RUN: filecheck %s < %t.ptx
// RUN: %ptxas -arch=sm_90 %t.ptx -o %t.cubin
// Kernels made of upstream ops go through real MLIR's own NVVM pipeline to PTX
// that ptxas assembles (docs/gpu/mlir.md): `-t upstream-kernels` keeps them (the
// kernel that uses coco_gpu ops is left out) in the generic form, mlir-opt 22
// lowers them (math ops link libdevice from the CUDA toolkit), and ptxas
// -arch=sm_90 assembles the PTX.

builtin.module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @scale(%n: index, %lr: memref<f32>, %s: memref<1024xf32>, %out: memref<1024xf32>) kernel {
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %tid = gpu.thread_id x
      %gdim = gpu.grid_dim x
      %base = arith.muli %bid, %bdim : index
      %start = arith.addi %base, %tid : index
      %step = arith.muli %gdim, %bdim : index
      scf.for %i = %start to %n step %step {
        %a = memref.load %lr[] : memref<f32>
        %b = memref.load %s[%i] : memref<1024xf32>
        %c = arith.mulf %a, %b : f32
        %e = math.exp %c : f32
        memref.store %e, %out[%i] : memref<1024xf32>
      }
      gpu.return
    }
    gpu.func @halves(%h: memref<4x8xf16>, %b: memref<4x8xbf16>) kernel {
      %r = gpu.thread_id x
      %c = gpu.thread_id y
      %hv = memref.load %h[%r, %c] : memref<4x8xf16>
      %hs = arith.addf %hv, %hv : f16
      memref.store %hs, %h[%r, %c] : memref<4x8xf16>
      %bv = memref.load %b[%r, %c] : memref<4x8xbf16>
      %bt = math.tanh %bv : bf16
      memref.store %bt, %b[%r, %c] : memref<4x8xbf16>
      gpu.return
    }
    gpu.func @philox(%x: memref<256xi32>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<256xi32>
      %k = arith.constant -766435501 : i32
      %lo, %hi = arith.mului_extended %v, %k : i32
      %m = arith.xori %hi, %lo : i32
      memref.store %m, %x[%i] : memref<256xi32>
      gpu.return
    }
    gpu.func @block_sum(%x: memref<256xf32>, %out: memref<1xf32>) kernel {
      %buf = memref.alloca() : memref<256xf32, 3>
      %tid = gpu.thread_id x
      %v = memref.load %x[%tid] : memref<256xf32>
      memref.store %v, %buf[%tid] : memref<256xf32, 3>
      gpu.barrier
      %c0 = arith.constant 0 : index
      %first = arith.cmpi eq, %tid, %c0 : index
      scf.if %first {
        %zero = arith.constant 0.000000e+00 : f32
        %c1 = arith.constant 1 : index
        %c256 = arith.constant 256 : index
        %sum = scf.for %j = %c0 to %c256 step %c1 iter_args(%acc = %zero) -> (f32) {
          %w = memref.load %buf[%j] : memref<256xf32, 3>
          %acc2 = arith.addf %acc, %w : f32
          scf.yield %acc2 : f32
        }
        memref.store %sum, %out[%c0] : memref<1xf32>
      }
      gpu.return
    }
    gpu.func @signal(%peers: !coco_gpu.peers, %slot: index, %epoch: i64) kernel {
      %p = arith.constant 0 : index
      coco_gpu.signal %peers, %p, %slot, %epoch
      gpu.return
    }
  }
}

// CHECK-DAG: .entry scale(
// CHECK-DAG: .entry halves(
// CHECK-DAG: .entry philox(
// CHECK-DAG: .entry block_sum(
// CHECK-DAG: mul.wide.u32 {{.*}}, -766435501;
// CHECK-DAG: bar.sync
// CHECK-NOT: .entry signal(
