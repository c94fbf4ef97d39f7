// RUN: coconet-opt %s -t cuda | filecheck %s
// scf.for with iter_args (mutable locals, assigned together by scf.yield),
// scf.if with and without results, gpu.barrier, shared memory (a block-wide
// sum, as a norm kernel does).

builtin.module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @block_sum(%n: index, %x: memref<1024xf32>, %out: memref<1xf32>) kernel {
      %buf = memref.alloca() : memref<256xf32, 3>
      %tid = gpu.thread_id x
      %bdim = gpu.block_dim x
      %zero = arith.constant 0.000000e+00 : f32
      %c0 = arith.constant 0 : index
      %acc, %count = scf.for %i = %tid to %n step %bdim iter_args(%sum = %zero, %k = %c0) -> (f32, index) {
        %v = memref.load %x[%i] : memref<1024xf32>
        %sq = arith.mulf %v, %v : f32
        %s2 = arith.addf %sum, %sq : f32
        %c1 = arith.constant 1 : index
        %k2 = arith.addi %k, %c1 : index
        scf.yield %s2, %k2 : f32, index
      }
      memref.store %acc, %buf[%tid] : memref<256xf32, 3>
      gpu.barrier
      %first = arith.cmpi eq, %tid, %c0 : index
      scf.if %first {
        %total = memref.load %buf[%c0] : memref<256xf32, 3>
        memref.store %total, %out[%c0] : memref<1xf32>
      }
      %big = arith.cmpi sgt, %count, %c0 : index
      %r = scf.if %big -> (f32) {
        scf.yield %acc : f32
      } else {
        scf.yield %zero : f32
      }
      memref.store %r, %buf[%tid] : memref<256xf32, 3>
      gpu.return
    }
  }
}

// CHECK-LABEL: extern "C" __global__ void block_sum(int64_t n, const float *__restrict__ x, float *__restrict__ out) {
// CHECK-NEXT:    COCO_SHARED(float, buf, 256);
// CHECK-NEXT:    const int64_t tid = (int64_t)threadIdx.x;
// CHECK-NEXT:    float acc = 0.0f;
// CHECK-NEXT:    int64_t count = 0;
// CHECK-NEXT:    for (int64_t i = tid; i < n; i += (int64_t)blockDim.x) {
// CHECK-NEXT:      const float v = x[i];
// CHECK-NEXT:      const float acc_next = acc + (v * v);
// CHECK-NEXT:      const int64_t count_next = count + 1;
// CHECK-NEXT:      acc = acc_next;
// CHECK-NEXT:      count = count_next;
// CHECK-NEXT:    }
// CHECK-NEXT:    buf[tid] = acc;
// CHECK-NEXT:    __syncthreads();
// CHECK-NEXT:    if (tid == 0) {
// CHECK-NEXT:      out[0] = buf[0];
// CHECK-NEXT:    }
// CHECK-NEXT:    float r;
// CHECK-NEXT:    if (count > 0) {
// CHECK-NEXT:      r = acc;
// CHECK-NEXT:    } else {
// CHECK-NEXT:      r = 0.0f;
// CHECK-NEXT:    }
// CHECK-NEXT:    buf[tid] = r;
// CHECK-NEXT:  }
