// RUN: coconet-opt %s -p 'convert-coco-to-gpu{world=4}' | filecheck %s
// coco.per_peer and coco.shift (docs/gpu/overlap.md, "Per-peer overlap"): N steps
// unrolled on the host, rank r on chunk (r + s) mod 4 at step s (computed
// from coco_gpu.rank); each block moved by a transfer: the receiver credits
// its sender (signal kernel), the sender waits for the credit, peer-copies
// into the receiver's symmetric double buffer and signals arrival, the
// receiver waits for it right before reading.

// A gathered input: step 0 multiplies the rank's own block into chunk
// `rank` of the output (no communication); steps 1 and 2 are credited at the
// start, step 3 after step 1's gemm read its buffer. Stream 1 pushes this
// rank's block to rank r - s into buffer s mod 2.
// CHECK-LABEL: func.func @gather(
// The function's shared host values first: (rank + k) mod 4, the peer a
// transfer goes to and the chunk of step k alike, and each chunk's start.
// CHECK:         %rank_plus1 = arith.remui %rank_plus1_unwrapped, %c4 : index
// CHECK:         %chunk_start = arith.muli %rank, %c8 : index
// CHECK:         %chunk_start_1 = arith.muli %rank_plus1, %c8 : index
// CHECK:         %block0 = coco_gpu.symmetric_buffer offset = 0 : memref<2x16xf32>
// CHECK-NEXT:    %block1 = coco_gpu.symmetric_buffer offset = 256 : memref<2x16xf32>
// CHECK-NEXT:    %per_peer_start = coco_gpu.record_event{{$}}
// CHECK-NEXT:    coco_gpu.wait_event %per_peer_start {coco_gpu.stream = 1 : i64}
// CHECK-NEXT:    gpu.launch_func  @kernels::@gather_signal_0 {{.*}}args(%peers : !coco_gpu.peers, %rank_plus1 : index, %c2 : index, %epoch : i64){{$}}
// CHECK-NEXT:    gpu.launch_func  @kernels::@gather_signal_0 {{.*}}args(%peers : !coco_gpu.peers, %rank_plus2 : index, %c4 : index, %epoch : i64){{$}}
// CHECK-NEXT:    %g = coco_gpu.view %result0[%chunk_start + 0] : memref<8x4xf32> to memref<2x4xf32>
// CHECK-NEXT:    coco_gpu.gemm %x, %w, %g :
// CHECK-NEXT:    gpu.launch_func  @kernels::@gather_wait_0 {{.*}}args(%peers : !coco_gpu.peers, %c2 : index, %epoch : i64) {coco_gpu.stream = 1 : i64}
// CHECK-NEXT:    coco_gpu.peer_copy %x to rank + 3, %block1 {coco_gpu.stream = 1 : i64} : memref<2x16xf32>, memref<2x16xf32>
// CHECK-NEXT:    gpu.launch_func  @kernels::@gather_signal_0 {{.*}} {coco_gpu.stream = 1 : i64}
// CHECK-NEXT:    gpu.launch_func  @kernels::@gather_wait_0 {{.*}}args(%peers : !coco_gpu.peers, %c3 : index, %epoch : i64){{$}}
// CHECK-NEXT:    %g_1 = coco_gpu.view %result0[%chunk_start_1 + 0]
// CHECK-NEXT:    coco_gpu.gemm %block1, %w, %g_1 :
// CHECK-NEXT:    gpu.launch_func  @kernels::@gather_signal_0 {{.*}}args(%peers : !coco_gpu.peers, %rank_plus3 : index, %c6 : index, %epoch : i64){{$}}
// CHECK:         coco_gpu.peer_copy %x to rank + 2, %block0 {coco_gpu.stream = 1 : i64}
// CHECK:         coco_gpu.gemm %block0, %w, %g_2 :
// CHECK:         coco_gpu.peer_copy %x to rank + 1, %block1 {coco_gpu.stream = 1 : i64}
// CHECK:         coco_gpu.gemm %block1, %w, %g_3 :
// CHECK-NEXT:    %per_peer_done = coco_gpu.record_event {coco_gpu.stream = 1 : i64}
// CHECK-NEXT:    coco_gpu.wait_event %per_peer_done{{$}}
// CHECK-NEXT:    func.return
func.func @gather(%x: !coco.tensor<8x16xf32, sliced<0>>, %w: !coco.tensor<16x16xf32, sliced<1>>) -> !coco.tensor<8x16xf32, sliced<1>> {
  %g = coco.per_peer (%x, %w) dims = [0, -1] -> [0] : (!coco.tensor<8x16xf32, sliced<0>>, !coco.tensor<16x16xf32, sliced<1>>) -> !coco.tensor<8x16xf32, sliced<1>> {
  ^bb0(%xs: !coco.tensor<8x16xf32, replicated>, %ws: !coco.tensor<16x16xf32, sliced<1>>):
    %m = coco.matmul %xs, %ws : (!coco.tensor<8x16xf32, replicated>, !coco.tensor<16x16xf32, sliced<1>>) -> !coco.tensor<8x16xf32, sliced<1>>
    coco.yield %m : !coco.tensor<8x16xf32, sliced<1>>
  }
  func.return %g : !coco.tensor<8x16xf32, sliced<1>>
}

// A reduce-scattered output in bf16: the own partial (step 0) is widened
// into an f32 accumulator on stream 0 and handed to stream 2; step s's
// partial (local double buffer s mod 2) is pushed to rank r + s, the one of
// rank r - s waited for and added in f32; the accumulator is rounded into
// the output once, at the end.
// CHECK-LABEL: func.func @scatter(
// Each buffer a kernel takes has one flat view, right after it.
// CHECK:         %partial0 = memref.alloc() : memref<2x8xbf16>
// CHECK-NEXT:    %partial0_flat = memref.collapse_shape %partial0
// CHECK-NEXT:    %partial1 = memref.alloc() : memref<2x8xbf16>
// CHECK-NEXT:    %received0 = coco_gpu.symmetric_buffer offset = 512 : memref<2x8xbf16>
// CHECK-NEXT:    %received0_flat = memref.collapse_shape %received0
// CHECK-NEXT:    %received1 = coco_gpu.symmetric_buffer offset = 768 : memref<2x8xbf16>
// CHECK-NEXT:    %received1_flat = memref.collapse_shape %received1
// CHECK-NEXT:    %accumulator = memref.alloc() : memref<2x8xf32>
// CHECK-NEXT:    %accumulator_flat = memref.collapse_shape %accumulator
// CHECK-NEXT:    %per_peer_start = coco_gpu.record_event{{$}}
// CHECK-NEXT:    coco_gpu.wait_event %per_peer_start {coco_gpu.stream = 2 : i64}
// CHECK:         coco_gpu.gemm %as_chunk, %b, %partial0_step :
// CHECK:         gpu.launch_func  @kernels::@scatter_p_widen_0 {{.*}}(%c16 : index, %partial0_flat : memref<16xbf16>, %accumulator_flat : memref<16xf32>){{$}}
// CHECK-NEXT:    %own_partial = coco_gpu.record_event{{$}}
// CHECK-NEXT:    coco_gpu.wait_event %own_partial {coco_gpu.stream = 2 : i64}
// CHECK:         coco_gpu.gemm %as_chunk_1, %b, %partial1_step :
// CHECK-NEXT:    %partial_ready = coco_gpu.record_event{{$}}
// CHECK-NEXT:    coco_gpu.wait_event %partial_ready {coco_gpu.stream = 2 : i64}
// CHECK:         gpu.launch_func  @kernels::@scatter_wait_0 {{.*}} {coco_gpu.stream = 2 : i64}
// CHECK-NEXT:    coco_gpu.peer_copy %partial1 to rank + 1, %received1 {coco_gpu.stream = 2 : i64}
// CHECK:         gpu.launch_func  @kernels::@scatter_signal_0 {{.*}} {coco_gpu.stream = 2 : i64}
// CHECK-NEXT:    %partial_sent = coco_gpu.record_event {coco_gpu.stream = 2 : i64}
// CHECK:         gpu.launch_func  @kernels::@scatter_wait_0 {{.*}} {coco_gpu.stream = 2 : i64}
// CHECK:         gpu.launch_func  @kernels::@scatter_p_accumulate_0 {{.*}}(%c16 : index, %accumulator_flat : memref<16xf32>, %received1_flat : memref<16xbf16>, %accumulator_flat : memref<16xf32>) {coco_gpu.stream = 2 : i64}
// CHECK:         coco_gpu.peer_copy %partial0 to rank + 2, %received0 {coco_gpu.stream = 2 : i64}
// The partial of step 3 reuses buffer 1: stream 0 waits until step 1's was sent.
// CHECK:         coco_gpu.wait_event %partial_sent{{$}}
// CHECK:         coco_gpu.gemm %as_chunk_3, %b, %partial1_step_1 :
// CHECK:         coco_gpu.peer_copy %partial1 to rank + 3, %received1 {coco_gpu.stream = 2 : i64}
// CHECK:         gpu.launch_func  @kernels::@scatter_p_round_0 {{.*}}(%c16 : index, %accumulator_flat : memref<16xf32>, %result0_flat : memref<16xbf16>) {coco_gpu.stream = 2 : i64}
// CHECK-NEXT:    %per_peer_done = coco_gpu.record_event {coco_gpu.stream = 2 : i64}
// CHECK-NEXT:    coco_gpu.wait_event %per_peer_done{{$}}
func.func @scatter(%a: !coco.tensor<8x16xbf16, sliced<1>>, %b: !coco.tensor<16x8xbf16, sliced<0>>) -> !coco.tensor<8x8xbf16, sliced<0>> {
  %c = coco.per_peer (%a, %b) dims = [0, -1] -> [0] {name = "p"} : (!coco.tensor<8x16xbf16, sliced<1>>, !coco.tensor<16x8xbf16, sliced<0>>) -> !coco.tensor<8x8xbf16, sliced<0>> {
  ^bb0(%as: !coco.tensor<8x16xbf16, sliced<1>>, %bs: !coco.tensor<16x8xbf16, sliced<0>>):
    %p = coco.matmul %as, %bs : (!coco.tensor<8x16xbf16, sliced<1>>, !coco.tensor<16x8xbf16, sliced<0>>) -> !coco.tensor<8x8xbf16, local>
    coco.yield %p : !coco.tensor<8x8xbf16, local>
  }
  func.return %c : !coco.tensor<8x8xbf16, sliced<0>>
}

// coco.shift by = 1: one transfer on the op's stream (credit to rank r + 1,
// wait for the own credit, push to rank r - 1 = r + 3, signal its arrival,
// wait for the own arrival), then the received block is copied out.
// CHECK-LABEL: func.func @shift(
// CHECK:         %received = coco_gpu.symmetric_buffer offset = 1024 : memref<2x4xf32>
// CHECK:         gpu.launch_func  @kernels::@shift_signal_0
// CHECK:         gpu.launch_func  @kernels::@shift_wait_0
// CHECK-NEXT:    coco_gpu.peer_copy %a to rank + 3, %received : memref<2x4xf32>, memref<2x4xf32>
// CHECK:         gpu.launch_func  @kernels::@shift_signal_0
// CHECK:         gpu.launch_func  @kernels::@shift_wait_0
// CHECK-NEXT:    "memref.copy"(%received, %result0)
func.func @shift(%a: !coco.tensor<8x4xf32, sliced<0>>) -> !coco.tensor<8x4xf32, sliced<0>> {
  %s = coco.shift %a by = 1 : !coco.tensor<8x4xf32, sliced<0>> -> !coco.tensor<8x4xf32, sliced<0>>
  func.return %s : !coco.tensor<8x4xf32, sliced<0>>
}

// A summed output (a gathered contracted dim, output dim -1): no result is
// communicated. Each step's gemm (the rank's own K block at step 0, then the
// received ones) adds its partial product into the output on stream 0: beta
// = 0 at step 0, `accumulate` (beta = 1) after; w's rows of chunk c are a
// view. The gathered x moves exactly as for the other forms.
// CHECK-LABEL: func.func @summed(
// CHECK-NOT:     memref.alloc
// CHECK:         %ws_chunk = coco_gpu.view %w[%chunk_start + 0] : memref<16x4xf32> to memref<4x4xf32>
// CHECK-NEXT:    coco_gpu.gemm %x, %ws_chunk, %result0 : memref<8x4xf32>, memref<4x4xf32>, memref<8x4xf32>
// CHECK:         coco_gpu.peer_copy %x to rank + 3, %block1 {coco_gpu.stream = 1 : i64}
// CHECK:         gpu.launch_func  @kernels::@summed_wait_0 {{.*}}args(%peers : !coco_gpu.peers, %c{{[0-9]+}} : index, %epoch : i64){{$}}
// CHECK:         coco_gpu.gemm %block1, %ws_chunk_1, %result0 accumulate : memref<8x4xf32>, memref<4x4xf32>, memref<8x4xf32>
// CHECK:         coco_gpu.peer_copy %x to rank + 2, %block0 {coco_gpu.stream = 1 : i64}
// CHECK:         coco_gpu.gemm %block0, %ws_chunk_2, %result0 accumulate :
// CHECK:         coco_gpu.peer_copy %x to rank + 1, %block1 {coco_gpu.stream = 1 : i64}
// CHECK:         coco_gpu.gemm %block1, %ws_chunk_3, %result0 accumulate :
// CHECK-NEXT:    %per_peer_done = coco_gpu.record_event {coco_gpu.stream = 1 : i64}
// CHECK-NEXT:    coco_gpu.wait_event %per_peer_done{{$}}
// CHECK-NEXT:    func.return
func.func @summed(%x: !coco.tensor<8x16xf32, sliced<1>>, %w: !coco.tensor<16x16xf32, sliced<1>>) -> !coco.tensor<8x16xf32, sliced<1>> {
  %c = coco.per_peer (%x, %w) dims = [1, 0] -> [-1] : (!coco.tensor<8x16xf32, sliced<1>>, !coco.tensor<16x16xf32, sliced<1>>) -> !coco.tensor<8x16xf32, sliced<1>> {
  ^bb0(%xs: !coco.tensor<8x16xf32, replicated>, %ws: !coco.tensor<16x16xf32, sliced<1>>):
    %m = coco.matmul %xs, %ws : (!coco.tensor<8x16xf32, replicated>, !coco.tensor<16x16xf32, sliced<1>>) -> !coco.tensor<8x16xf32, sliced<1>>
    coco.yield %m : !coco.tensor<8x16xf32, sliced<1>>
  }
  func.return %c : !coco.tensor<8x16xf32, sliced<1>>
}

// In f16: the gemms write an f32 accumulator from the f16 blocks, rounded
// into the output once at the end.
// CHECK-LABEL: func.func @summed_half(
// CHECK:         %accumulator = memref.alloc() : memref<8x4xf32>
// CHECK:         coco_gpu.gemm %x, %ws_chunk, %accumulator : memref<8x4xf16>, memref<4x4xf16>, memref<8x4xf32>
// CHECK:         coco_gpu.gemm %block1, %ws_chunk_1, %accumulator accumulate : memref<8x4xf16>, memref<4x4xf16>, memref<8x4xf32>
// CHECK:         coco_gpu.gemm %block0, %ws_chunk_2, %accumulator accumulate :
// CHECK:         coco_gpu.gemm %block1, %ws_chunk_3, %accumulator accumulate :
// CHECK:         gpu.launch_func  @kernels::@summed_half_h_round_0 {{.*}}args(%c32 : index, %accumulator_flat : memref<32xf32>, %result0_flat : memref<32xf16>){{$}}
// CHECK-NEXT:    %per_peer_done = coco_gpu.record_event {coco_gpu.stream = 1 : i64}
func.func @summed_half(%x: !coco.tensor<8x16xf16, sliced<1>>, %w: !coco.tensor<16x16xf16, sliced<1>>) -> !coco.tensor<8x16xf16, sliced<1>> {
  %c = coco.per_peer (%x, %w) dims = [1, 0] -> [-1] {name = "h"} : (!coco.tensor<8x16xf16, sliced<1>>, !coco.tensor<16x16xf16, sliced<1>>) -> !coco.tensor<8x16xf16, sliced<1>> {
  ^bb0(%xs: !coco.tensor<8x16xf16, replicated>, %ws: !coco.tensor<16x16xf16, sliced<1>>):
    %m = coco.matmul %xs, %ws : (!coco.tensor<8x16xf16, replicated>, !coco.tensor<16x16xf16, sliced<1>>) -> !coco.tensor<8x16xf16, sliced<1>>
    coco.yield %m : !coco.tensor<8x16xf16, sliced<1>>
  }
  func.return %c : !coco.tensor<8x16xf16, sliced<1>>
}

// A replicated summed output (here the gathered operand on the right, a's
// columns of chunk c copied out): every rank must hold the same bits, but
// rank r adds its chunks from chunk r on. Each step's gemm writes chunk c's
// slot (f32 for bf16), and one kernel sums the slots in chunk order 0..3,
// rounding once.
// CHECK-LABEL: func.func @summed_replicated(
// CHECK:         %slot_start = arith.muli %rank, %c64 : index
// CHECK:         %slot_start_1 = arith.muli %rank_plus1, %c64 : index
// CHECK:         %slots = memref.alloc() : memref<4x8x8xf32>
// CHECK:         gpu.launch_func  @kernels::@summed_replicated_q_chunk_0 {{.*}}args(%c32 : index, %chunk_start : index, %a_flat : memref<128xbf16>, %as_chunk_flat : memref<32xbf16>){{$}}
// CHECK-NEXT:    %chunk_slot = coco_gpu.view %slots[%slot_start + 0] : memref<4x8x8xf32> to memref<8x8xf32>
// CHECK-NEXT:    coco_gpu.gemm %as_chunk, %u, %chunk_slot : memref<8x4xbf16>, memref<4x8xbf16>, memref<8x8xf32>
// CHECK:         %chunk_slot_1 = coco_gpu.view %slots[%slot_start_1 + 0]
// CHECK-NEXT:    coco_gpu.gemm %as_chunk_1, %block1, %chunk_slot_1 : memref<8x4xbf16>, memref<4x8xbf16>, memref<8x8xf32>
// CHECK:         coco_gpu.gemm %as_chunk_2, %block0, %chunk_slot_2 :
// CHECK:         coco_gpu.gemm %as_chunk_3, %block1, %chunk_slot_3 :
// CHECK-NEXT:    %chunk_slot0 = coco_gpu.view %slots[0] : memref<4x8x8xf32> to memref<8x8xf32>
// CHECK-NEXT:    %chunk_slot1 = coco_gpu.view %slots[64]
// CHECK-NEXT:    %chunk_slot2 = coco_gpu.view %slots[128]
// CHECK-NEXT:    %chunk_slot3 = coco_gpu.view %slots[192]
// CHECK:         gpu.launch_func  @kernels::@summed_replicated_q_sum_0 {{.*}}args(%c64 : index, %chunk_slot0_flat : memref<64xf32>, %chunk_slot1_flat : memref<64xf32>, %chunk_slot2_flat : memref<64xf32>, %chunk_slot3_flat : memref<64xf32>, %result0_flat : memref<64xbf16>){{$}}
// CHECK-NEXT:    %per_peer_done = coco_gpu.record_event {coco_gpu.stream = 1 : i64}
// CHECK:         memref.dealloc %slots
func.func @summed_replicated(%a: !coco.tensor<8x16xbf16, replicated>, %u: !coco.tensor<16x8xbf16, sliced<0>>) -> !coco.tensor<8x8xbf16, replicated> {
  %e = coco.per_peer (%u, %a) dims = [0, 1] -> [-1] {name = "q"} : (!coco.tensor<16x8xbf16, sliced<0>>, !coco.tensor<8x16xbf16, replicated>) -> !coco.tensor<8x8xbf16, replicated> {
  ^bb0(%us: !coco.tensor<16x8xbf16, replicated>, %as: !coco.tensor<8x16xbf16, replicated>):
    %m = coco.matmul %as, %us : (!coco.tensor<8x16xbf16, replicated>, !coco.tensor<16x8xbf16, replicated>) -> !coco.tensor<8x8xbf16, replicated>
    coco.yield %m : !coco.tensor<8x8xbf16, replicated>
  }
  func.return %e : !coco.tensor<8x8xbf16, replicated>
}
