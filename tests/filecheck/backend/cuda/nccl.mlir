// RUN: coconet-opt %s -t cuda | filecheck %s
// NCCL collectives on the stage's communicator (element counts, NCCL types,
// streams), all-to-all as grouped send/recv, and a two-stage pipeline's
// send/recv on the communicator spanning the stages (stage indices).

builtin.module attributes {coco.world_size = 4 : i64} {
  func.func @collectives(%x: memref<64xf32>, %h: memref<64xf16>, %out: memref<64xf32>, %part: memref<16xf32>, %all: memref<256xbf16>, %b: memref<64xbf16>) {
    coco_gpu.nccl_all_reduce %x, %out reduction = sum : memref<64xf32>, memref<64xf32>
    coco_gpu.nccl_reduce_scatter %x, %part reduction = max {coco_gpu.stream = 2 : i64} : memref<64xf32>, memref<16xf32>
    coco_gpu.nccl_all_gather %b, %all : memref<64xbf16>, memref<256xbf16>
    coco_gpu.nccl_broadcast %h, %h root = 1 : memref<64xf16>, memref<64xf16>
    coco_gpu.nccl_all_to_all %x, %out : memref<64xf32>, memref<64xf32>
    func.return
  }
  func.func @stage1(%y: memref<8x64xf32>) {
    coco_gpu.nccl_send %y to @stage2 channel = 0 : memref<8x64xf32>
    func.return
  }
  func.func @stage2(%z: memref<8x64xf32>) {
    coco_gpu.nccl_recv %z from @stage1 channel = 0 : memref<8x64xf32>
    func.return
  }
}

// CHECK-LABEL: extern "C" int coco_stage_of_collectives(void) { return 0; }
// CHECK-NEXT:  extern "C" int coco_collectives(coco_context *ctx, float *x, __half *h, float *out, float *part, __nv_bfloat16 *all, __nv_bfloat16 *b) {
// CHECK-NEXT:    COCO_CHECK_NCCL(ncclAllReduce(x, out, 64, ncclFloat, ncclSum, ctx->comm, ctx->streams[0]));
// CHECK-NEXT:    COCO_CHECK_NCCL(ncclReduceScatter(x, part, 16, ncclFloat, ncclMax, ctx->comm, ctx->streams[2]));
// CHECK-NEXT:    COCO_CHECK_NCCL(ncclAllGather(b, all, 64, ncclBfloat16, ctx->comm, ctx->streams[0]));
// CHECK-NEXT:    COCO_CHECK_NCCL(ncclBroadcast(h, h, 64, ncclHalf, 1, ctx->comm, ctx->streams[0]));
// CHECK-NEXT:    const size_t block = 64 / (size_t)ctx->world;
// CHECK-NEXT:    COCO_CHECK_NCCL(ncclGroupStart());
// CHECK-NEXT:    for (int peer = 0; peer < ctx->world; ++peer) {
// CHECK-NEXT:      COCO_CHECK_NCCL(ncclSend(x + peer * block, block, ncclFloat, peer, ctx->comm, ctx->streams[0]));
// CHECK-NEXT:      COCO_CHECK_NCCL(ncclRecv(out + peer * block, block, ncclFloat, peer, ctx->comm, ctx->streams[0]));
// CHECK-NEXT:    }
// CHECK-NEXT:    COCO_CHECK_NCCL(ncclGroupEnd());
// CHECK-NEXT:    return 0;
// CHECK-LABEL: extern "C" int coco_stage_of_stage1(void) { return 0; }
// CHECK-NEXT:  extern "C" int coco_stage1(coco_context *ctx, float *y) {
// CHECK-NEXT:    COCO_CHECK_NCCL(ncclSend(y, 512, ncclFloat, 1 * ctx->world + ctx->rank, ctx->pipeline_comm, ctx->streams[0]));
// CHECK-LABEL: extern "C" int coco_stage_of_stage2(void) { return 1; }
// CHECK-NEXT:  extern "C" int coco_stage2(coco_context *ctx, float *z) {
// CHECK-NEXT:    COCO_CHECK_NCCL(ncclRecv(z, 512, ncclFloat, 0 * ctx->world + ctx->rank, ctx->pipeline_comm, ctx->streams[0]));
