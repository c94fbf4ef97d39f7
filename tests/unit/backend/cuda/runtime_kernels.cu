// Hand-written kernels and entries that exercise coco_runtime.h: compiled by
// g++ against the emulation (tests/unit/backend/test_emu_runtime.py) and by
// nvcc for sm_80 and sm_90 (compile only). Entries follow the ABI of
// docs/gpu/cuda.md (a context, then device pointers), plus scalar sizes.
#include "coco_runtime.h"

// (a) elementwise, grid-stride
__global__ void scale_add(const float *__restrict__ x, float *__restrict__ y, float a, long long n) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    y[i] = a * x[i] + y[i];
}

extern "C" int coco_scale_add(coco_context *ctx, const float *x, float *y, float a, long long n) {
  const int threads = 64;
  COCO_LAUNCH(scale_add, coco::grid_blocks(ctx, n, threads), threads, 0, ctx->streams[0], x, y, a,
              n);
  COCO_CHECK_CUDA(cudaGetLastError());
  return 0;
}

// half and bfloat16 round trips through the conversions
__global__ void convert_halves(const float *x, __half *h, __nv_bfloat16 *b, float *back_h,
                               float *back_b, long long n) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    h[i] = __float2half(x[i]);
    b[i] = __float2bfloat16(x[i]);
    back_h[i] = __half2float(h[i]);
    back_b[i] = __bfloat162float(b[i]);
  }
}

extern "C" int coco_convert_halves(coco_context *ctx, const float *x, __half *h, __nv_bfloat16 *b,
                                   float *back_h, float *back_b, long long n) {
  COCO_LAUNCH(convert_halves, coco::grid_blocks(ctx, n, 32), 32, 0, ctx->streams[0], x, h, b,
              back_h, back_b, n);
  COCO_CHECK_CUDA(cudaGetLastError());
  return 0;
}

// (b) flag ping-pong: two blocks of one kernel
__global__ void pingpong_blocks(coco_peers peers, uint64_t base, int rounds, int *log) {
  if (threadIdx.x == 0) {
    uint64_t *ping = coco::own_slot(peers, 0);
    uint64_t *pong = coco::own_slot(peers, 1);
    for (int i = 1; i <= rounds; ++i) {
      if (blockIdx.x == 0) {
        log[2 * (i - 1)] = i;
        coco::signal(ping, base + i);
        coco::wait_signal(pong, base + i);
      } else {
        coco::wait_signal(ping, base + i);
        log[2 * (i - 1) + 1] = log[2 * (i - 1)] * 10;
        coco::signal(pong, base + i);
      }
    }
  }
  __syncthreads();
}

extern "C" int coco_pingpong_blocks(coco_context *ctx, int *log, int rounds) {
  uint64_t base = (uint64_t)coco::next_epoch(ctx) * 1000;
  COCO_LAUNCH(pingpong_blocks, 2, 32, 0, ctx->streams[0], coco::peers_of(ctx), base, rounds, log);
  COCO_CHECK_CUDA(cudaGetLastError());
  return 0;
}

// (b) between two streams of one rank: one kernel on each, joined by an event
__global__ void pingpong_side(coco_peers peers, uint64_t base, int rounds, int side, int *log) {
  if (threadIdx.x == 0) {
    uint64_t *mine = coco::own_slot(peers, 2 + side);
    uint64_t *theirs = coco::own_slot(peers, 3 - side);
    for (int i = 1; i <= rounds; ++i) {
      if (side == 0) {
        log[2 * (i - 1)] = i;
        coco::signal(mine, base + i);
        coco::wait_signal(theirs, base + i);
      } else {
        coco::wait_signal(theirs, base + i);
        log[2 * (i - 1) + 1] = log[2 * (i - 1)] + 100;
        coco::signal(mine, base + i);
      }
    }
  }
}

extern "C" int coco_pingpong_streams(coco_context *ctx, int *log, int rounds) {
  uint64_t base = (uint64_t)coco::next_epoch(ctx) * 1000;
  coco_peers peers = coco::peers_of(ctx);
  cudaEvent_t start, done;
  COCO_CHECK_CUDA(cudaEventCreateWithFlags(&start, cudaEventDisableTiming));
  COCO_CHECK_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  COCO_CHECK_CUDA(cudaEventRecord(start, ctx->streams[0]));
  COCO_CHECK_CUDA(cudaStreamWaitEvent(ctx->streams[1], start, 0));
  // The second side goes first in issue order: only concurrency finishes this.
  COCO_LAUNCH(pingpong_side, 1, 32, 0, ctx->streams[1], peers, base, rounds, 1, log);
  COCO_LAUNCH(pingpong_side, 1, 32, 0, ctx->streams[0], peers, base, rounds, 0, log);
  COCO_CHECK_CUDA(cudaEventRecord(done, ctx->streams[1]));
  COCO_CHECK_CUDA(cudaStreamWaitEvent(ctx->streams[0], done, 0));
  COCO_CHECK_CUDA(cudaEventDestroy(start));
  COCO_CHECK_CUDA(cudaEventDestroy(done));
  return 0;
}

// (b) between ranks: every rank writes its block into its ring neighbour's
// symmetric buffer, signals it, and waits for its own left neighbour.
__global__ void ring_exchange(coco_peers peers, uint64_t epoch, const float *x, float *got,
                              long long n) {
  const int next = (peers.rank + 1) % peers.world;
  float *inbox = reinterpret_cast<float *>(peers.base[peers.rank]);
  float *remote = coco::peer(peers, inbox, next);
  for (long long i = threadIdx.x; i < n; i += blockDim.x) remote[i] = x[i];
  if (threadIdx.x == 0) coco::count_peer_bytes(peers, next, (unsigned long long)n * sizeof(float));
  __syncthreads();
  if (threadIdx.x == 0) {
    coco::signal(coco::signal_slot(peers, next, 4), epoch);
    coco::wait_signal(coco::own_slot(peers, 4), epoch);
  }
  __syncthreads();
  for (long long i = threadIdx.x; i < n; i += blockDim.x) got[i] = inbox[i];
  __syncthreads();
  // Second phase: tell the left neighbour its inbox was read, so the next
  // call may overwrite it.
  if (threadIdx.x == 0) {
    const int prev = (peers.rank + peers.world - 1) % peers.world;
    coco::signal(coco::signal_slot(peers, prev, 5), epoch);
    coco::wait_signal(coco::own_slot(peers, 5), epoch);
  }
}

extern "C" int coco_ring_exchange(coco_context *ctx, const float *x, float *got, long long n) {
  COCO_LAUNCH(ring_exchange, 1, 32, 0, ctx->streams[0], coco::peers_of(ctx),
              coco::next_epoch(ctx), x, got, n);
  COCO_CHECK_CUDA(cudaGetLastError());
  return 0;
}

// (c) NCCL, any element type and reduction
extern "C" int coco_nccl_all_reduce(coco_context *ctx, const void *x, void *y, long long count,
                                    int type, int op) {
  COCO_CHECK_NCCL(ncclAllReduce(x, y, (size_t)count, (ncclDataType_t)type, (ncclRedOp_t)op,
                                ctx->comm, ctx->streams[0]));
  return 0;
}

extern "C" int coco_nccl_reduce_scatter(coco_context *ctx, const void *x, void *y,
                                        long long recvcount, int type, int op) {
  COCO_CHECK_NCCL(ncclReduceScatter(x, y, (size_t)recvcount, (ncclDataType_t)type,
                                    (ncclRedOp_t)op, ctx->comm, ctx->streams[0]));
  return 0;
}

extern "C" int coco_nccl_all_gather(coco_context *ctx, const void *x, void *y, long long sendcount,
                                    int type) {
  COCO_CHECK_NCCL(ncclAllGather(x, y, (size_t)sendcount, (ncclDataType_t)type, ctx->comm,
                                ctx->streams[0]));
  return 0;
}

extern "C" int coco_nccl_broadcast(coco_context *ctx, const void *x, void *y, long long count,
                                   int type, int root) {
  COCO_CHECK_NCCL(ncclBroadcast(x, y, (size_t)count, (ncclDataType_t)type, root, ctx->comm,
                                ctx->streams[0]));
  return 0;
}

// all-to-all as grouped send/recv of contiguous blocks, on stream 1 joined into 0
extern "C" int coco_nccl_all_to_all(coco_context *ctx, const float *x, float *y, long long block) {
  cudaEvent_t ready, done;
  COCO_CHECK_CUDA(cudaEventCreate(&ready));
  COCO_CHECK_CUDA(cudaEventCreate(&done));
  COCO_CHECK_CUDA(cudaEventRecord(ready, ctx->streams[0]));
  COCO_CHECK_CUDA(cudaStreamWaitEvent(ctx->streams[1], ready, 0));
  COCO_CHECK_NCCL(ncclGroupStart());
  for (int p = 0; p < ctx->world; ++p) {
    COCO_CHECK_NCCL(ncclSend(x + p * block, (size_t)block, ncclFloat, p, ctx->comm, ctx->streams[1]));
    COCO_CHECK_NCCL(ncclRecv(y + p * block, (size_t)block, ncclFloat, p, ctx->comm, ctx->streams[1]));
  }
  COCO_CHECK_NCCL(ncclGroupEnd());
  COCO_CHECK_CUDA(cudaEventRecord(done, ctx->streams[1]));
  COCO_CHECK_CUDA(cudaStreamWaitEvent(ctx->streams[0], done, 0));
  COCO_CHECK_CUDA(cudaEventDestroy(ready));
  COCO_CHECK_CUDA(cudaEventDestroy(done));
  return 0;
}

// pipelines: rank r of this stage sends to / receives from rank r of `stage`
extern "C" int coco_send_to(coco_context *ctx, const float *x, long long count, int stage) {
  COCO_CHECK_NCCL(ncclSend(x, (size_t)count, ncclFloat, stage * ctx->world + ctx->rank,
                           ctx->pipeline_comm, ctx->streams[0]));
  return 0;
}

extern "C" int coco_recv_from(coco_context *ctx, float *y, long long count, int stage) {
  COCO_CHECK_NCCL(ncclRecv(y, (size_t)count, ncclFloat, stage * ctx->world + ctx->rank,
                           ctx->pipeline_comm, ctx->streams[0]));
  return 0;
}

// (d) cuBLAS, row-major: C[M,N] = A[M,K] B[K,N] is, column-major, C^T = B^T A^T
extern "C" int coco_gemm(coco_context *ctx, const void *a, const void *b, void *c, int m, int n,
                         int k, int type, int out_type, float beta) {
  const float alpha = 1.0f;
  COCO_CHECK_CUBLAS(cublasSetStream(ctx->cublas, ctx->streams[0]));
  COCO_CHECK_CUBLAS(cublasGemmEx(ctx->cublas, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b,
                                 (cudaDataType_t)type, n, a, (cudaDataType_t)type, k, &beta, c,
                                 (cudaDataType_t)out_type, n, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
  return 0;
}

// row-major batched with B transposed: C[i] = A[i] @ B[i]^T, B[i] of shape [N,K]
extern "C" int coco_gemm_batched_bt(coco_context *ctx, const float *a, const float *b, float *c,
                                    int batch, int m, int n, int k) {
  const float alpha = 1.0f, beta = 0.0f;
  COCO_CHECK_CUBLAS(cublasSetStream(ctx->cublas, ctx->streams[0]));
  COCO_CHECK_CUBLAS(cublasGemmStridedBatchedEx(
      ctx->cublas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, b, CUDA_R_32F, k, (long long)n * k, a,
      CUDA_R_32F, k, (long long)m * k, &beta, c, CUDA_R_32F, n, (long long)m * n, batch,
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return 0;
}

// (e) shared memory + __syncthreads: a tree reduction per block, then atomicAdd
__global__ void block_sum(const float *x, float *partial, float *total, long long n) {
  COCO_SHARED(float, cache, 64);
  float sum = 0.0f;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    sum += x[i];
  cache[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) cache[threadIdx.x] += cache[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partial[blockIdx.x] = cache[0];
    atomicAdd(total, cache[0]);
  }
}

extern "C" int coco_block_sum(coco_context *ctx, const float *x, float *partial, float *total,
                              long long n, int blocks) {
  COCO_CHECK_CUDA(cudaMemsetAsync(total, 0, sizeof(float), ctx->streams[0]));
  COCO_LAUNCH(block_sum, blocks, 64, 0, ctx->streams[0], x, partial, total, n);
  COCO_CHECK_CUDA(cudaGetLastError());
  return 0;
}

// stream-ordered intermediates: y = 2 x through a temporary
__global__ void twice(const float *x, float *y, long long n) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    y[i] = 2.0f * x[i];
}

extern "C" int coco_twice_via_temp(coco_context *ctx, const float *x, float *y, long long n) {
  float *tmp = nullptr;
  COCO_CHECK_CUDA(cudaMallocAsync(&tmp, (size_t)n * sizeof(float), ctx->streams[0]));
  COCO_CHECK_CUDA(cudaMemcpyAsync(tmp, x, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice,
                                  ctx->streams[0]));
  COCO_LAUNCH(twice, coco::grid_blocks(ctx, n, 32), 32, 0, ctx->streams[0], tmp, y, n);
  COCO_CHECK_CUDA(cudaGetLastError());
  COCO_CHECK_CUDA(cudaFreeAsync(tmp, ctx->streams[0]));
  return 0;
}

// the rest of the list: dynamic shared memory, atomicAdd on int and double,
// __umulhi, the dtype helpers
__global__ void __launch_bounds__(32) odds_and_ends(const float *x, float *reversed, int *count, double *sum,
                              unsigned int *high) {
  COCO_SHARED_DYNAMIC(float, tile);
  tile[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  reversed[threadIdx.x] = tile[blockDim.x - 1 - threadIdx.x];
  __syncthreads();
  if (threadIdx.x < 8) {  // vector loads and stores, as the printer vectorizes
    float4 v = reinterpret_cast<const float4 *>(reversed)[threadIdx.x];
    v = make_float4(v.x, v.y, v.z, v.w);
    reinterpret_cast<float4 *>(tile)[threadIdx.x] = v;
    uint4 u = reinterpret_cast<const uint4 *>(tile)[threadIdx.x];
    reinterpret_cast<uint4 *>(tile)[threadIdx.x] = u;
  }
  __syncthreads();
  reversed[threadIdx.x] = tile[threadIdx.x];
  atomicAdd(count, 1);
  atomicAdd(sum, (double)x[threadIdx.x]);
  high[threadIdx.x] = __umulhi(0x80000000u + threadIdx.x, 0xFFFFFFFFu - threadIdx.x);
  if (threadIdx.x == 0) {  // the printer's bit casts and signed high products
    int bits = __float_as_int(__int_as_float(0x3f800000));
    long long wide = __double_as_longlong(__longlong_as_double(0x3ff0000000000000LL));
    count[1] = (bits == 0x3f800000) + 2 * (wide == 0x3ff0000000000000LL) +
               4 * (__mulhi(-2, 0x40000000) == -1) +
               8 * (__mul64hi(-2LL, 0x4000000000000000LL) == -1LL);
  }
}

extern "C" int coco_odds_and_ends(coco_context *ctx, const float *x, float *reversed, int *count,
                                  double *sum, unsigned int *high, float *all_reduced) {
  COCO_LAUNCH(odds_and_ends, 1, 32, 32 * sizeof(float), ctx->streams[1], x, reversed, count, sum,
              high);
  COCO_CHECK_CUDA(cudaGetLastError());
  COCO_CHECK_CUDA(cudaEventRecord(ctx->events[3], ctx->streams[1]));
  COCO_CHECK_CUDA(cudaStreamWaitEvent(ctx->streams[0], ctx->events[3], 0));
  float *workspace = coco::symmetric_buffer<float>(ctx, 256);
  COCO_CHECK_CUDA(cudaMemcpyAsync(workspace, x, 32 * sizeof(float), cudaMemcpyDeviceToDevice,
                                  ctx->streams[0]));
  x = workspace;
  static_assert(coco::cuda_type<__nv_bfloat16>() == CUDA_R_16BF, "dtype table");
  COCO_CHECK_NCCL(ncclAllReduce(x, all_reduced, 32, coco::nccl_type<float>(), ncclSum, ctx->comm,
                                ctx->streams[0]));
  return 0;
}

// (f) the dropout generator
__global__ void philox(unsigned long long seed, unsigned long long first, float *u, long long n) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    u[i] = coco::philox_uniform(seed, first + (unsigned long long)i);
}

extern "C" int coco_philox(coco_context *ctx, float *u, long long n, unsigned long long seed,
                           unsigned long long first) {
  COCO_LAUNCH(philox, coco::grid_blocks(ctx, n, 64), 64, 0, ctx->streams[0], seed, first, u, n);
  COCO_CHECK_CUDA(cudaGetLastError());
  return 0;
}

// (g) a wait that never ends
__global__ void wait_forever(coco_peers peers) {
  if (threadIdx.x == 0) coco::wait_signal(coco::own_slot(peers, 7), 1ull << 40);
  __syncthreads();
}

extern "C" int coco_wait_forever(coco_context *ctx) {
  COCO_LAUNCH(wait_forever, 1, 4, 0, ctx->streams[2], coco::peers_of(ctx));
  COCO_CHECK_CUDA(cudaGetLastError());
  return 0;
}

// errors: a launch with an impossible block size fails the entry
extern "C" int coco_bad_launch(coco_context *ctx, float *y) {
  COCO_LAUNCH(twice, 1, 4096, 0, ctx->streams[0], y, y, 1LL);
  COCO_CHECK_CUDA(cudaGetLastError());
  return 0;
}

// a data race on purpose (two streams, no event): ThreadSanitizer must see it.
// The two bumps first meet on a relaxed counter, so that both kernels run at
// once. Without that, the emulation's own locks could order them: when stream
// 1's worker took its task late (a loaded machine), it took it under stream
// 1's mutex after the host, in coco_emu_synchronize, had waited for stream 0
// (so had seen the first bump, joined by that worker) and then released
// stream 1's mutex to wait for it. ThreadSanitizer then saw the first bump
// happen before the second and reported nothing. Relaxed atomics are no
// happens-before edge for it: the two plain `*counter += 1` stay unordered.
// (On a GPU the meeting needs both kernels resident; nvcc only compiles this.)
__device__ uint64_t racy_arrivals;  // a call's pair waits for the next even count

__global__ void bump(int *counter) {
  if (threadIdx.x == 0) {
    cuda::atomic_ref<uint64_t, cuda::thread_scope_system> arrivals(racy_arrivals);
    const uint64_t both = (arrivals.fetch_add(1, cuda::std::memory_order_relaxed) | 1) + 1;
#ifdef __CUDACC__
    while (arrivals.load(cuda::std::memory_order_relaxed) < both) {
    }
#else
    coco_emu::poller poll(&racy_arrivals, both);  // yields; the watchdog ends a lone bump
    uint64_t seen;
    while ((seen = arrivals.load(cuda::std::memory_order_relaxed)) < both) poll.pause(seen);
#endif
    *counter += 1;
  }
}

extern "C" int coco_racy(coco_context *ctx, int *counter) {
  COCO_LAUNCH(bump, 1, 1, 0, ctx->streams[0], counter);
  COCO_LAUNCH(bump, 1, 1, 0, ctx->streams[1], counter);
  COCO_CHECK_CUDA(cudaGetLastError());
  return 0;
}

// Threads of one block swapping values through shared memory: each writes its
// slot, then reads its neighbour's. Without the barrier between the two the
// read races with the neighbour's write (the emulation runs a block's threads
// as fibers, one after another, so only ThreadSanitizer can tell).
__global__ void rotate(int *out, int sync) {
  COCO_SHARED(int, slots, 32);
  slots[threadIdx.x] = (int)threadIdx.x;
  if (sync) __syncthreads();
  out[threadIdx.x] = slots[(threadIdx.x + 1) % 32];
}

extern "C" int coco_rotate(coco_context *ctx, int *out, int sync) {
  COCO_LAUNCH(rotate, 1, 32, 0, ctx->streams[0], out, sync);
  COCO_CHECK_CUDA(cudaGetLastError());
  return 0;
}

extern "C" size_t coco_symmetric_bytes(void) { return 1 << 16; }
