// RUN: coconet-opt %s -t cuda | filecheck %s
// Every arith.cmpi and arith.cmpf predicate and the C it prints: signed
// and unsigned integer comparisons (the unsigned ones cast), ordered float
// comparisons as C's (false on NaN), unordered ones as the negation of the
// opposite ordered one (true on NaN). Issue 25: a wrong operator in the
// printer's tables was caught only by the emulated examples, if at all.

builtin.module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @compare(%x: memref<4xi32>, %y: memref<4xf32>, %out: memref<32xi1>) kernel {
      %i = gpu.thread_id x
      %a = memref.load %x[%i] : memref<4xi32>
      %c3 = arith.constant 3 : index
      %j = arith.addi %i, %c3 : index
      %b = memref.load %x[%j] : memref<4xi32>
      %f = memref.load %y[%i] : memref<4xf32>
      %g = memref.load %y[%j] : memref<4xf32>
      %i_eq = arith.cmpi eq, %a, %b : i32
      %k0 = arith.constant 0 : index
      memref.store %i_eq, %out[%k0] : memref<32xi1>
      %i_ne = arith.cmpi ne, %a, %b : i32
      %k1 = arith.constant 1 : index
      memref.store %i_ne, %out[%k1] : memref<32xi1>
      %i_slt = arith.cmpi slt, %a, %b : i32
      %k2 = arith.constant 2 : index
      memref.store %i_slt, %out[%k2] : memref<32xi1>
      %i_sle = arith.cmpi sle, %a, %b : i32
      %k3 = arith.constant 3 : index
      memref.store %i_sle, %out[%k3] : memref<32xi1>
      %i_sgt = arith.cmpi sgt, %a, %b : i32
      %k4 = arith.constant 4 : index
      memref.store %i_sgt, %out[%k4] : memref<32xi1>
      %i_sge = arith.cmpi sge, %a, %b : i32
      %k5 = arith.constant 5 : index
      memref.store %i_sge, %out[%k5] : memref<32xi1>
      %i_ult = arith.cmpi ult, %a, %b : i32
      %k6 = arith.constant 6 : index
      memref.store %i_ult, %out[%k6] : memref<32xi1>
      %i_ule = arith.cmpi ule, %a, %b : i32
      %k7 = arith.constant 7 : index
      memref.store %i_ule, %out[%k7] : memref<32xi1>
      %i_ugt = arith.cmpi ugt, %a, %b : i32
      %k8 = arith.constant 8 : index
      memref.store %i_ugt, %out[%k8] : memref<32xi1>
      %i_uge = arith.cmpi uge, %a, %b : i32
      %k9 = arith.constant 9 : index
      memref.store %i_uge, %out[%k9] : memref<32xi1>
      %f_false = arith.cmpf false, %f, %g : f32
      %k10 = arith.constant 10 : index
      memref.store %f_false, %out[%k10] : memref<32xi1>
      %f_oeq = arith.cmpf oeq, %f, %g : f32
      %k11 = arith.constant 11 : index
      memref.store %f_oeq, %out[%k11] : memref<32xi1>
      %f_ogt = arith.cmpf ogt, %f, %g : f32
      %k12 = arith.constant 12 : index
      memref.store %f_ogt, %out[%k12] : memref<32xi1>
      %f_oge = arith.cmpf oge, %f, %g : f32
      %k13 = arith.constant 13 : index
      memref.store %f_oge, %out[%k13] : memref<32xi1>
      %f_olt = arith.cmpf olt, %f, %g : f32
      %k14 = arith.constant 14 : index
      memref.store %f_olt, %out[%k14] : memref<32xi1>
      %f_ole = arith.cmpf ole, %f, %g : f32
      %k15 = arith.constant 15 : index
      memref.store %f_ole, %out[%k15] : memref<32xi1>
      %f_one = arith.cmpf one, %f, %g : f32
      %k16 = arith.constant 16 : index
      memref.store %f_one, %out[%k16] : memref<32xi1>
      %f_ord = arith.cmpf ord, %f, %g : f32
      %k17 = arith.constant 17 : index
      memref.store %f_ord, %out[%k17] : memref<32xi1>
      %f_ueq = arith.cmpf ueq, %f, %g : f32
      %k18 = arith.constant 18 : index
      memref.store %f_ueq, %out[%k18] : memref<32xi1>
      %f_ugt = arith.cmpf ugt, %f, %g : f32
      %k19 = arith.constant 19 : index
      memref.store %f_ugt, %out[%k19] : memref<32xi1>
      %f_uge = arith.cmpf uge, %f, %g : f32
      %k20 = arith.constant 20 : index
      memref.store %f_uge, %out[%k20] : memref<32xi1>
      %f_ult = arith.cmpf ult, %f, %g : f32
      %k21 = arith.constant 21 : index
      memref.store %f_ult, %out[%k21] : memref<32xi1>
      %f_ule = arith.cmpf ule, %f, %g : f32
      %k22 = arith.constant 22 : index
      memref.store %f_ule, %out[%k22] : memref<32xi1>
      %f_une = arith.cmpf une, %f, %g : f32
      %k23 = arith.constant 23 : index
      memref.store %f_une, %out[%k23] : memref<32xi1>
      %f_uno = arith.cmpf uno, %f, %g : f32
      %k24 = arith.constant 24 : index
      memref.store %f_uno, %out[%k24] : memref<32xi1>
      %f_true = arith.cmpf true, %f, %g : f32
      %k25 = arith.constant 25 : index
      memref.store %f_true, %out[%k25] : memref<32xi1>
      gpu.return
    }
  }
}

// CHECK-LABEL: extern "C" __global__ void compare(
// CHECK:       out[0] = a == b;
// CHECK-NEXT:  out[1] = a != b;
// CHECK-NEXT:  out[2] = a < b;
// CHECK-NEXT:  out[3] = a <= b;
// CHECK-NEXT:  out[4] = a > b;
// CHECK-NEXT:  out[5] = a >= b;
// CHECK-NEXT:  out[6] = (uint32_t)a < (uint32_t)b;
// CHECK-NEXT:  out[7] = (uint32_t)a <= (uint32_t)b;
// CHECK-NEXT:  out[8] = (uint32_t)a > (uint32_t)b;
// CHECK-NEXT:  out[9] = (uint32_t)a >= (uint32_t)b;
// CHECK-NEXT:  out[10] = false;
// CHECK-NEXT:  out[11] = f == g;
// CHECK-NEXT:  out[12] = f > g;
// CHECK-NEXT:  out[13] = f >= g;
// CHECK-NEXT:  out[14] = f < g;
// CHECK-NEXT:  out[15] = f <= g;
// CHECK-NEXT:  out[16] = f < g || f > g;
// CHECK-NEXT:  out[17] = f == f && g == g;
// CHECK-NEXT:  out[18] = !(f < g || f > g);
// CHECK-NEXT:  out[19] = !(f <= g);
// CHECK-NEXT:  out[20] = !(f < g);
// CHECK-NEXT:  out[21] = !(f >= g);
// CHECK-NEXT:  out[22] = !(f > g);
// CHECK-NEXT:  out[23] = f != g;
// CHECK-NEXT:  out[24] = f != f || g != g;
// CHECK-NEXT:  out[25] = true;
