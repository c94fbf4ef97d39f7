// coco_gpu_harness.h — the real-GPU harness (docs/gpu/running.md): create a world
// of ranks in ONE process driving several GPUs, hand out their contexts,
// synchronize, time, destroy. The GPU twin of coco_emu_harness.h.
//
// nvcc only. Added to an emitted .cu by the build that drives it
// (nvcc_command(harness=True) force-includes it, as gpu_run.py's shared
// library does) or by coco_gpu_bench.h (the benchmark main of
// `-t 'cuda{main=true}'`); it includes coco_runtime.h for coco_context.
// extern "C", weak, default visibility, so the shared library built from an
// emitted .cu exports them (gpu_run.py loads them with ctypes).
//
// Rank `r` of stage `s` (global rank g = s*world + r) runs on device
// devices[g] (default: device g). Each stage gets one NCCL communicator over
// its devices (ncclCommInitAll), and one more spans every rank (the pipeline
// communicator, global rank order). Peer access is enabled between the
// devices of a stage; a module with a symmetric workspace (fused kernels)
// needs it, and creation fails with a clear message where P2P is impossible.
// Every rank gets its symmetric workspace and signal pad (cudaMalloc, zeroed),
// COCO_MAX_STREAMS non-blocking streams, COCO_MAX_EVENTS events (timing
// disabled), a cuBLAS handle on stream 0, and a pair of timing events.
#pragma once

#ifndef __CUDACC__
#error "coco_gpu_harness.h drives real GPUs (nvcc); the emulation's is coco_emu_harness.h"
#endif

#include <string.h>

#include "coco_runtime.h"

#define COCO_GPU_EXPORT extern "C" __attribute__((weak, visibility("default")))

// The emitted module's ranks per node (docs/gpu/device.md, "Several nodes"),
// defined by the printed CUDA C; a library without it is on one node.
extern "C" __attribute__((weak)) int coco_ranks_per_node(void);

struct coco_gpu_world {
  int world;       // ranks per stage
  int num_stages;  // stages
  int ranks;       // world * num_stages
  int devices[COCO_MAX_RANKS * COCO_MAX_RANKS];
  coco_context *contexts[COCO_MAX_RANKS * COCO_MAX_RANKS];
  char *symmetric[COCO_MAX_RANKS * COCO_MAX_RANKS];
  uint64_t *pads[COCO_MAX_RANKS * COCO_MAX_RANKS];
  cudaEvent_t timer_start[COCO_MAX_RANKS * COCO_MAX_RANKS];
  cudaEvent_t timer_stop[COCO_MAX_RANKS * COCO_MAX_RANKS];
  bool shared;  // some device runs several ranks: no NCCL (see coco_gpu_create)
};

namespace coco_gpu {

// Why the last coco_gpu_create failed (process-wide: creation is rare).
inline char *create_error() {
  static char text[COCO_ERROR_TEXT];
  return text;
}

inline bool failed(const char *what, const char *detail, int line) {
  coco::format(create_error(), COCO_ERROR_TEXT, "coco_gpu_harness.h:%d: %s: %s", line, what,
           detail ? detail : "unknown error");
  return false;
}

// Return false from a creation step, the failure in create_error().
#define COCO_GPU_TRY_CUDA(expr)                                   \
  COCO_RETURN_UNLESS(cudaError_t, cudaSuccess, expr,              \
                     coco_gpu::failed(#expr, cudaGetErrorString(coco_err_), __LINE__))
#define COCO_GPU_TRY_NCCL(expr)                                   \
  COCO_RETURN_UNLESS(ncclResult_t, ncclSuccess, expr,             \
                     coco_gpu::failed(#expr, ncclGetErrorString(coco_err_), __LINE__))
#define COCO_GPU_TRY_CUBLAS(expr)                                 \
  COCO_RETURN_UNLESS(cublasStatus_t, CUBLAS_STATUS_SUCCESS, expr, \
                     coco_gpu::failed(#expr, cublasGetStatusString(coco_err_), __LINE__))

// Peer access between every ordered pair of a stage's devices. Already
// enabled is fine; impossible is an error only when `required`.
inline bool enable_peers(const coco_gpu_world *w, int stage, bool required) {
  for (int a = 0; a < w->world; ++a) {
    const int da = w->devices[stage * w->world + a];
    for (int b = 0; b < w->world; ++b) {
      const int db = w->devices[stage * w->world + b];
      if (a == b || da == db) continue;
      int can = 0;
      COCO_GPU_TRY_CUDA(cudaDeviceCanAccessPeer(&can, da, db));
      if (!can) {
        if (!required) continue;
        char detail[256];
        coco::format(detail, sizeof detail,
                 "device %d cannot access device %d (no P2P between them); the module's fused "
                 "kernels store into peers' memory and need P2P (NVLink or PCIe P2P)",
                 da, db);
        return failed("peer access", detail, __LINE__);
      }
      COCO_GPU_TRY_CUDA(cudaSetDevice(da));
      cudaError_t err = cudaDeviceEnablePeerAccess(db, 0);
      if (err == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();  // clear the sticky-free error state
      } else if (err != cudaSuccess) {
        if (!required) {
          (void)cudaGetLastError();
          continue;
        }
        return failed("cudaDeviceEnablePeerAccess", cudaGetErrorString(err), __LINE__);
      }
    }
  }
  return true;
}

inline bool create_rank(coco_gpu_world *w, int g, size_t symmetric_bytes, size_t signal_slots) {
  COCO_GPU_TRY_CUDA(cudaSetDevice(w->devices[g]));
  const size_t sym = (symmetric_bytes + 255) / 256 * 256;
  const size_t pad = (signal_slots * sizeof(uint64_t) + 255) / 256 * 256;
  COCO_GPU_TRY_CUDA(cudaMalloc((void **)&w->symmetric[g], sym ? sym : 256));
  COCO_GPU_TRY_CUDA(cudaMemset(w->symmetric[g], 0, sym ? sym : 256));
  COCO_GPU_TRY_CUDA(cudaMalloc((void **)&w->pads[g], pad ? pad : 256));
  COCO_GPU_TRY_CUDA(cudaMemset(w->pads[g], 0, pad ? pad : 256));
  coco_context *ctx = w->contexts[g];
  ctx->rank = g % w->world;
  ctx->world = w->world;
  ctx->stage = g / w->world;
  ctx->num_stages = w->num_stages;
  ctx->ranks_per_node = w->world;  // one node: node_comm and cross_comm stay NULL
  ctx->symmetric_bytes = symmetric_bytes;
  ctx->signal_slots = signal_slots;
  for (int s = 0; s < COCO_MAX_STREAMS; ++s)
    COCO_GPU_TRY_CUDA(cudaStreamCreateWithFlags(&ctx->streams[s], cudaStreamNonBlocking));
  for (int e = 0; e < COCO_MAX_EVENTS; ++e)
    COCO_GPU_TRY_CUDA(cudaEventCreateWithFlags(&ctx->events[e], cudaEventDisableTiming));
  COCO_GPU_TRY_CUDA(cudaEventCreate(&w->timer_start[g]));
  COCO_GPU_TRY_CUDA(cudaEventCreate(&w->timer_stop[g]));
  COCO_GPU_TRY_CUBLAS(cublasCreate(&ctx->cublas));
  COCO_GPU_TRY_CUBLAS(cublasSetStream(ctx->cublas, ctx->streams[0]));
  int sms = 0;
  COCO_GPU_TRY_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, w->devices[g]));
  // Ranks sharing a device share its multiprocessors: each rank's grids
  // (grid_blocks, resident_blocks) are sized for its share, so the kernels
  // of all of them are resident together and a kernel waiting for a peer's
  // signal never waits for blocks that cannot start.
  int sharing = 0;
  for (int h = 0; h < w->ranks; ++h) sharing += w->devices[h] == w->devices[g];
  ctx->sm_count = sms / sharing > 0 ? sms / sharing : 1;
  return true;
}

inline bool create_comms(coco_gpu_world *w) {
  // NCCL puts one rank on a GPU (two in one communicator are an error): a
  // world whose ranks share a device has no communicator, and its NCCL calls
  // fail with COCO_NO_NCCL (coco_runtime.h).
  if (w->shared) return true;
  ncclComm_t comms[COCO_MAX_RANKS * COCO_MAX_RANKS];
  for (int s = 0; s < w->num_stages; ++s) {
    COCO_GPU_TRY_NCCL(ncclCommInitAll(comms, w->world, &w->devices[s * w->world]));
    for (int r = 0; r < w->world; ++r) w->contexts[s * w->world + r]->comm = comms[r];
  }
  // A module lowered for several nodes (docs/gpu/device.md, "Several nodes")
  // also has each node's communicator and each index's across the nodes:
  // here the "nodes" are groups of this machine's GPUs.
  const int G = coco_ranks_per_node ? coco_ranks_per_node() : w->world;
  if (G > 0 && G < w->world && w->world % G == 0) {
    const int nodes = w->world / G;
    int subset[COCO_MAX_RANKS];
    ncclComm_t made[COCO_MAX_RANKS];
    for (int s = 0; s < w->num_stages; ++s) {
      for (int k = 0; k < nodes; ++k) {
        for (int i = 0; i < G; ++i) subset[i] = w->devices[s * w->world + k * G + i];
        COCO_GPU_TRY_NCCL(ncclCommInitAll(made, G, subset));
        for (int i = 0; i < G; ++i) w->contexts[s * w->world + k * G + i]->node_comm = made[i];
      }
      for (int i = 0; i < G; ++i) {
        for (int k = 0; k < nodes; ++k) subset[k] = w->devices[s * w->world + k * G + i];
        COCO_GPU_TRY_NCCL(ncclCommInitAll(made, nodes, subset));
        for (int k = 0; k < nodes; ++k) w->contexts[s * w->world + k * G + i]->cross_comm = made[k];
      }
      for (int r = 0; r < w->world; ++r) w->contexts[s * w->world + r]->ranks_per_node = G;
    }
  }
  if (w->num_stages == 1) {
    // One stage: the pipeline communicator is never used by a send/recv
    // (there is no other stage); share the stage's.
    for (int g = 0; g < w->ranks; ++g) w->contexts[g]->pipeline_comm = w->contexts[g]->comm;
    return true;
  }
  COCO_GPU_TRY_NCCL(ncclCommInitAll(comms, w->ranks, w->devices));
  for (int g = 0; g < w->ranks; ++g) w->contexts[g]->pipeline_comm = comms[g];
  return true;
}

}  // namespace coco_gpu

// Destroy everything `w` holds (after synchronizing every rank); NULL is fine.
COCO_GPU_EXPORT void coco_gpu_destroy(coco_gpu_world *w) {
  if (!w) return;
  for (int g = 0; g < w->ranks; ++g) {
    coco_context *ctx = w->contexts[g];
    if (!ctx) continue;
    if (cudaSetDevice(w->devices[g]) != cudaSuccess) continue;
    for (int s = 0; s < COCO_MAX_STREAMS; ++s)
      if (ctx->streams[s]) cudaStreamSynchronize(ctx->streams[s]);
  }
  for (int g = 0; g < w->ranks; ++g) {
    coco_context *ctx = w->contexts[g];
    if (!ctx) continue;
    cudaSetDevice(w->devices[g]);
    if (ctx->pipeline_comm && ctx->pipeline_comm != ctx->comm) ncclCommDestroy(ctx->pipeline_comm);
    if (ctx->node_comm) ncclCommDestroy(ctx->node_comm);
    if (ctx->cross_comm) ncclCommDestroy(ctx->cross_comm);
    if (ctx->comm) ncclCommDestroy(ctx->comm);
    if (ctx->cublas) cublasDestroy(ctx->cublas);
    for (int e = 0; e < COCO_MAX_EVENTS; ++e)
      if (ctx->events[e]) cudaEventDestroy(ctx->events[e]);
    if (w->timer_start[g]) cudaEventDestroy(w->timer_start[g]);
    if (w->timer_stop[g]) cudaEventDestroy(w->timer_stop[g]);
    for (int s = 0; s < COCO_MAX_STREAMS; ++s)
      if (ctx->streams[s]) cudaStreamDestroy(ctx->streams[s]);
    if (w->symmetric[g]) cudaFree(w->symmetric[g]);
    if (w->pads[g]) cudaFree(w->pads[g]);
    delete ctx;
  }
  delete w;
}

// A world of `num_stages` stages of `world` ranks each (world <=
// COCO_MAX_RANKS) on `devices` (world*num_stages device ordinals, or NULL for
// 0, 1, ...), with `symmetric_bytes` of symmetric workspace and
// `signal_slots` signal slots per rank (zeroed). NULL on failure, the reason
// in coco_gpu_create_error(). Ranks may share a device (a device listed
// twice): each keeps its own buffers, streams and cuBLAS handle and gets its
// share of the device's multiprocessors for its grids, and the world has no
// NCCL communicator (docs/gpu/running.md, "Ranks sharing a GPU").
COCO_GPU_EXPORT coco_gpu_world *coco_gpu_create(int world, int num_stages, const int *devices,
                                                size_t symmetric_bytes, size_t signal_slots) {
  coco_gpu::create_error()[0] = 0;
  if (world < 1 || world > COCO_MAX_RANKS || num_stages < 1 || num_stages > COCO_MAX_RANKS) {
    char detail[128];
    coco::format(detail, sizeof detail, "a world needs 1..%d ranks per stage and 1..%d stages, got %d "
             "and %d", COCO_MAX_RANKS, COCO_MAX_RANKS, world, num_stages);
    coco_gpu::failed("coco_gpu_create", detail, __LINE__);
    return nullptr;
  }
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    coco_gpu::failed("cudaGetDeviceCount", cudaGetErrorString(err), __LINE__);
    return nullptr;
  }
  const int ranks = world * num_stages;
  bool shared = false;
  for (int g = 0; g < ranks; ++g) {
    const int d = devices ? devices[g] : g;
    if (d < 0 || d >= count) {
      char detail[160];
      coco::format(detail, sizeof detail, "rank %d of %d (%d x %d stages) asks for device %d "
                   "and %d are visible", g, ranks, world, num_stages, d, count);
      coco_gpu::failed("coco_gpu_create", detail, __LINE__);
      return nullptr;
    }
    for (int h = 0; h < g; ++h) shared = shared || (devices ? devices[h] : h) == d;
  }
  auto *w = new coco_gpu_world();
  memset(w, 0, sizeof *w);
  w->world = world;
  w->num_stages = num_stages;
  w->ranks = ranks;
  w->shared = shared;
  for (int g = 0; g < ranks; ++g) {
    w->devices[g] = devices ? devices[g] : g;
    w->contexts[g] = new coco_context();
    memset(w->contexts[g], 0, sizeof *w->contexts[g]);
  }
  bool ok = true;
  for (int s = 0; ok && s < num_stages; ++s)
    ok = coco_gpu::enable_peers(w, s, symmetric_bytes > 0);
  for (int g = 0; ok && g < ranks; ++g)
    ok = coco_gpu::create_rank(w, g, symmetric_bytes, signal_slots);
  if (ok) ok = coco_gpu::create_comms(w);
  for (int g = 0; ok && g < ranks; ++g) {
    coco_context *ctx = w->contexts[g];
    const int stage = g / world;
    for (int p = 0; p < world; ++p) {
      ctx->symmetric[p] = w->symmetric[stage * world + p];
      ctx->signals[p] = w->pads[stage * world + p];
    }
  }
  for (int g = 0; ok && g < ranks; ++g) {
    ok = cudaSetDevice(w->devices[g]) == cudaSuccess &&
         cudaDeviceSynchronize() == cudaSuccess;
    if (!ok) coco_gpu::failed("cudaDeviceSynchronize", "after creating the world", __LINE__);
  }
  if (!ok) {
    coco_gpu_destroy(w);
    return nullptr;
  }
  return w;
}

// Why the last coco_gpu_create returned NULL ("" if it did not).
COCO_GPU_EXPORT const char *coco_gpu_create_error(void) { return coco_gpu::create_error(); }

// Rank `rank` of stage `stage`'s context; NULL if out of range.
COCO_GPU_EXPORT coco_context *coco_gpu_context(coco_gpu_world *w, int stage, int rank) {
  if (!w || stage < 0 || stage >= w->num_stages || rank < 0 || rank >= w->world) return nullptr;
  return w->contexts[stage * w->world + rank];
}

// The device of rank `rank` of stage `stage`; -1 if out of range.
COCO_GPU_EXPORT int coco_gpu_device(coco_gpu_world *w, int stage, int rank) {
  if (!w || stage < 0 || stage >= w->num_stages || rank < 0 || rank >= w->world) return -1;
  return w->devices[stage * w->world + rank];
}

// Make the rank's device current on the calling thread (every thread that
// calls an entry of that rank does this first); 0 or COCO_ERR_CUDA.
COCO_GPU_EXPORT int coco_gpu_bind(coco_gpu_world *w, int stage, int rank) {
  const int device = coco_gpu_device(w, stage, rank);
  if (device < 0) return COCO_ERR_CUDA;
  return cudaSetDevice(device) == cudaSuccess ? COCO_OK : COCO_ERR_CUDA;
}

// Wait until every stream of the context is idle; 0, or a coco_status with
// the failure in coco_last_error(ctx) (an asynchronous kernel fault shows
// here). The caller has bound the rank's device.
COCO_GPU_EXPORT int coco_gpu_check_waits(coco_context *ctx);

COCO_GPU_EXPORT int coco_gpu_synchronize(coco_context *ctx) {
  for (int s = 0; s < COCO_MAX_STREAMS; ++s)
    COCO_CHECK_CUDA(cudaStreamSynchronize(ctx->streams[s]));
  COCO_CHECK_CUDA(cudaGetLastError());
  return coco_gpu_check_waits(ctx);
}

// The device watchdog's report (coco_runtime.h, coco::wait_failed): 0 if no
// signal wait of this library's kernels on the current device gave up since
// the last check, else COCO_ERR_CUDA with the first one in
// coco_last_error(ctx) (and the record cleared). Synchronizes the device.
COCO_GPU_EXPORT int coco_gpu_check_waits(coco_context *ctx) {
  coco::wait_failure failure;
  COCO_CHECK_CUDA(cudaMemcpyFromSymbol(&failure, coco::wait_failed, sizeof failure));
  if (failure.waits == 0) return COCO_OK;
  const coco::wait_failure none = {};
  COCO_CHECK_CUDA(cudaMemcpyToSymbol(coco::wait_failed, &none, sizeof none));
  char detail[COCO_ERROR_TEXT];
  int peer = -1;
  long long slot = -1;
  for (int p = 0; p < ctx->world; ++p) {
    const unsigned long long pad = (unsigned long long)ctx->signals[p];
    if (pad && failure.slot >= pad && failure.slot < pad + ctx->signal_slots * sizeof(uint64_t)) {
      peer = p;
      slot = (long long)((failure.slot - pad) / sizeof(uint64_t));
    }
  }
  coco::format(detail, sizeof detail,
               "%llu signal wait(s) gave up after %.0f s on rank %d of stage %d; the first, in "
               "block %llu, waited for slot %lld of rank %d's signal pad to reach %llu and saw "
               "%llu: a peer rank is gone or stuck (its results are wrong)",
               failure.waits, COCO_WAIT_TIMEOUT_NS / 1e9, ctx->rank, ctx->stage, failure.block,
               slot, peer, failure.value, failure.seen);
  return coco::fail(ctx, COCO_ERR_CUDA, "device watchdog", detail, __FILE__, __LINE__);
}

// Timing on the rank's stream 0: record the start event (before the timed
// entries are enqueued), then the stop event, wait for it and write the
// elapsed milliseconds. 0 or a coco_status.
COCO_GPU_EXPORT int coco_gpu_timer_start(coco_gpu_world *w, int stage, int rank) {
  coco_context *ctx = coco_gpu_context(w, stage, rank);
  if (!ctx) return COCO_ERR_CUDA;
  COCO_CHECK_CUDA(cudaEventRecord(w->timer_start[stage * w->world + rank], ctx->streams[0]));
  return COCO_OK;
}

COCO_GPU_EXPORT int coco_gpu_timer_stop(coco_gpu_world *w, int stage, int rank, float *ms) {
  coco_context *ctx = coco_gpu_context(w, stage, rank);
  if (!ctx) return COCO_ERR_CUDA;
  const int g = stage * w->world + rank;
  COCO_CHECK_CUDA(cudaEventRecord(w->timer_stop[g], ctx->streams[0]));
  COCO_CHECK_CUDA(cudaEventSynchronize(w->timer_stop[g]));
  COCO_CHECK_CUDA(cudaEventElapsedTime(ms, w->timer_start[g], w->timer_stop[g]));
  return COCO_OK;
}

// ---------------------------------------------------------------------------
// A rank per process: the symmetric workspace across processes (CUDA IPC)
// ---------------------------------------------------------------------------
//
// docs/gpu/running.md, "Multi-process mode". A process that holds one rank
// (the PyTorch op under torchrun) allocates its own workspace and signal pad,
// exports them as CUDA IPC handles, gives them to the other processes of its
// stage (the torch op: all_gather_object over the group) and opens theirs,
// so ctx->symmetric[p] and ctx->signals[p] are its peers' memory as in one
// process, and the fused kernels run unchanged. Compiled here with nvcc; not
// run on GPUs yet (no GPU with two processes has been available).

// The bytes of one rank's handles: its workspace's, then its pad's.
#define COCO_IPC_HANDLES_BYTES (2 * sizeof(cudaIpcMemHandle_t))

// This rank's workspace (`symmetric_bytes`) and pad (`signal_slots`), zeroed,
// into ctx->symmetric[ctx->rank] and ctx->signals[ctx->rank], and their IPC
// handles into `handles` (COCO_IPC_HANDLES_BYTES). The context's device is
// current. 0 or a coco_status (the reason in coco_last_error(ctx)).
COCO_GPU_EXPORT int coco_gpu_symmetric_alloc(coco_context *ctx, size_t symmetric_bytes,
                                             size_t signal_slots, void *handles) {
  const size_t sym = ((symmetric_bytes ? symmetric_bytes : 1) + 255) / 256 * 256;
  const size_t pad = ((signal_slots ? signal_slots : 1) * sizeof(uint64_t) + 255) / 256 * 256;
  char *base = nullptr;
  uint64_t *slots = nullptr;
  COCO_CHECK_CUDA(cudaMalloc((void **)&base, sym));
  COCO_CHECK_CUDA(cudaMalloc((void **)&slots, pad));
  COCO_CHECK_CUDA(cudaMemset(base, 0, sym));
  COCO_CHECK_CUDA(cudaMemset(slots, 0, pad));
  COCO_CHECK_CUDA(cudaDeviceSynchronize());  // zeroed before any peer opens them
  ctx->symmetric[ctx->rank] = base;
  ctx->signals[ctx->rank] = slots;
  ctx->symmetric_bytes = symmetric_bytes;
  ctx->signal_slots = signal_slots;
  auto *out = static_cast<cudaIpcMemHandle_t *>(handles);
  COCO_CHECK_CUDA(cudaIpcGetMemHandle(&out[0], base));
  COCO_CHECK_CUDA(cudaIpcGetMemHandle(&out[1], slots));
  return COCO_OK;
}

// Open every other rank's workspace and pad from `handles`: ctx->world
// ranks' COCO_IPC_HANDLES_BYTES each, in rank order (this rank's own are
// skipped). 0 or a coco_status.
COCO_GPU_EXPORT int coco_gpu_symmetric_open(coco_context *ctx, const void *handles) {
  const auto *all = static_cast<const cudaIpcMemHandle_t *>(handles);
  for (int p = 0; p < ctx->world; ++p) {
    if (p == ctx->rank) continue;
    void *base = nullptr, *slots = nullptr;
    COCO_CHECK_CUDA(cudaIpcOpenMemHandle(&base, all[2 * p], cudaIpcMemLazyEnablePeerAccess));
    COCO_CHECK_CUDA(cudaIpcOpenMemHandle(&slots, all[2 * p + 1], cudaIpcMemLazyEnablePeerAccess));
    ctx->symmetric[p] = static_cast<char *>(base);
    ctx->signals[p] = static_cast<uint64_t *>(slots);
  }
  return COCO_OK;
}

// Close the peers' (after synchronizing the device) and free this rank's.
COCO_GPU_EXPORT int coco_gpu_symmetric_free(coco_context *ctx) {
  COCO_CHECK_CUDA(cudaDeviceSynchronize());
  for (int p = 0; p < ctx->world; ++p) {
    if (!ctx->symmetric[p]) continue;
    if (p == ctx->rank) {
      COCO_CHECK_CUDA(cudaFree(ctx->symmetric[p]));
      COCO_CHECK_CUDA(cudaFree(ctx->signals[p]));
    } else {
      COCO_CHECK_CUDA(cudaIpcCloseMemHandle(ctx->symmetric[p]));
      COCO_CHECK_CUDA(cudaIpcCloseMemHandle(ctx->signals[p]));
    }
    ctx->symmetric[p] = nullptr;
    ctx->signals[p] = nullptr;
  }
  return COCO_OK;
}
