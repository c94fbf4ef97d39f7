// RUN: coconet-opt %s -p convert-coco-to-gpu | filecheck %s
// Regions: an elementwise coco.fusion is ONE kernel computing the whole chain
// per element (several outputs, rounded after each op); a fusion holding
// reduce_scatters is one fused collective kernel (else a FALLBACK, op by op);
// a coco.overlap runs chunk by chunk on two streams; both keep dropout's
// global index.

// CHECK:      gpu.func @chain_chain_0(%n: index, %rank: index, %seed: i64, %x: memref<16xf16>, %b: memref<8xf16>, %w: memref<16xf16>, %result0: memref<16xf16>, %w_1: memref<16xf16>) kernel {
// CHECK:        scf.for %i = %start to %n step %step {
// CHECK-NEXT:     %5 = memref.load %x[%i] : memref<16xf16>
// CHECK-NEXT:     %6 = arith.constant 8 : index
// CHECK-NEXT:     %7 = arith.remui %i, %6 : index
// CHECK-NEXT:     %8 = memref.load %b[%7] : memref<8xf16>
// CHECK-NEXT:     %9 = arith.extf %5 : f16 to f32
// CHECK-NEXT:     %10 = arith.extf %8 : f16 to f32
// CHECK-NEXT:     %11 = arith.addf %9, %10 : f32
// CHECK-NEXT:     %12 = arith.truncf %11 : f32 to f16
// CHECK-NEXT:     %13 = arith.extf %12 : f16 to f32
// The rank's block of the [4, 8] value is one run of it: global index =
// i + rank * 16 (rows i / 8 + rank * 2), no digits.
// CHECK-NEXT:     %14 = arith.constant 16 : index
// CHECK-NEXT:     %15 = arith.muli %rank, %14 : index
// CHECK-NEXT:     %16 = arith.addi %i, %15 : index
// CHECK-NEXT:     %17 = arith.index_cast %16 : index to i64
// CHECK:          %[[SCALE:.*]] = arith.constant 0.899902344 : f32
// CHECK-NEXT:     %[[DROP:.*]] = arith.divf %{{.*}}, %[[SCALE]] : f32
// CHECK-NEXT:     %[[D:.*]] = arith.truncf %[[DROP]] : f32 to f16
// CHECK-NEXT:     %[[W:.*]] = memref.load %w[%i] : memref<16xf16>
// CHECK-NEXT:     %[[WF:.*]] = arith.extf %[[W]] : f16 to f32
// CHECK-NEXT:     %[[DF:.*]] = arith.extf %[[D]] : f16 to f32
// CHECK-NEXT:     %[[SUB:.*]] = arith.subf %[[WF]], %[[DF]] : f32
// CHECK-NEXT:     %[[N:.*]] = arith.truncf %[[SUB]] : f32 to f16
// CHECK-NEXT:     memref.store %[[D]], %result0[%i] : memref<16xf16>
// CHECK-NEXT:     memref.store %[[N]], %w_1[%i] : memref<16xf16>
// CHECK-NEXT:   }

// Inside chunk 1 of 2 along dim 0 of the [4, 8] product, the dropout's global
// row is i / 8 + 2: its global index i + 16 (chunk 0's is i).
// CHECK:      gpu.func @overlap_dropout_0(
// CHECK:          %5 = memref.load %p[%i] : memref<16xf32>
// CHECK-NEXT:     %6 = arith.index_cast %i : index to i64
// CHECK:      gpu.func @overlap_dropout_1(%n: index, %seed: i64, %p: memref<16xf32>, %d: memref<16xf32>) kernel {
// CHECK:          %5 = memref.load %p[%i] : memref<16xf32>
// CHECK-NEXT:     %6 = arith.constant 16 : index
// CHECK-NEXT:     %7 = arith.addi %i, %6 : index
// CHECK-NEXT:     %8 = arith.index_cast %7 : index to i64

// The elementwise fusion writes its first output into the out-parameter and
// its second into %w in place (it reads %w at the index it writes).
// CHECK-LABEL: func.func @chain(%x: memref<2x8xf16>, %b: memref<8xf16>, %w: memref<2x8xf16>, %result0: memref<2x8xf16>)
// CHECK-NEXT:    %rank = coco_gpu.rank
// CHECK:         gpu.launch_func  @kernels::@chain_chain_0 blocks in {{.*}}  args({{(.*, )?}}%c16 : {{[^,]*}}, %rank : {{[^,]*}}, %c3_i64 : i64, %x_flat : {{[^,]*}}, %b : {{[^,]*}}, %w_flat : {{[^,]*}}, %result0_flat : {{[^,]*}}, %w_flat : {{[^,]*}})
// CHECK-NEXT:    func.return

// The fused all-reduce is ONE kernel (lowering/fused_collectives.py, tested
// in fusion-collectives.mlir); it reads %w and writes the gathered %w in place.
// CHECK-LABEL: func.func @fused_all_reduce(%g: memref<16xf32>, %lr: memref<f32>, %w: memref<16xf32>)
// CHECK-NOT:     coco_gpu.nccl
// CHECK:         %epoch = coco_gpu.next_epoch
// CHECK:         @kernels::@fused_all_reduce_sgd_0
// CHECK-NEXT:    func.return

// The overlap runs its 2 chunks on two streams (overlap.mlir has the other
// shapes): chunks along dim 0 are contiguous, so each is a coco_gpu.view of
// the full buffer (no copy); the gemm and dropout on stream 0, then an event
// that stream 1 waits for before the all_reduce, which writes the output's
// chunk in place.
// CHECK-LABEL: func.func @overlap(%x: memref<4x8xf32>, %m: memref<8x8xf32>, %result0: memref<4x8xf32>)
// CHECK:         %overlap_start = coco_gpu.record_event
// CHECK-NEXT:    coco_gpu.wait_event %overlap_start {coco_gpu.stream = 1 : i64}
// CHECK-NEXT:    %xc_chunk = coco_gpu.view %x[0] : memref<4x8xf32> to memref<2x8xf32>
// CHECK-NEXT:    %result0_chunk = coco_gpu.view %result0[0] : memref<4x8xf32> to memref<2x8xf32>
// CHECK-NEXT:    %p = memref.alloc() : memref<2x8xf32>
// CHECK-NEXT:    %p_flat = memref.collapse_shape %p
// CHECK-NEXT:    coco_gpu.gemm %xc_chunk, %m, %p : memref<2x8xf32>, memref<8x8xf32>, memref<2x8xf32>{{$}}
// CHECK:         gpu.launch_func  @kernels::@overlap_dropout_0 blocks in
// CHECK-NEXT:    %chunk_ready = coco_gpu.record_event{{$}}
// CHECK-NEXT:    coco_gpu.wait_event %chunk_ready {coco_gpu.stream = 1 : i64}
// CHECK-NEXT:    coco_gpu.nccl_all_reduce %d, %result0_chunk reduction = sum {coco_gpu.stream = 1 : i64}
// CHECK-NEXT:    %xc_chunk_1 = coco_gpu.view %x[16] : memref<4x8xf32> to memref<2x8xf32>
// CHECK-NEXT:    %result0_chunk_1 = coco_gpu.view %result0[16] : memref<4x8xf32> to memref<2x8xf32>
// CHECK:         coco_gpu.gemm %xc_chunk_1, %m, %p_1 : {{.*}}>{{$}}
// CHECK:         gpu.launch_func  @kernels::@overlap_dropout_1 blocks in
// CHECK-NEXT:    %chunk_ready_1 = coco_gpu.record_event{{$}}
// CHECK-NEXT:    coco_gpu.wait_event %chunk_ready_1 {coco_gpu.stream = 1 : i64}
// CHECK-NEXT:    coco_gpu.nccl_all_reduce %d_1, %result0_chunk_1 reduction = sum {coco_gpu.stream = 1 : i64}
// CHECK-NEXT:    %overlap_done = coco_gpu.record_event {coco_gpu.stream = 1 : i64}
// CHECK-NEXT:    coco_gpu.wait_event %overlap_done{{$}}
// CHECK-NEXT:    memref.dealloc %p

// A replicated dropout inside a sliced fusion: the bias element i % 4 + rank * 4
// has global index i % 4 + rank * 4 too.
// CHECK-LABEL: func.func @replicated_dropout(
// CHECK:         gpu.launch_func  @kernels::@replicated_dropout_fusion_0 blocks in {{.*}}  args({{(.*, )?}}%c16 : {{[^,]*}}, %rank : {{[^,]*}}, %c11_i64 : i64, %x_flat : {{[^,]*}}, %b : {{[^,]*}}, %result0_flat : {{[^,]*}})


module attributes {coco.world_size = 2 : i64} {
  func.func @chain(%x: !coco.tensor<4x8xf16, sliced<0>>, %b: !coco.tensor<8xf16, replicated>, %w: !coco.tensor<4x8xf16, sliced<0>>) -> !coco.tensor<4x8xf16, sliced<0>> {
    %y, %z = coco.fusion (%x, %b, %w) {name = "chain"} : (!coco.tensor<4x8xf16, sliced<0>>, !coco.tensor<8xf16, replicated>, !coco.tensor<4x8xf16, sliced<0>>) -> (!coco.tensor<4x8xf16, sliced<0>>, !coco.tensor<4x8xf16, sliced<0>>) {
    ^bb0(%x1: !coco.tensor<4x8xf16, sliced<0>>, %b1: !coco.tensor<8xf16, replicated>, %w1: !coco.tensor<4x8xf16, sliced<0>>):
      %s = coco.add %x1, %b1 : (!coco.tensor<4x8xf16, sliced<0>>, !coco.tensor<8xf16, replicated>) -> !coco.tensor<4x8xf16, sliced<0>>
      %d = coco.dropout %s p = 1.000000e-01 seed = 3 : (!coco.tensor<4x8xf16, sliced<0>>) -> !coco.tensor<4x8xf16, sliced<0>>
      %n = coco.sub %w1, %d : (!coco.tensor<4x8xf16, sliced<0>>, !coco.tensor<4x8xf16, sliced<0>>) -> !coco.tensor<4x8xf16, sliced<0>>
      coco.yield %d, %n : !coco.tensor<4x8xf16, sliced<0>>, !coco.tensor<4x8xf16, sliced<0>>
    }
    coco.update %w, %z : !coco.tensor<4x8xf16, sliced<0>>
    func.return %y : !coco.tensor<4x8xf16, sliced<0>>
  }
  func.func @fused_all_reduce(%g: !coco.tensor<16xf32, local>, %lr: !coco.tensor<f32, replicated>, %w: !coco.tensor<16xf32, replicated>) {
    %w2 = coco.fusion (%g, %lr, %w) {name = "sgd"} : (!coco.tensor<16xf32, local>, !coco.tensor<f32, replicated>, !coco.tensor<16xf32, replicated>) -> !coco.tensor<16xf32, replicated> {
    ^bb0(%g1: !coco.tensor<16xf32, local>, %lr1: !coco.tensor<f32, replicated>, %w1: !coco.tensor<16xf32, replicated>):
      %s = coco.reduce_scatter %g1 reduction = sum dim = 0 : !coco.tensor<16xf32, local> -> !coco.tensor<16xf32, sliced<0>>
      %step = coco.mul %lr1, %s : (!coco.tensor<f32, replicated>, !coco.tensor<16xf32, sliced<0>>) -> !coco.tensor<16xf32, sliced<0>>
      %ws = coco.all_slice %w1 dim = 0 : (!coco.tensor<16xf32, replicated>) -> !coco.tensor<16xf32, sliced<0>>
      %new = coco.sub %ws, %step : (!coco.tensor<16xf32, sliced<0>>, !coco.tensor<16xf32, sliced<0>>) -> !coco.tensor<16xf32, sliced<0>>
      %all = coco.all_gather %new : !coco.tensor<16xf32, sliced<0>> -> !coco.tensor<16xf32, replicated>
      coco.yield %all : !coco.tensor<16xf32, replicated>
    }
    coco.update %w, %w2 : !coco.tensor<16xf32, replicated>
    func.return
  }
  func.func @overlap(%x: !coco.tensor<4x8xf32, replicated>, %m: !coco.tensor<8x8xf32, replicated>) -> !coco.tensor<4x8xf32, replicated> {
    %o = coco.overlap chunks = 2 (%x, %m) dims = [0, -1] -> [0] {name = "mm"} : (!coco.tensor<4x8xf32, replicated>, !coco.tensor<8x8xf32, replicated>) -> !coco.tensor<4x8xf32, replicated> {
    ^bb0(%xc: !coco.tensor<2x8xf32, replicated>, %m1: !coco.tensor<8x8xf32, replicated>):
      %p = coco.matmul %xc, %m1 : (!coco.tensor<2x8xf32, replicated>, !coco.tensor<8x8xf32, replicated>) -> !coco.tensor<2x8xf32, replicated>
      %d = coco.dropout %p p = 5.000000e-01 seed = 1 : (!coco.tensor<2x8xf32, replicated>) -> !coco.tensor<2x8xf32, replicated>
      %r = coco.all_reduce %d reduction = sum : !coco.tensor<2x8xf32, replicated> -> !coco.tensor<2x8xf32, replicated>
      coco.yield %r : !coco.tensor<2x8xf32, replicated>
    }
    func.return %o : !coco.tensor<4x8xf32, replicated>
  }
  func.func @replicated_dropout(%x: !coco.tensor<4x8xf32, sliced<1>>, %b: !coco.tensor<8xf32, replicated>) -> !coco.tensor<4x8xf32, sliced<1>> {
    %y = coco.fusion (%x, %b) : (!coco.tensor<4x8xf32, sliced<1>>, !coco.tensor<8xf32, replicated>) -> !coco.tensor<4x8xf32, sliced<1>> {
    ^bb0(%x1: !coco.tensor<4x8xf32, sliced<1>>, %b1: !coco.tensor<8xf32, replicated>):
      %d = coco.dropout %b1 p = 5.000000e-01 seed = 11 : (!coco.tensor<8xf32, replicated>) -> !coco.tensor<8xf32, replicated>
      %s = coco.add %x1, %d : (!coco.tensor<4x8xf32, sliced<1>>, !coco.tensor<8xf32, replicated>) -> !coco.tensor<4x8xf32, sliced<1>>
      coco.yield %s : !coco.tensor<4x8xf32, sliced<1>>
    }
    func.return %y : !coco.tensor<4x8xf32, sliced<1>>
  }
}
