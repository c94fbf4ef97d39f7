// RUN: coconet-opt %s -p convert-coco-to-gpu | filecheck %s
// coco.overlap on two streams (docs/gpu/overlap.md, "Chunked overlap"): stream 0 computes
// (gemm), stream 1 communicates (NCCL or the fused kernel) and runs the
// consumer chain; an event pair at the start (0 -> 1), one per hand-over of a
// chunk value between the streams (recorded right after its producer, waited
// right before its reader), and the join (1 -> 0) after the last chunk.

// all_gather -> matmul: the roles swap. Chunk c's input copy (dim 1 is not
// contiguous: a <label>_chunk kernel, on the stream of its reader) and gather
// run on stream 1; stream 0 waits for the gather, multiplies and copies the
// chunk out, so gather c+1 overlaps matmul c.
// CHECK-LABEL: func.func @gather_mm(
// CHECK:         %overlap_start = coco_gpu.record_event{{$}}
// CHECK-NEXT:    coco_gpu.wait_event %overlap_start {coco_gpu.stream = 1 : i64}
// CHECK:         %xc_chunk = memref.alloc() {coco_gpu.stream = 1 : i64} : memref<2x2x8xf32>
// CHECK:         gpu.launch_func  @kernels::@gather_mm_ag_chunk_0 blocks in {{.*}} {coco_gpu.stream = 1 : i64}
// CHECK-NEXT:    %full = memref.alloc() {coco_gpu.stream = 1 : i64} : memref<4x2x8xf32>
// CHECK-NEXT:    coco_gpu.nccl_all_gather %xc_chunk, %full {coco_gpu.stream = 1 : i64}
// CHECK-NEXT:    %chunk_ready = coco_gpu.record_event {coco_gpu.stream = 1 : i64}
// CHECK-NEXT:    coco_gpu.wait_event %chunk_ready{{$}}
// CHECK-NEXT:    %p = memref.alloc() : memref<4x2x8xf32>
// CHECK-NEXT:    coco_gpu.gemm %full, %w, %p : {{.*}}>{{$}}
// CHECK:         gpu.launch_func  @kernels::@gather_mm_ag_unchunk_0 blocks in {{.*}}%result0_flat : memref<{{[^>]*}}>){{$}}
// CHECK:         gpu.launch_func  @kernels::@gather_mm_ag_chunk_0 blocks in {{.*}} {coco_gpu.stream = 1 : i64}
// CHECK:         coco_gpu.nccl_all_gather %xc_chunk_1, %full_1 {coco_gpu.stream = 1 : i64}
// CHECK-NEXT:    %chunk_ready_1 = coco_gpu.record_event {coco_gpu.stream = 1 : i64}
// CHECK-NEXT:    coco_gpu.wait_event %chunk_ready_1{{$}}
// CHECK:         coco_gpu.gemm %full_1, %w, %p_1 : {{.*}}>{{$}}
// CHECK:         gpu.launch_func  @kernels::@gather_mm_ag_unchunk_0 blocks in {{.*}}%result0_flat : memref<{{[^>]*}}>){{$}}
// CHECK-NEXT:    %overlap_done = coco_gpu.record_event {coco_gpu.stream = 1 : i64}
// CHECK-NEXT:    coco_gpu.wait_event %overlap_done{{$}}
// CHECK-NEXT:    memref.dealloc
// CHECK-NOT:     coco_gpu.stream
// CHECK:         func.return

// matmul -> fusion(reduce_scatter, compute, all_gather): the gemm on stream
// 0, the fused kernel (no NCCL) on stream 1. Chunks along dim 0 are
// contiguous: the inputs' chunks are coco_gpu.view's (no copy kernel) and the
// fused kernel writes the output's chunk in place (no unchunk copy).
// CHECK-LABEL: func.func @mm_fused(
// CHECK:         %overlap_start = coco_gpu.record_event{{$}}
// CHECK-NEXT:    coco_gpu.wait_event %overlap_start {coco_gpu.stream = 1 : i64}
// CHECK-NEXT:    %xc_chunk = coco_gpu.view %x[0] : memref<4x4xf32> to memref<2x4xf32>
// CHECK-NEXT:    %rc_chunk = coco_gpu.view %r[0] : memref<4x8xf32> to memref<2x8xf32>
// CHECK-NEXT:    %rc_chunk_flat = memref.collapse_shape %rc_chunk
// CHECK-NEXT:    %result0_chunk = coco_gpu.view %result0[0] : memref<4x8xf32> to memref<2x8xf32>
// CHECK-NEXT:    %result0_chunk_flat = memref.collapse_shape %result0_chunk
// CHECK-NEXT:    %p = memref.alloc() : memref<2x8xf32>
// CHECK-NEXT:    %p_flat = memref.collapse_shape %p
// CHECK-NEXT:    coco_gpu.gemm %xc_chunk, %w, %p : {{.*}}>{{$}}
// CHECK-NEXT:    %chunk_ready = coco_gpu.record_event{{$}}
// CHECK-NEXT:    coco_gpu.wait_event %chunk_ready {coco_gpu.stream = 1 : i64}
// CHECK-NOT:     coco_gpu.nccl
// CHECK:         gpu.launch_func  @kernels::@mm_fused_ar_{{[01]}} {{.*}}%p_flat : memref<16xf32>, {{.*}}%rc_chunk_flat : memref<16xf32>, {{.*}}%result0_chunk_flat : memref<16xf32>) {coco_gpu.peer_bytes = 64 : i64, coco_gpu.stream = 1 : i64}
// CHECK-NEXT:    %xc_chunk_1 = coco_gpu.view %x[8] : memref<4x4xf32> to memref<2x4xf32>
// CHECK-NEXT:    %rc_chunk_1 = coco_gpu.view %r[16] : memref<4x8xf32> to memref<2x8xf32>
// CHECK-NEXT:    %rc_chunk_flat_1 = memref.collapse_shape %rc_chunk_1
// CHECK-NEXT:    %result0_chunk_1 = coco_gpu.view %result0[16] : memref<4x8xf32> to memref<2x8xf32>
// CHECK:         coco_gpu.gemm %xc_chunk_1, %w, %p_1 : {{.*}}>{{$}}
// CHECK-NEXT:    %chunk_ready_1 = coco_gpu.record_event{{$}}
// CHECK-NEXT:    coco_gpu.wait_event %chunk_ready_1 {coco_gpu.stream = 1 : i64}
// CHECK-NOT:     coco_gpu.nccl
// CHECK:         gpu.launch_func  @kernels::@mm_fused_ar_{{[01]}} {{.*}}%p_flat_1 : memref<16xf32>, {{.*}}%result0_chunk_flat_1 : memref<16xf32>) {coco_gpu.peer_bytes = 64 : i64, coco_gpu.stream = 1 : i64}
// CHECK-NEXT:    %overlap_done = coco_gpu.record_event {coco_gpu.stream = 1 : i64}
// CHECK-NEXT:    coco_gpu.wait_event %overlap_done{{$}}

// Nothing communicates: one stream, no event.
// CHECK-LABEL: func.func @compute_only(
// CHECK-NOT:     coco_gpu.stream
// CHECK-NOT:     coco_gpu.record_event
// CHECK:         func.return

module attributes {coco.world_size = 2 : i64} {
  func.func @gather_mm(%x: !coco.tensor<4x4x8xf32, sliced<0>>, %w: !coco.tensor<8x8xf32, replicated>) -> !coco.tensor<4x4x8xf32, replicated> {
    %y = coco.overlap chunks = 2 (%x, %w) dims = [1, -1] -> [1] {name = "ag"} : (!coco.tensor<4x4x8xf32, sliced<0>>, !coco.tensor<8x8xf32, replicated>) -> !coco.tensor<4x4x8xf32, replicated> {
    ^bb0(%xc: !coco.tensor<4x2x8xf32, sliced<0>>, %w1: !coco.tensor<8x8xf32, replicated>):
      %full = coco.all_gather %xc : !coco.tensor<4x2x8xf32, sliced<0>> -> !coco.tensor<4x2x8xf32, replicated>
      %p = coco.matmul %full, %w1 : (!coco.tensor<4x2x8xf32, replicated>, !coco.tensor<8x8xf32, replicated>) -> !coco.tensor<4x2x8xf32, replicated>
      coco.yield %p : !coco.tensor<4x2x8xf32, replicated>
    }
    func.return %y : !coco.tensor<4x4x8xf32, replicated>
  }
  func.func @mm_fused(%x: !coco.tensor<4x8xf32, sliced<1>>, %w: !coco.tensor<8x8xf32, sliced<0>>, %r: !coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xf32, replicated> {
    %o = coco.overlap chunks = 2 (%x, %w, %r) dims = [0, -1, 0] -> [0] {name = "mf"} : (!coco.tensor<4x8xf32, sliced<1>>, !coco.tensor<8x8xf32, sliced<0>>, !coco.tensor<4x8xf32, replicated>) -> !coco.tensor<4x8xf32, replicated> {
    ^bb0(%xc: !coco.tensor<2x8xf32, sliced<1>>, %w1: !coco.tensor<8x8xf32, sliced<0>>, %rc: !coco.tensor<2x8xf32, replicated>):
      %p = coco.matmul %xc, %w1 : (!coco.tensor<2x8xf32, sliced<1>>, !coco.tensor<8x8xf32, sliced<0>>) -> !coco.tensor<2x8xf32, local>
      %f = coco.fusion (%p, %rc) {name = "ar"} : (!coco.tensor<2x8xf32, local>, !coco.tensor<2x8xf32, replicated>) -> !coco.tensor<2x8xf32, replicated> {
      ^bb0(%p1: !coco.tensor<2x8xf32, local>, %r1: !coco.tensor<2x8xf32, replicated>):
        %s = coco.reduce_scatter %p1 reduction = sum dim = 1 : !coco.tensor<2x8xf32, local> -> !coco.tensor<2x8xf32, sliced<1>>
        %rs = coco.all_slice %r1 dim = 1 : (!coco.tensor<2x8xf32, replicated>) -> !coco.tensor<2x8xf32, sliced<1>>
        %a = coco.add %s, %rs : (!coco.tensor<2x8xf32, sliced<1>>, !coco.tensor<2x8xf32, sliced<1>>) -> !coco.tensor<2x8xf32, sliced<1>>
        %g = coco.all_gather %a : !coco.tensor<2x8xf32, sliced<1>> -> !coco.tensor<2x8xf32, replicated>
        coco.yield %g : !coco.tensor<2x8xf32, replicated>
      }
      coco.yield %f : !coco.tensor<2x8xf32, replicated>
    }
    func.return %o : !coco.tensor<4x8xf32, replicated>
  }
  func.func @compute_only(%x: !coco.tensor<4x8xf32, replicated>, %m: !coco.tensor<8x8xf32, replicated>) -> !coco.tensor<4x8xf32, replicated> {
    %o = coco.overlap chunks = 2 (%x, %m) dims = [0, -1] -> [0] {name = "mm"} : (!coco.tensor<4x8xf32, replicated>, !coco.tensor<8x8xf32, replicated>) -> !coco.tensor<4x8xf32, replicated> {
    ^bb0(%xc: !coco.tensor<2x8xf32, replicated>, %m1: !coco.tensor<8x8xf32, replicated>):
      %p = coco.matmul %xc, %m1 : (!coco.tensor<2x8xf32, replicated>, !coco.tensor<8x8xf32, replicated>) -> !coco.tensor<2x8xf32, replicated>
      %q = coco.relu %p : (!coco.tensor<2x8xf32, replicated>) -> !coco.tensor<2x8xf32, replicated>
      coco.yield %q : !coco.tensor<2x8xf32, replicated>
    }
    func.return %o : !coco.tensor<4x8xf32, replicated>
  }
}
