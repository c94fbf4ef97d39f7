// coco_emu_harness.h — the emulation's harness (docs/gpu/emulation.md): create a world
// of ranks, hand out their contexts, synchronize, read the statistics.
// g++ only. The emulation build compiles it once per flag set into an object
// file that every library built from an emitted .cu links
// (coconet_ir.backend.emu.build.harness_object); it includes coco_emu.h, the
// emulator itself, which is compiled only here, and coco_runtime.h for
// coco_context. extern "C", weak, exported by each such library.
#pragma once

#ifdef __CUDACC__
#error "coco_emu_harness.h drives the CPU emulation (g++); nvcc's is coco_gpu_harness.h"
#endif

#include "coco_emu.h"
#include "coco_runtime.h"

static_assert(COCO_EMU_STREAMS == COCO_MAX_STREAMS, "one stream count");

#define COCO_EMU_EXPORT extern "C" __attribute__((weak, visibility("default")))

// A world of `num_stages` stages of `world` ranks each (world <= COCO_MAX_RANKS),
// with `symmetric_bytes` of symmetric workspace and `signal_slots` signal slots
// per rank (both zeroed). NULL on a bad request (the reason on stderr).
COCO_EMU_EXPORT coco_emu_world *coco_emu_create(int world, int num_stages, size_t symmetric_bytes,
                                                size_t signal_slots) {
  if (world < 1 || world > COCO_MAX_RANKS || num_stages < 1) {
    fprintf(stderr, "coco-emu: error: a world needs 1..%d ranks per stage and >= 1 stage, got %d "
                    "ranks and %d stages\n", COCO_MAX_RANKS, world, num_stages);
    return nullptr;
  }
  auto *w = new coco_emu_world();
  w->world = world;
  w->num_stages = num_stages;
  w->ranks = world * num_stages;
  w->symmetric_bytes = symmetric_bytes;
  w->signal_slots = signal_slots;
  const size_t R = (size_t)w->ranks, S = COCO_EMU_STREAMS;
  w->launches.reset(new std::atomic<uint64_t>[R * S]());
  w->nccl_calls.reset(new std::atomic<uint64_t>[R * S]());
  w->gemms.reset(new std::atomic<uint64_t>[R * S]());
  w->bytes.reset(new std::atomic<uint64_t>[R * R * S]());
  w->stream_events.reset(new coco_emu::stream_event[coco_emu::STREAM_EVENT_CAPACITY]);
  static const char *labels[] = {"stage", "pipeline"};
  for (int s = 0; s <= num_stages; ++s) {
    auto g = std::make_unique<coco_emu::comm_group>();
    g->world = w;
    g->label = labels[s == num_stages];
    if (s < num_stages)
      for (int r = 0; r < world; ++r) g->global.push_back(s * world + r);
    else
      for (int r = 0; r < w->ranks; ++r) g->global.push_back(r);
    w->groups.push_back(std::move(g));
  }
  for (int g = 0; g < w->ranks; ++g) {
    size_t sym = (symmetric_bytes + 255) / 256 * 256;
    char *base = static_cast<char *>(aligned_alloc(256, sym ? sym : 256));
    std::memset(base, 0, sym ? sym : 256);
    w->symmetric.push_back(base);
    size_t pad_bytes = (signal_slots * sizeof(uint64_t) + 255) / 256 * 256;
    uint64_t *pad = static_cast<uint64_t *>(aligned_alloc(256, pad_bytes ? pad_bytes : 256));
    std::memset(pad, 0, pad_bytes ? pad_bytes : 256);
    w->pads.push_back(pad);
  }
  for (int g = 0; g < w->ranks; ++g) {
    const int stage = g / world, rank = g % world;
    auto *ctx = new coco_context();
    std::memset(ctx, 0, sizeof *ctx);
    ctx->rank = rank;
    ctx->world = world;
    ctx->stage = stage;
    ctx->num_stages = num_stages;
    for (int i = 0; i < 2; ++i) {
      auto comm = std::make_unique<ncclComm>();
      comm->group = i == 0 ? w->groups[stage].get() : w->groups[num_stages].get();
      comm->rank = i == 0 ? rank : g;
      comm->send_seq.assign(comm->group->size(), 0);
      comm->recv_seq.assign(comm->group->size(), 0);
      (i == 0 ? ctx->comm : ctx->pipeline_comm) = comm.get();
      w->comms.push_back(std::move(comm));
    }
    for (int s = 0; s < COCO_MAX_STREAMS; ++s) {
      auto stream = std::make_unique<CUstream_st>();
      stream->world = w;
      stream->stage = stage;
      stream->rank = rank;
      stream->global = g;
      stream->index = s;
      ctx->streams[s] = stream.get();
      w->streams.push_back(std::move(stream));
    }
    for (int e = 0; e < COCO_MAX_EVENTS; ++e) ctx->events[e] = new CUevent_st();
    auto blas = std::make_unique<cublasContext>();
    blas->stream = ctx->streams[0];
    ctx->cublas = blas.get();
    w->blas.push_back(std::move(blas));
    for (int p = 0; p < world; ++p) {
      ctx->symmetric[p] = w->symmetric[stage * world + p];
      ctx->signals[p] = w->pads[stage * world + p];
    }
    ctx->symmetric_bytes = symmetric_bytes;
    ctx->signal_slots = signal_slots;
    ctx->sm_count = COCO_EMU_MAX_BLOCKS;
    w->contexts.push_back(ctx);
  }
  for (auto &stream : w->streams) stream->start();
  return w;
}

// Rank `rank` of stage `stage`'s context; NULL if out of range.
COCO_EMU_EXPORT coco_context *coco_emu_context(coco_emu_world *w, int stage, int rank) {
  if (!w || stage < 0 || stage >= w->num_stages || rank < 0 || rank >= w->world) return nullptr;
  return w->contexts[(size_t)stage * w->world + rank];
}

// Wait until every stream of the context is idle; 0.
COCO_EMU_EXPORT int coco_emu_synchronize(coco_context *ctx) {
  for (int s = 0; s < COCO_MAX_STREAMS; ++s) ctx->streams[s]->synchronize();
  return 0;
}

COCO_EMU_EXPORT void coco_emu_stats_reset(coco_emu_world *w) {
  const size_t R = (size_t)w->ranks, S = COCO_EMU_STREAMS;
  for (size_t i = 0; i < R * S; ++i) w->launches[i] = w->nccl_calls[i] = w->gemms[i] = 0;
  for (size_t i = 0; i < R * R * S; ++i) w->bytes[i] = 0;
  std::lock_guard<std::mutex> lock(w->names_mutex);
  w->kernel_launches.clear();
  w->timelines.clear();
  w->stream_event_count = 0;
}

// The statistics as JSON (docs/gpu/emulation.md) into buf (NUL-terminated, cut at
// cap); returns the full length, like snprintf.
COCO_EMU_EXPORT size_t coco_emu_stats_json(coco_emu_world *w, char *buf, size_t cap) {
  const int R = w->ranks, S = COCO_EMU_STREAMS;
  std::string out;
  char num[32];
  auto per_rank_stream = [&](const char *key, std::atomic<uint64_t> *v) {
    out += "\"";
    out += key;
    out += "\": [";
    for (int g = 0; g < R; ++g) {
      out += g ? ", [" : "[";
      for (int s = 0; s < S; ++s) {
        snprintf(num, sizeof num, s ? ", %llu" : "%llu", (unsigned long long)v[(size_t)g * S + s].load());
        out += num;
      }
      out += "]";
    }
    out += "], ";
  };
  snprintf(num, sizeof num, "%d", w->world);
  out += "{\"world\": ";
  out += num;
  snprintf(num, sizeof num, "%d", w->num_stages);
  out += ", \"num_stages\": ";
  out += num;
  snprintf(num, sizeof num, "%d", S);
  out += ", \"streams\": ";
  out += num;
  out += ", ";
  per_rank_stream("launches", w->launches.get());
  per_rank_stream("nccl_calls", w->nccl_calls.get());
  per_rank_stream("gemms", w->gemms.get());
  out += "\"bytes\": [";
  for (int src = 0; src < R; ++src) {
    out += src ? ", [" : "[";
    for (int dst = 0; dst < R; ++dst) {
      out += dst ? ", [" : "[";
      for (int s = 0; s < S; ++s) {
        snprintf(num, sizeof num, s ? ", %llu" : "%llu",
                 (unsigned long long)w->byte_counter(src, dst, s).load());
        out += num;
      }
      out += "]";
    }
    out += "]";
  }
  out += "], \"kernels\": {";
  {
    std::lock_guard<std::mutex> lock(w->names_mutex);
    bool first = true;
    for (auto &[name, count] : w->kernel_launches) {
      snprintf(num, sizeof num, "%llu", (unsigned long long)count);
      out += first ? "\"" : ", \"";
      out += name;  // C identifiers: nothing to escape
      out += "\": ";
      out += num;
      first = false;
    }
  }
  out += "}, \"timeline\": [";
  {
    std::lock_guard<std::mutex> lock(w->names_mutex);
    bool first = true;
    for (auto &t : w->timelines) {
      char entry[256];
      out += first ? "{\"kernel\": \"" : ", {\"kernel\": \"";
      out += t.kernel;  // a C identifier: nothing to escape
      snprintf(entry, sizeof entry,
               "\", \"rank\": %d, \"tiles\": %llu, \"first_tile\": %lld, "
               "\"last_tile\": %lld, \"remote_stores\": %llu, \"first_remote_store\": %lld, "
               "\"last_remote_store\": %lld}",
               t.rank, (unsigned long long)t.tiles,
               (long long)t.first_tile, (long long)t.last_tile,
               (unsigned long long)t.remote_stores,
               t.remote_stores ? (long long)t.first_remote_store : -1LL,
               t.remote_stores ? (long long)t.last_remote_store : -1LL);
      out += entry;
      first = false;
    }
  }
  out += "], \"stream_events\": [";
  const size_t events =
      std::min(w->stream_event_count.load(), coco_emu::STREAM_EVENT_CAPACITY);
  for (size_t i = 0; i < events; ++i) {
    const coco_emu::stream_event &e = w->stream_events[i];
    char entry[192];
    snprintf(entry, sizeof entry,
             "%s{\"rank\": %d, \"stream\": %d, \"kind\": \"%s\", \"peer\": %d, "
             "\"start\": %llu, \"end\": %llu}",
             i ? ", " : "", e.rank, e.stream, e.kind, e.peer, (unsigned long long)e.start,
             (unsigned long long)e.end);
    out += entry;
  }
  out += "]}";
  if (buf && cap) {
    size_t n = std::min(cap - 1, out.size());
    std::memcpy(buf, out.data(), n);
    buf[n] = 0;
  }
  return out.size();
}

// Synchronize every rank, stop the stream workers, free everything.
COCO_EMU_EXPORT void coco_emu_destroy(coco_emu_world *w) {
  if (!w) return;
  for (auto &stream : w->streams) stream->synchronize();
  for (auto &stream : w->streams) stream->shutdown();
  for (auto *ctx : w->contexts) {
    for (int e = 0; e < COCO_MAX_EVENTS; ++e) delete ctx->events[e];
    delete ctx;
  }
  for (char *p : w->symmetric) free(p);
  for (uint64_t *p : w->pads) free(p);
  delete w;
}
