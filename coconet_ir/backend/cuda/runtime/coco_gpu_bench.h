// coco_gpu_bench.h — the standalone benchmark behind `-t 'cuda{main=true}'`
// (docs/gpu/running.md), nvcc only. The printed file includes it, then defines
// the table `coco_bench_entries` (every entry: name,
// stage, arguments with their element kind and count, a caller, the
// nccl-tests size and bus bytes of its collectives) and `main`, which calls
// coco_bench::run. It includes the GPU harness (coco_gpu_harness.h).
//
//   ./prog [--warmup W] [--iters I] [--world N] [--devices 0,1,...]
//
// creates a world on the visible GPUs (coco_gpu_harness.h), fills every
// argument with deterministic values, runs each entry W times, then I times
// between two cudaEvents on stream 0 of every rank, and prints a table in
// the shape of nccl-tests':
//
//   #  entry  bytes  time(us)  algbw(GB/s)  busbw(GB/s)
//
// time: the mean time of one call, on the slowest rank; bytes: the nccl-tests
// size of the entry's collectives (coconet_ir.analysis.costs.message_bytes);
// algbw = bytes / time; busbw = bus bytes / time, the bus bytes being what one
// rank sends (NCCL's ring count, costs.bytes_sent): busbw = algbw * 2(N-1)/N
// for an all-reduce, (N-1)/N for reduce-scatter, all-gather and all-to-all,
// 1 for broadcast and send — nccl-tests' factors.
//
// Entries of a single-stage module are timed one at a time. In a pipeline
// (several stages), every rank runs the entries of its stage in order in each
// iteration (a stage's send meets the next stage's recv), so each row is the
// time of its stage's entries together.
#pragma once

#include <condition_variable>
#include <mutex>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <thread>
#include <vector>

#include "coco_gpu_harness.h"

// What every printed module defines (docs/gpu/cuda.md): its world size and the
// symmetric workspace and signal slots a rank needs.
extern "C" int coco_world_size(void);
extern "C" size_t coco_symmetric_bytes(void);
extern "C" size_t coco_signal_slots(void);

enum coco_bench_kind {
  COCO_BENCH_F32,
  COCO_BENCH_F64,
  COCO_BENCH_F16,
  COCO_BENCH_BF16,
  COCO_BENCH_I8,
  COCO_BENCH_I16,
  COCO_BENCH_I32,
  COCO_BENCH_I64,
  COCO_BENCH_BOOL,
};

struct coco_bench_arg {
  coco_bench_kind kind;
  unsigned long long elements;  // per rank
  unsigned long long bound;     // integers: values in [0, bound) (an embedding's
                                // rows, coco_gpu.index_bounds); 0: the pattern
};

struct coco_bench_entry {
  const char *name;
  int stage;
  int arg_count;
  const coco_bench_arg *args;
  int (*call)(coco_context *ctx, void *const *args);
  unsigned long long bytes;      // nccl-tests size of its collectives
  unsigned long long bus_bytes;  // bytes one rank sends
};

namespace coco_bench {

// value(i, rank) in [-1, 1), multiples of 1/8: exact in every float type.
__device__ __forceinline__ float pattern(unsigned long long i, int seed) {
  return (float)((long long)((i * 7 + (unsigned long long)seed * 13) % 17) - 8) * 0.125f;
}

template <class T> __device__ __forceinline__ T from_pattern(float v) { return (T)v; }
template <> __device__ __forceinline__ __half from_pattern<__half>(float v) {
  return __float2half(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_pattern<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}
template <> __device__ __forceinline__ bool from_pattern<bool>(float v) { return v > 0.0f; }
template <> __device__ __forceinline__ int8_t from_pattern<int8_t>(float v) {
  return (int8_t)(v * 8.0f);
}
template <> __device__ __forceinline__ int16_t from_pattern<int16_t>(float v) {
  return (int16_t)(v * 8.0f);
}
template <> __device__ __forceinline__ int32_t from_pattern<int32_t>(float v) {
  return (int32_t)(v * 8.0f);
}
template <> __device__ __forceinline__ int64_t from_pattern<int64_t>(float v) {
  return (int64_t)(v * 8.0f);
}

// index(i, rank) in [0, bound), spread over the whole range (Knuth's
// multiplicative hash), as an embedding's lookups are.
__device__ __forceinline__ unsigned long long index_in(unsigned long long i, int seed,
                                                       unsigned long long bound) {
  return ((i + (unsigned long long)seed * 977) * 2654435761ull) % bound;
}

template <class T> __device__ __forceinline__ T from_index(unsigned long long v) { return (T)v; }
template <> __device__ __forceinline__ __half from_index<__half>(unsigned long long v) {
  return __float2half((float)v);
}
template <> __device__ __forceinline__ __nv_bfloat16 from_index<__nv_bfloat16>(
    unsigned long long v) {
  return __float2bfloat16((float)v);
}

template <class T>
__global__ void fill(T *out, unsigned long long n, int seed, unsigned long long bound) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x)
    out[i] = bound ? from_index<T>(index_in(i, seed, bound)) : from_pattern<T>(pattern(i, seed));
}

inline size_t kind_bytes(coco_bench_kind kind) {
  switch (kind) {
    case COCO_BENCH_F64:
    case COCO_BENCH_I64:
      return 8;
    case COCO_BENCH_F32:
    case COCO_BENCH_I32:
      return 4;
    case COCO_BENCH_F16:
    case COCO_BENCH_BF16:
    case COCO_BENCH_I16:
      return 2;
    default:
      return 1;
  }
}

template <class T>
inline cudaError_t fill_as(void *p, const coco_bench_arg &arg, int seed) {
  const unsigned long long n = arg.elements;
  fill<T><<<n ? (unsigned)((n + 255) / 256 > 1024 ? 1024 : (n + 255) / 256) : 1, 256>>>(
      static_cast<T *>(p), n, seed, arg.bound);
  return cudaGetLastError();
}

inline cudaError_t fill_argument(void *p, const coco_bench_arg &arg, int seed) {
  switch (arg.kind) {
    case COCO_BENCH_F32: return fill_as<float>(p, arg, seed);
    case COCO_BENCH_F64: return fill_as<double>(p, arg, seed);
    case COCO_BENCH_F16: return fill_as<__half>(p, arg, seed);
    case COCO_BENCH_BF16: return fill_as<__nv_bfloat16>(p, arg, seed);
    case COCO_BENCH_I8: return fill_as<int8_t>(p, arg, seed);
    case COCO_BENCH_I16: return fill_as<int16_t>(p, arg, seed);
    case COCO_BENCH_I32: return fill_as<int32_t>(p, arg, seed);
    case COCO_BENCH_I64: return fill_as<int64_t>(p, arg, seed);
    case COCO_BENCH_BOOL: return fill_as<bool>(p, arg, seed);
  }
  return cudaErrorInvalidValue;
}

// A reusable barrier for the rank threads (C++17: no std::barrier).
class barrier {
 public:
  explicit barrier(int count) : count_(count) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const unsigned long long generation = generation_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
      done_.notify_all();
      return;
    }
    done_.wait(lock, [&] { return generation != generation_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  int count_;
  int arrived_ = 0;
  unsigned long long generation_ = 0;
};

[[noreturn]] inline void die(const char *format, const char *a, const char *b) {
  fprintf(stderr, "coco-bench: error: ");
  fprintf(stderr, format, a, b);
  fprintf(stderr, "\n");
  fflush(stderr);
  _Exit(1);
}

inline long parse_count(const char *flag, const char *text, long low) {
  char *end = nullptr;
  long value = text ? strtol(text, &end, 10) : 0;
  if (!text || *end || value < low) die("%s needs an integer >= the minimum, got '%s'", flag,
                                        text ? text : "");
  return value;
}

inline void usage(const char *program) {
  printf("usage: %s [--warmup W] [--iters I] [--world N] [--devices D0,D1,...]\n"
         "  --warmup W   untimed calls of each entry first (default 5)\n"
         "  --iters I    timed calls of each entry (default 20)\n"
         "  --world N    ranks per stage; must be the world the file was converted for (%d)\n"
         "  --devices L  the CUDA devices of the ranks, stage-major (default 0, 1, ...)\n",
         program, coco_world_size());
}

inline int run(int argc, char **argv, const coco_bench_entry *entries, int entry_count) {
  long warmup = 5, iters = 20, world = coco_world_size();
  std::vector<int> devices;
  for (int i = 1; i < argc; ++i) {
    const char *flag = argv[i];
    const char *value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!strcmp(flag, "--help") || !strcmp(flag, "-h")) {
      usage(argv[0]);
      return 0;
    } else if (!strcmp(flag, "--warmup")) {
      warmup = parse_count(flag, value, 0), ++i;
    } else if (!strcmp(flag, "--iters")) {
      iters = parse_count(flag, value, 1), ++i;
    } else if (!strcmp(flag, "--world")) {
      world = parse_count(flag, value, 1), ++i;
    } else if (!strcmp(flag, "--devices")) {
      if (!value) die("%s needs a list of device ordinals%s", flag, "");
      for (const char *p = value; *p;) {
        char *end = nullptr;
        long d = strtol(p, &end, 10);
        if (end == p || d < 0) die("bad device list '%s'%s", value, "");
        devices.push_back((int)d);
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') die("bad device list '%s'%s", value, "");
      }
      ++i;
    } else {
      die("unknown argument '%s'%s (try --help)", flag, "");
    }
  }
  if (world != coco_world_size()) {
    char text[160];
    coco::format(text, sizeof text, "--world %ld, but this file was converted for %d ranks per stage "
             "(convert-coco-to-gpu{world=%ld} builds it for %ld)", world, coco_world_size(), world,
             world);
    die("%s%s", text, "");
  }
  int stages = 1;
  for (int e = 0; e < entry_count; ++e)
    if (entries[e].stage + 1 > stages) stages = entries[e].stage + 1;
  const int ranks = (int)world * stages;
  int visible = 0;
  if (cudaGetDeviceCount(&visible) != cudaSuccess) visible = 0;
  if (devices.empty()) {
    if (visible < ranks) {
      char text[160];
      coco::format(text, sizeof text, "%d ranks (world %ld x %d stages) need %d GPUs; %d visible",
               ranks, world, stages, ranks, visible);
      die("%s%s", text, "");
    }
    for (int g = 0; g < ranks; ++g) devices.push_back(g);
  }
  if ((int)devices.size() != ranks) {
    char text[160];
    coco::format(text, sizeof text, "--devices lists %zu devices; the world has %d ranks",
             devices.size(), ranks);
    die("%s%s", text, "");
  }
  coco_gpu_world *w = coco_gpu_create((int)world, stages, devices.data(), coco_symmetric_bytes(),
                                      coco_signal_slots());
  if (!w) die("cannot create the world: %s%s", coco_gpu_create_error(), "");

  // Every rank's arguments of every entry of its stage, filled.
  std::vector<std::vector<std::vector<void *>>> buffers(
      (size_t)ranks, std::vector<std::vector<void *>>((size_t)entry_count));
  for (int g = 0; g < ranks; ++g) {
    if (coco_gpu_bind(w, g / (int)world, g % (int)world)) die("cannot bind rank %s%s", "", "");
    for (int e = 0; e < entry_count; ++e) {
      if (entries[e].stage != g / world) continue;
      for (int a = 0; a < entries[e].arg_count; ++a) {
        const coco_bench_arg &arg = entries[e].args[a];
        void *p = nullptr;
        size_t bytes = kind_bytes(arg.kind) * (size_t)arg.elements;
        cudaError_t err = cudaMalloc(&p, bytes ? bytes : 1);
        if (err == cudaSuccess) err = fill_argument(p, arg, g * 31 + a);
        if (err != cudaSuccess) die("allocating %s: %s", entries[e].name, cudaGetErrorString(err));
        buffers[(size_t)g][(size_t)e].push_back(p);
      }
    }
    if (cudaDeviceSynchronize() != cudaSuccess) die("filling the arguments%s%s", "", "");
  }

  // Groups of entries timed together: each entry alone, or everything in a pipeline.
  std::vector<std::vector<int>> groups;
  for (int e = 0; e < entry_count; ++e) {
    if (stages == 1 || groups.empty()) groups.emplace_back();
    groups.back().push_back(e);
  }
  std::vector<double> time_us((size_t)entry_count, 0.0);
  for (const std::vector<int> &group : groups) {
    std::vector<float> elapsed((size_t)ranks, 0.0f);
    barrier sync(ranks);
    auto rank_main = [&](int g) {
      const int stage = g / (int)world, rank = g % (int)world;
      if (coco_gpu_bind(w, stage, rank)) die("cannot bind a rank's device%s%s", "", "");
      coco_context *ctx = coco_gpu_context(w, stage, rank);
      auto step = [&]() {
        for (int e : group) {
          if (entries[e].stage != stage) continue;
          if (entries[e].call(ctx, buffers[(size_t)g][(size_t)e].data()) != 0)
            die("%s: %s", entries[e].name, coco_last_error(ctx));
        }
      };
      for (long i = 0; i < warmup; ++i) step();
      if (coco_gpu_synchronize(ctx)) die("warm-up: %s%s", coco_last_error(ctx), "");
      sync.wait();
      if (coco_gpu_timer_start(w, stage, rank)) die("timer: %s%s", coco_last_error(ctx), "");
      for (long i = 0; i < iters; ++i) step();
      float ms = 0.0f;
      if (coco_gpu_timer_stop(w, stage, rank, &ms)) die("timer: %s%s", coco_last_error(ctx), "");
      if (coco_gpu_synchronize(ctx)) die("timed run: %s%s", coco_last_error(ctx), "");
      elapsed[(size_t)g] = ms;
    };
    std::vector<std::thread> threads;
    for (int g = 0; g < ranks; ++g) threads.emplace_back(rank_main, g);
    for (std::thread &t : threads) t.join();
    for (int e : group) {
      double slowest = 0.0;
      for (int g = 0; g < ranks; ++g)
        if (g / world == entries[e].stage && elapsed[(size_t)g] > slowest) slowest = elapsed[(size_t)g];
      time_us[(size_t)e] = slowest * 1000.0 / (double)iters;
    }
  }

  printf("# coconet-ir benchmark: world %ld x %d stage(s) on devices", world, stages);
  for (int d : devices) printf(" %d", d);
  printf("; warmup %ld, iters %ld\n", warmup, iters);
  printf("# time: mean of one call on the slowest rank (cudaEvents on stream 0)%s\n",
         stages > 1 ? "; a pipeline's stages run together" : "");
  printf("# bytes: nccl-tests size of the entry's collectives; busbw = bytes a rank sends / time\n");
  printf("#\n");
  printf("# %-28s %14s %12s %12s %12s\n", "entry", "bytes", "time(us)", "algbw(GB/s)",
         "busbw(GB/s)");
  for (int e = 0; e < entry_count; ++e) {
    const double t = time_us[(size_t)e];
    const double algbw = t > 0 ? (double)entries[e].bytes / t / 1e3 : 0.0;
    const double busbw = t > 0 ? (double)entries[e].bus_bytes / t / 1e3 : 0.0;
    printf("  %-28s %14llu %12.2f %12.2f %12.2f\n", entries[e].name, entries[e].bytes, t, algbw,
           busbw);
  }
  for (int g = 0; g < ranks; ++g) {
    coco_gpu_bind(w, g / (int)world, g % (int)world);
    for (std::vector<void *> &args : buffers[(size_t)g])
      for (void *p : args) cudaFree(p);
  }
  coco_gpu_destroy(w);
  return 0;
}

}  // namespace coco_bench
