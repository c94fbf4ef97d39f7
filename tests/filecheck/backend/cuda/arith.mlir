// RUN: coconet-opt %s -t cuda | filecheck %s
// arith and math by type: f32 and f64 in their own precision, f16/bf16 widened
// to float and rounded back after each op, i32 wrapping arithmetic in uint32_t,
// comparisons, select, casts, Philox's mului_extended.

builtin.module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @floats(%x: memref<4xf32>, %d: memref<4xf64>, %h: memref<4xf16>, %b: memref<4xbf16>) kernel {
      %i = gpu.thread_id x
      %a = memref.load %x[%i] : memref<4xf32>
      %half = arith.constant 5.000000e-01 : f32
      %m = arith.mulf %a, %half : f32
      %e = math.exp %m : f32
      %s = math.sqrt %e : f32
      %t = math.tanh %s : f32
      %n = arith.negf %t : f32
      %mx = arith.maximumf %n, %a : f32
      %q = arith.divf %mx, %a : f32
      memref.store %q, %x[%i] : memref<4xf32>
      %dv = memref.load %d[%i] : memref<4xf64>
      %dl = math.log %dv : f64
      %dr = math.rsqrt %dl : f64
      memref.store %dr, %d[%i] : memref<4xf64>
      %hv = memref.load %h[%i] : memref<4xf16>
      %hs = arith.addf %hv, %hv : f16
      %hh = arith.mulf %hs, %hv : f16
      memref.store %hh, %h[%i] : memref<4xf16>
      %bv = memref.load %b[%i] : memref<4xbf16>
      %bone = arith.constant 1.000000e+00 : bf16
      %bs = arith.subf %bv, %bone : bf16
      %bt = math.tanh %bs : bf16
      memref.store %bt, %b[%i] : memref<4xbf16>
      gpu.return
    }
    gpu.func @ints(%x: memref<4xi32>, %y: memref<4xf32>, %mask: memref<4xi1>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %x[%i] : memref<4xi32>
      %k = arith.constant -766435501 : i32
      %lo, %hi = arith.mului_extended %v, %k : i32
      %x1 = arith.xori %hi, %v : i32
      %s1 = arith.addi %x1, %lo : i32
      %c16 = arith.constant 16 : i32
      %sh = arith.shrui %s1, %c16 : i32
      memref.store %sh, %x[%i] : memref<4xi32>
      %f = arith.uitofp %s1 : i32 to f32
      %p = arith.constant 2.3283064e-10 : f32
      %u = arith.mulf %f, %p : f32
      %keep = arith.cmpf oge, %u, %p : f32
      %zero = arith.constant 0.000000e+00 : f32
      %sel = arith.select %keep, %u, %zero : f32
      memref.store %sel, %y[%i] : memref<4xf32>
      %c2 = arith.constant 2 : index
      %lt = arith.cmpi ult, %i, %c2 : index
      memref.store %lt, %mask[%i] : memref<4xi1>
      %inf = arith.constant 0xFF800000 : f32
      %neg = arith.cmpf une, %u, %inf : f32
      %ext = arith.extui %neg : i1 to i32
      %idx = arith.index_cast %ext : i32 to index
      %fp = arith.sitofp %v : i32 to f32
      memref.store %fp, %y[%idx] : memref<4xf32>
      gpu.return
    }
  }
}

// CHECK-LABEL: extern "C" __global__ void floats(float *__restrict__ x, double *__restrict__ d, __half *__restrict__ h, __nv_bfloat16 *__restrict__ b) {
// CHECK-NEXT:    const int64_t i = (int64_t)threadIdx.x;
// CHECK-NEXT:    const float a = x[i];
// CHECK-NEXT:    x[i] = coco::maximum(-tanhf(sqrtf(expf(a * 0.5f))), a) / a;
// CHECK-NEXT:    d[i] = rsqrt(log(d[i]));
// CHECK-NEXT:    const __half hv = h[i];
// CHECK-NEXT:    h[i] = __float2half(__half2float(__float2half(__half2float(hv) + __half2float(hv))) * __half2float(hv));
// CHECK-NEXT:    b[i] = __float2bfloat16(tanhf(__bfloat162float(__float2bfloat16(__bfloat162float(b[i]) - __bfloat162float(__float2bfloat16(1.0f))))));
// CHECK-NEXT:  }
// CHECK-LABEL: extern "C" __global__ void ints(int32_t *__restrict__ x, float *__restrict__ y, bool *__restrict__ mask) {
// CHECK-NEXT:    const int64_t i = (int64_t)threadIdx.x;
// CHECK-NEXT:    const int32_t v = x[i];
// CHECK-NEXT:    const int32_t s1 = (int32_t)((uint32_t)((int32_t)__umulhi((uint32_t)v, (uint32_t)(-766435501)) ^ v) + (uint32_t)(int32_t)((uint32_t)v * (uint32_t)(-766435501)));
// CHECK-NEXT:    x[i] = (int32_t)((uint32_t)s1 >> (uint32_t)16);
// CHECK-NEXT:    const float u = (float)(uint32_t)s1 * 2.3283064e-10f;
// CHECK-NEXT:    y[i] = (u >= 2.3283064e-10f) ? u : 0.0f;
// CHECK-NEXT:    mask[i] = (uint64_t)i < (uint64_t)2;
// CHECK-NEXT:    y[(int64_t)(int32_t)(u != (-INFINITY))] = (float)v;
// CHECK-NEXT:  }
