// RUN: coconet-opt %s -t cuda | filecheck %s
// Grid-stride elementwise kernels over contiguous f32 (4 per float4) or
// f16/bf16 (8 per uint4) buffers get a 16-byte vector main loop, run when every
// vector buffer is 16-byte aligned, and the scalar loop for the tail. An
// in-place buffer is loaded and stored as one lane array; scalars (rank 0) stay
// scalar; a use of the induction variable is each lane's index; a buffer only
// read at another index (a broadcast bias) is read element by element in each
// lane. Kernels over i32 buffers, sizes not divisible by the width, a buffer
// read at another index than the one it is written at, or a gather (a buffer
// read at another index, no smaller than the others: a slice's copy), stay
// scalar.

builtin.module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @axpy(%n: index, %a: memref<f32>, %x: memref<1024xf32>, %y: memref<1024xf32>) kernel {
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %tid = gpu.thread_id x
      %gdim = gpu.grid_dim x
      %base = arith.muli %bid, %bdim : index
      %start = arith.addi %base, %tid : index
      %step = arith.muli %gdim, %bdim : index
      scf.for %i = %start to %n step %step {
        %s = memref.load %a[] : memref<f32>
        %xv = memref.load %x[%i] : memref<1024xf32>
        %yv = memref.load %y[%i] : memref<1024xf32>
        %p = arith.mulf %s, %xv : f32
        %r = arith.addf %p, %yv : f32
        memref.store %r, %y[%i] : memref<1024xf32>
      }
      gpu.return
    }
    gpu.func @scale_half(%n: index, %h: memref<64xf16>, %o: memref<64xf16>) kernel {
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %tid = gpu.thread_id x
      %gdim = gpu.grid_dim x
      %base = arith.muli %bid, %bdim : index
      %start = arith.addi %tid, %base : index
      %step = arith.muli %gdim, %bdim : index
      scf.for %i = %start to %n step %step {
        %hv = memref.load %h[%i] : memref<64xf16>
        %two = arith.constant 2.000000e+00 : f16
        %m = arith.mulf %hv, %two : f16
        memref.store %m, %o[%i] : memref<64xf16>
      }
      gpu.return
    }
    gpu.func @iota(%n: index, %o: memref<64xf32>) kernel {
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %tid = gpu.thread_id x
      %gdim = gpu.grid_dim x
      %base = arith.muli %bid, %bdim : index
      %start = arith.addi %base, %tid : index
      %step = arith.muli %gdim, %bdim : index
      scf.for %i = %start to %n step %step {
        %c = arith.index_cast %i : index to i32
        %f = arith.sitofp %c : i32 to f32
        memref.store %f, %o[%i] : memref<64xf32>
      }
      gpu.return
    }
    gpu.func @ints(%n: index, %o: memref<64xi32>) kernel {
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %tid = gpu.thread_id x
      %gdim = gpu.grid_dim x
      %base = arith.muli %bid, %bdim : index
      %start = arith.addi %base, %tid : index
      %step = arith.muli %gdim, %bdim : index
      scf.for %i = %start to %n step %step {
        %c = arith.index_cast %i : index to i32
        memref.store %c, %o[%i] : memref<64xi32>
      }
      gpu.return
    }
    gpu.func @odd(%n: index, %o: memref<6xf32>) kernel {
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %tid = gpu.thread_id x
      %gdim = gpu.grid_dim x
      %base = arith.muli %bid, %bdim : index
      %start = arith.addi %base, %tid : index
      %step = arith.muli %gdim, %bdim : index
      scf.for %i = %start to %n step %step {
        %z = arith.constant 0.000000e+00 : f32
        memref.store %z, %o[%i] : memref<6xf32>
      }
      gpu.return
    }
    gpu.func @bias(%n: index, %x: memref<64xf16>, %b: memref<8xf16>, %o: memref<64xf16>) kernel {
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %tid = gpu.thread_id x
      %gdim = gpu.grid_dim x
      %base = arith.muli %bid, %bdim : index
      %start = arith.addi %base, %tid : index
      %step = arith.muli %gdim, %bdim : index
      scf.for %i = %start to %n step %step {
        %xv = memref.load %x[%i] : memref<64xf16>
        %c8 = arith.constant 8 : index
        %k = arith.remui %i, %c8 : index
        %bv = memref.load %b[%k] : memref<8xf16>
        %s = arith.addf %xv, %bv : f16
        memref.store %s, %o[%i] : memref<64xf16>
      }
      gpu.return
    }
    gpu.func @shifted(%n: index, %o: memref<64xf32>) kernel {
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %tid = gpu.thread_id x
      %gdim = gpu.grid_dim x
      %base = arith.muli %bid, %bdim : index
      %start = arith.addi %base, %tid : index
      %step = arith.muli %gdim, %bdim : index
      scf.for %i = %start to %n step %step {
        %c8 = arith.constant 8 : index
        %k = arith.remui %i, %c8 : index
        %ov = memref.load %o[%k] : memref<64xf32>
        memref.store %ov, %o[%i] : memref<64xf32>
      }
      gpu.return
    }
    gpu.func @gather(%n: index, %s: memref<128xf32>, %o: memref<64xf32>) kernel {
      %bid = gpu.block_id x
      %bdim = gpu.block_dim x
      %tid = gpu.thread_id x
      %gdim = gpu.grid_dim x
      %base = arith.muli %bid, %bdim : index
      %start = arith.addi %base, %tid : index
      %step = arith.muli %gdim, %bdim : index
      scf.for %i = %start to %n step %step {
        %c64 = arith.constant 64 : index
        %k = arith.addi %i, %c64 : index
        %sv = memref.load %s[%k] : memref<128xf32>
        memref.store %sv, %o[%i] : memref<64xf32>
      }
      gpu.return
    }
  }
}

// CHECK-LABEL: void axpy(int64_t n, const float *__restrict__ a, const float *__restrict__ x, float *__restrict__ y) {
// CHECK-NEXT:    const int64_t bdim = (int64_t)blockDim.x;
// CHECK-NEXT:    const int64_t start = ((int64_t)blockIdx.x * bdim) + (int64_t)threadIdx.x;
// CHECK-NEXT:    const int64_t stride = (int64_t)gridDim.x * bdim;
// CHECK-NEXT:    const int64_t vectors = n / 4;
// CHECK-NEXT:    int64_t tail = start;
// CHECK-NEXT:    if ((((uintptr_t)x | (uintptr_t)y) % 16) == 0) {
// CHECK-NEXT:      for (int64_t v = start; v < vectors; v += stride) {
// CHECK-NEXT:        alignas(16) float x_v[4];
// CHECK-NEXT:        *reinterpret_cast<float4 *>(x_v) = reinterpret_cast<const float4 *>(x)[v];
// CHECK-NEXT:        alignas(16) float y_v[4];
// CHECK-NEXT:        *reinterpret_cast<float4 *>(y_v) = reinterpret_cast<const float4 *>(y)[v];
// CHECK-NEXT:        y_v[0] = (a[0] * x_v[0]) + y_v[0];
// CHECK-NEXT:        y_v[1] = (a[0] * x_v[1]) + y_v[1];
// CHECK-NEXT:        y_v[2] = (a[0] * x_v[2]) + y_v[2];
// CHECK-NEXT:        y_v[3] = (a[0] * x_v[3]) + y_v[3];
// CHECK-NEXT:        reinterpret_cast<float4 *>(y)[v] = *reinterpret_cast<const float4 *>(y_v);
// CHECK-NEXT:      }
// CHECK-NEXT:      tail = vectors * 4 + start;
// CHECK-NEXT:    }
// CHECK-NEXT:    for (int64_t i = tail; i < n; i += stride) {
// CHECK-NEXT:      y[i] = (a[0] * x[i]) + y[i];
// CHECK-NEXT:    }
// CHECK-NEXT:  }

// CHECK-LABEL: void scale_half(int64_t n, const __half *__restrict__ h, __half *__restrict__ o) {
// CHECK:         const int64_t vectors = n / 8;
// CHECK:           alignas(16) __half h_v[8];
// CHECK-NEXT:      *reinterpret_cast<uint4 *>(h_v) = reinterpret_cast<const uint4 *>(h)[v];
// CHECK-NEXT:      alignas(16) __half o_v[8];
// CHECK-NEXT:      o_v[0] = __float2half(__half2float(h_v[0]) * __half2float(__float2half(2.0f)));
// CHECK:           o_v[7] = __float2half(__half2float(h_v[7]) * __half2float(__float2half(2.0f)));
// CHECK-NEXT:      reinterpret_cast<uint4 *>(o)[v] = *reinterpret_cast<const uint4 *>(o_v);

// CHECK-LABEL: void iota(
// CHECK:           o_v[0] = (float)(int32_t)(v * 4 + 0);
// CHECK-NEXT:      o_v[1] = (float)(int32_t)(v * 4 + 1);

// CHECK-LABEL: void ints(
// CHECK-NOT:     vectors
// CHECK:         for (int64_t i =

// CHECK-LABEL: void odd(
// CHECK-NOT:     vectors
// CHECK:         for (int64_t i =

// CHECK-LABEL: void bias(
// CHECK:         if ((((uintptr_t)x | (uintptr_t)o) % 16) == 0) {
// The width divides the bias's 8: i % 8 is lane 0's remainder plus the lane.
// CHECK-NEXT:      for (int64_t v = start; v < vectors; v += stride) {
// CHECK-NEXT:        const int64_t lane0_rem = (int64_t)((uint64_t)(v * 8) % (uint64_t)8);
// CHECK-NEXT:        alignas(16) __half x_v[8];
// CHECK-NEXT:        *reinterpret_cast<uint4 *>(x_v) = reinterpret_cast<const uint4 *>(x)[v];
// CHECK-NEXT:        alignas(16) __half o_v[8];
// CHECK-NEXT:        o_v[0] = __float2half(__half2float(x_v[0]) + __half2float(b[lane0_rem]));
// CHECK-NEXT:        o_v[1] = __float2half(__half2float(x_v[1]) + __half2float(b[(lane0_rem + 1)]));
// CHECK:             o_v[7] = __float2half(__half2float(x_v[7]) + __half2float(b[(lane0_rem + 7)]));
// CHECK-NEXT:        reinterpret_cast<uint4 *>(o)[v] = *reinterpret_cast<const uint4 *>(o_v);
// CHECK-NEXT:      }
// CHECK-NEXT:      tail = vectors * 8 + start;
// CHECK-NEXT:    }
// CHECK-NEXT:    for (int64_t i = tail; i < n; i += stride) {
// CHECK-NEXT:      o[i] = __float2half(__half2float(x[i]) + __half2float(b[(int64_t)((uint64_t)i % (uint64_t)8)]));

// CHECK-LABEL: void shifted(
// CHECK-NOT:     vectors
// CHECK:         for (int64_t i =

// CHECK-LABEL: void gather(
// CHECK-NOT:     vectors
// CHECK:         for (int64_t i =
