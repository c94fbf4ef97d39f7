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

// The emitted module's ranks per node (docs/gpu/device.md, "Several nodes"),
// defined by the printed CUDA C; a library without it is on one node.
extern "C" __attribute__((weak)) int coco_ranks_per_node(void);

namespace coco_emu {

// A world's shared parts: statistics and communicators (the ranks of every
// stage, then the pipeline's: every rank; then, on several nodes, each
// node's ranks and each index's ranks across the nodes, stage by stage).
inline coco_emu_world *new_world(int world, int num_stages, size_t symmetric_bytes,
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
  const int per_node = coco_ranks_per_node ? coco_ranks_per_node() : world;
  w->ranks_per_node = per_node > 0 && per_node < world && world % per_node == 0 ? per_node : world;
  if (w->ranks_per_node < world) {
    const int G = w->ranks_per_node, nodes = world / G;
    for (int s = 0; s < num_stages; ++s) {
      for (int k = 0; k < nodes; ++k) {  // node k of stage s
        auto g = std::make_unique<coco_emu::comm_group>();
        g->world = w;
        g->label = "node";
        for (int i = 0; i < G; ++i) g->global.push_back(s * world + k * G + i);
        w->groups.push_back(std::move(g));
      }
      for (int i = 0; i < G; ++i) {  // index i of every node of stage s
        auto g = std::make_unique<coco_emu::comm_group>();
        g->world = w;
        g->label = "across";
        for (int k = 0; k < nodes; ++k) g->global.push_back(s * world + k * G + i);
        w->groups.push_back(std::move(g));
      }
    }
  }
  w->contexts.assign(w->ranks, nullptr);
  return w;
}

// Global rank g's node group and across group (several nodes only).
inline coco_emu::comm_group *node_group(coco_emu_world *w, int g) {
  const int G = w->ranks_per_node, nodes = w->world / G, per_stage = nodes + G;
  const int stage = g / w->world, rank = g % w->world;
  return w->groups[w->num_stages + 1 + stage * per_stage + rank / G].get();
}
inline coco_emu::comm_group *across_group(coco_emu_world *w, int g) {
  const int G = w->ranks_per_node, nodes = w->world / G, per_stage = nodes + G;
  const int stage = g / w->world, rank = g % w->world;
  return w->groups[w->num_stages + 1 + stage * per_stage + nodes + rank % G].get();
}

// The context of global rank `g`, its communicators, streams (started),
// events and cuBLAS handle; its peers' workspaces and pads are w->symmetric
// and w->pads.
inline void add_rank(coco_emu_world *w, int g) {
  const int world = w->world, num_stages = w->num_stages;
  const int stage = g / world, rank = g % world;
  auto *ctx = new coco_context();
  std::memset(ctx, 0, sizeof *ctx);
  ctx->rank = rank;
  ctx->world = world;
  ctx->stage = stage;
  ctx->num_stages = num_stages;
  auto make_comm = [&](coco_emu::comm_group *group, int comm_rank) {
    auto comm = std::make_unique<ncclComm>();
    comm->group = group;
    comm->rank = comm_rank;
    comm->send_seq.assign(group->size(), 0);
    comm->recv_seq.assign(group->size(), 0);
    ncclComm *made = comm.get();
    w->comms.push_back(std::move(comm));
    return made;
  };
  ctx->comm = make_comm(w->groups[stage].get(), rank);
  ctx->pipeline_comm = make_comm(w->groups[num_stages].get(), g);
  ctx->ranks_per_node = w->ranks_per_node;
  if (w->ranks_per_node < world) {
    const int G = w->ranks_per_node;
    ctx->node_comm = make_comm(node_group(w, g), rank % G);
    ctx->cross_comm = make_comm(across_group(w, g), rank / G);
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
  // No peer memory across nodes: a kernel that reached for it would fault
  // (the lowering refuses such programs; docs/gpu/device.md, "Several nodes").
  const int node = rank / w->ranks_per_node;
  for (int p = 0; p < world; ++p) {
    const bool reachable = p / w->ranks_per_node == node;
    ctx->symmetric[p] = reachable ? w->symmetric[stage * world + p] : nullptr;
    ctx->signals[p] = reachable ? w->pads[stage * world + p] : nullptr;
  }
  ctx->symmetric_bytes = w->symmetric_bytes;
  ctx->signal_slots = w->signal_slots;
  ctx->sm_count = COCO_EMU_MAX_BLOCKS;
  w->contexts[g] = ctx;
  for (int s = 0; s < COCO_MAX_STREAMS; ++s) ctx->streams[s]->start();
}

// Bytes of a rank's segment before its pad, and of its pad.
inline size_t pad_offset() { return PAGE_BYTES; }
inline size_t pad_bytes(size_t signal_slots) {
  return round_to_page(std::max<size_t>(signal_slots, 1) * sizeof(uint64_t));
}

}  // namespace coco_emu

// A world of `num_stages` stages of `world` ranks each (world <= COCO_MAX_RANKS),
// every rank a thread of this process, with `symmetric_bytes` of symmetric
// workspace and `signal_slots` signal slots per rank (both zeroed). NULL on a
// bad request (the reason on stderr).
COCO_EMU_EXPORT coco_emu_world *coco_emu_create(int world, int num_stages, size_t symmetric_bytes,
                                                size_t signal_slots) {
  coco_emu_world *w = coco_emu::new_world(world, num_stages, symmetric_bytes, signal_slots);
  if (!w) return nullptr;
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
  for (int g = 0; g < w->ranks; ++g) coco_emu::add_rank(w, g);
  return w;
}

// One rank of a world whose ranks are processes (docs/gpu/emulation.md,
// "Multi-process mode"): global rank `global` (stage * world + rank) of
// `num_stages` stages of `world` ranks. Every process of the world calls it
// with the same `key` (letters, digits, '_' and '-'; new for each world: the
// names of its shared memory derive from it) and sizes; it returns when every
// rank has mapped every other's workspace and pad, or ends the process
// (COCO_EMU_TIMEOUT) naming the rank that never came. NULL on a bad request.
COCO_EMU_EXPORT coco_emu_world *coco_emu_create_rank(const char *key, int global, int world,
                                                     int num_stages, size_t symmetric_bytes,
                                                     size_t signal_slots) {
  using namespace coco_emu;
  if (!key || !*key || strlen(key) > 64 || strspn(key, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLM"
                                                       "NOPQRSTUVWXYZ0123456789_-") != strlen(key)) {
    fprintf(stderr, "coco-emu: error: a world's key is 1..64 letters, digits, '_' or '-', got "
                    "'%s'\n", key ? key : "(null)");
    return nullptr;
  }
  coco_emu_world *w = new_world(world, num_stages, symmetric_bytes, signal_slots);
  if (!w) return nullptr;
  if (global < 0 || global >= w->ranks) {
    fprintf(stderr, "coco-emu: error: global rank %d is not in a world of %d ranks\n", global,
            w->ranks);
    delete w;
    return nullptr;
  }
  auto *p = new process_world();
  p->prefix = std::string("/coco-emu-") + key;
  p->global = global;
  p->world = world;
  p->ranks = w->ranks;
  p->segments.assign(w->ranks, nullptr);
  p->segment_bytes.assign(w->ranks, 0);
  p->headers.assign(w->ranks, nullptr);
  w->process = p;
  {
    std::lock_guard<std::mutex> lock(process_worlds().m);
    process_worlds().worlds.insert(p);
  }
  at_fatal() = process_at_fatal;
  const size_t pads = pad_bytes(signal_slots), total = pad_offset() + pads + round_to_page(std::max<size_t>(symmetric_bytes, 1));
  shared_segment own = make_segment(segment_name(*p, global), total);
  auto *h = new (own.base) rank_header();
  h->magic = SEGMENT_MAGIC;
  h->pid = getpid();
  h->global = global;
  h->world = world;
  h->num_stages = num_stages;
  h->symmetric_bytes = symmetric_bytes;
  h->signal_slots = signal_slots;
  p->segments[global] = own.base;
  p->segment_bytes[global] = total;
  p->headers[global] = h;
  h->ready.store(1, std::memory_order_release);
  for (int g = 0; g < w->ranks; ++g) {
    if (g == global) continue;
    const std::string name = segment_name(*p, g);
    // Waiting for g, check every rank mapped so far: one that failed (and
    // removed the world's names) ends the wait with its name.
    shared_segment peer = open_segment(
        *p, name, -1, sizeof(rank_header),
        [](char *head) {
          return reinterpret_cast<rank_header *>(head)->ready.load(std::memory_order_acquire) != 0;
        },
        [&](char *head) {
          const rank_header &theirs = *reinterpret_cast<rank_header *>(head);
          if (theirs.magic != SEGMENT_MAGIC || theirs.world != world ||
              theirs.num_stages != num_stages || theirs.symmetric_bytes != symmetric_bytes ||
              theirs.signal_slots != signal_slots)
            fatal(4, "%s: %s made its world of %lld ranks x %lld stages, %llu symmetric bytes, "
                     "%llu signal slots; this rank's is %d x %d, %zu, %zu (one program, one key)",
                  describe_rank(*p, global).c_str(), describe_rank(*p, g).c_str(),
                  (long long)theirs.world, (long long)theirs.num_stages,
                  (unsigned long long)theirs.symmetric_bytes,
                  (unsigned long long)theirs.signal_slots, world, num_stages, symmetric_bytes,
                  signal_slots);
          return total;
        },
        [&] {
          return describe_rank(*p, global) + " waits for " + describe_rank(*p, g) +
                 " to join the world (its shared memory " + name +
                 " is not there: it has not started, or it failed before; see its messages)";
        });
    p->segments[g] = peer.base;
    p->segment_bytes[g] = total;
    p->headers[g] = reinterpret_cast<rank_header *>(peer.base);
  }
  for (int g = 0; g < w->ranks; ++g) {
    w->pads.push_back(reinterpret_cast<uint64_t *>(p->segments[g] + pad_offset()));
    w->symmetric.push_back(p->segments[g] + pad_offset() + pads);
  }
  // Every rank has mapped every segment: the names can go (a process that
  // ends later leaves nothing behind in /dev/shm).
  h->attached.store(1, std::memory_order_release);
  for (int g = 0; g < w->ranks; ++g)
    if (g != global)
      wait_across(*p, g, [&] { return p->headers[g]->attached.load(std::memory_order_acquire) != 0; },
                  [&] { return describe_rank(*p, global) + " waits for " + describe_rank(*p, g) + " to map the world"; });
  shm_unlink(own.name.c_str());
  add_rank(w, global);
  return w;
}

// A rank of a world of processes whose call failed (its entry returned an
// error): mark it failed, so that its peers' waits end naming it instead of
// at the timeout, and remove the world's shared-memory names. No-op for a
// world of threads.
COCO_EMU_EXPORT void coco_emu_fail(coco_emu_world *w) {
  if (w && w->process) coco_emu::process_failed(*w->process);
}

// Rank `rank` of stage `stage`'s context; NULL if out of range.
COCO_EMU_EXPORT coco_context *coco_emu_context(coco_emu_world *w, int stage, int rank) {
  if (!w || stage < 0 || stage >= w->num_stages || rank < 0 || rank >= w->world) return nullptr;
  return w->contexts[(size_t)stage * w->world + rank];  // null: another process's rank
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
    if (!ctx) continue;
    for (int e = 0; e < COCO_MAX_EVENTS; ++e) delete ctx->events[e];
    delete ctx;
  }
  if (coco_emu::process_world *p = w->process) {
    p->mine().done.store(1, std::memory_order_release);
    for (int g = 0; g < p->ranks; ++g)
      if (p->segments[g]) munmap(p->segments[g], p->segment_bytes[g]);
    {
      std::lock_guard<std::mutex> lock(coco_emu::process_worlds().m);
      coco_emu::process_worlds().worlds.erase(p);
    }
    delete p;
  } else {
    for (char *p : w->symmetric) free(p);
    for (uint64_t *p : w->pads) free(p);
  }
  delete w;
}
