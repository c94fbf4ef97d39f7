// coco_emu.h — the CPU emulation of what coco_runtime.h offers (docs/gpu/emulation.md).
//
// g++ -std=c++20 -pthread. The ranks of a world are threads of one process;
// device memory is host memory. Every stream is a worker thread with a FIFO
// (the streams of a rank run concurrently); a kernel launch runs every block
// as an OS thread, its threads as fibers taking turns (every thread an OS
// thread under AddressSanitizer), so a thread spinning on a flag set by another
// block, stream or rank makes progress. NCCL calls
// rendezvous in the stream workers of the ranks of a communicator; cuBLAS
// calls run in the stream worker. Polls are atomics (std::atomic_ref).
//
// This file defines what coco_emu_api.h declares. It is compiled once, into
// the harness object (coco_emu_harness.h includes it), and never into a
// program's own build.
#pragma once

#ifdef __CUDACC__
#error "coco_emu.h is the CPU emulation; nvcc uses the real CUDA headers"
#endif

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

// After the standard headers: coco_emu_api.h defines CUDA's qualifiers as macros.
#include "coco_emu_api.h"

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer's runtime defines these; no header declares them.
extern "C" void AnnotateIgnoreWritesBegin(const char *file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char *file, int line);
extern "C" void __tsan_func_exit(void);
#endif

// ===========================================================================
// The emulator
// ===========================================================================

struct coco_context;
struct coco_emu_world;

namespace coco_emu {

inline double timeout_seconds() {
  static const double seconds = [] {
    const char *text = getenv("COCO_EMU_TIMEOUT");
    double value = text ? atof(text) : 0.0;
    return value > 0 ? value : 60.0;
  }();
  return seconds;
}

inline size_t thread_stack_bytes() {
  static const size_t bytes = [] {
    const char *text = getenv("COCO_EMU_STACK_KB");
    long kib = text ? atol(text) : 0;
    return (size_t)(kib > 0 ? kib : 256) * 1024;
  }();
  return bytes;
}

// What a rank of a multi-process world does before `fatal` ends its process:
// mark itself failed and remove the shared-memory messages it made.
inline void (*&at_fatal())() {
  static void (*hook)() = nullptr;
  return hook;
}

[[noreturn]] inline void fatal(int code, const char *format, ...) {
  char text[2048];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof text, format, args);
  va_end(args);
  fprintf(stderr, "coco-emu: error: %s\n", text);
  fflush(stderr);
  if (void (*hook)() = at_fatal()) hook();
  _exit(code);
}

using clock = std::chrono::steady_clock;

// Seconds on the steady clock (a poller's start; coco_emu_api.h has no <chrono>).
inline double now_seconds() {
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

// What the current thread runs: set in kernel threads and stream workers.
struct stream_state;
struct activity {
  stream_state *stream = nullptr;
  const char *name = "";
};
inline thread_local activity current;

std::string describe_current();

// Wait on `cv` (with `lock` held) until `ready()`, or end the run with
// `what()`'s text after the watchdog's timeout.
template <class Ready, class What>
void wait_or_die(std::unique_lock<std::mutex> &lock, std::condition_variable &cv, Ready ready,
                 What what) {
  auto deadline = clock::now() + std::chrono::duration<double>(timeout_seconds());
  while (!ready()) {
    if (cv.wait_until(lock, deadline) == std::cv_status::timeout && !ready()) {
      std::string text = what();
      fatal(3, "watchdog: %s: %s waited more than %g s: %s", describe_current().c_str(),
            current.name, timeout_seconds(), text.c_str());
    }
  }
}

// ---------------------------------------------------------------------------
// Streams
// ---------------------------------------------------------------------------

struct stream_state {
  coco_emu_world *world = nullptr;
  int stage = 0, rank = 0, global = 0, index = 0;
  std::mutex m;
  std::condition_variable work, idle;
  std::deque<std::function<void()>> queue;
  bool busy = false, stop = false;
  std::thread worker;
  // What the fibers of a block of this stream's launches run on, by block:
  // made once and reused launch after launch (a launch begins only after the
  // stream's previous one ended). Mapping stacks for every launch, and under
  // ThreadSanitizer making a fiber, cost as much as starting a thread; what a
  // fiber of ThreadSanitizer carries over from its last launch happened
  // before anyway (run_block_fibers).
  struct fiber_slots {
    void *stacks = nullptr;  // `count` stacks of thread_stack_bytes()
    size_t count = 0;
#if defined(__SANITIZE_THREAD__)
    std::vector<void *> tsan;  // ThreadSanitizer's fiber of each thread
#endif
  };
  std::vector<fiber_slots> fiber_pool;
  fiber_slots &fibers_of_block(size_t block, size_t threads);

  void start() {
    worker = std::thread([this] { run(); });
  }
  void run() {
    current.stream = this;
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(m);
        work.wait(lock, [&] { return stop || !queue.empty(); });
        if (queue.empty()) return;
        task = std::move(queue.front());
        queue.pop_front();
        busy = true;
      }
      current.name = "stream work";
      task();
      {
        std::lock_guard<std::mutex> lock(m);
        busy = false;
        if (queue.empty()) idle.notify_all();
      }
    }
  }
  void enqueue(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(m);
    queue.push_back(std::move(task));
    work.notify_one();
  }
  void synchronize() {
    std::unique_lock<std::mutex> lock(m);
    idle.wait(lock, [&] { return queue.empty() && !busy; });
  }
  void shutdown() {
    {
      std::lock_guard<std::mutex> lock(m);
      stop = true;
      work.notify_all();
    }
    if (worker.joinable()) worker.join();
    release_fibers();
  }
  void release_fibers();
};

}  // namespace coco_emu

struct CUstream_st : coco_emu::stream_state {};

struct CUevent_st {
  // Record #k of an event completes when the stream it was recorded on gets
  // there; a wait issued after record #k waits for exactly that record (CUDA's
  // semantics: re-recording an event does not move earlier waits). Records on
  // different streams may complete out of order: `completed` is the prefix of
  // records all complete, `later` the ones complete beyond it.
  struct state {
    std::mutex m;
    std::condition_variable cv;
    uint64_t completed = 0;
    std::set<uint64_t> later;
    void complete(uint64_t record) {
      if (record <= completed) return;
      later.insert(record);
      while (!later.empty() && *later.begin() == completed + 1) {
        completed += 1;
        later.erase(later.begin());
      }
    }
    bool done(uint64_t record) const { return record <= completed || later.count(record); }
  };
  std::shared_ptr<state> s = std::make_shared<state>();
  std::atomic<uint64_t> recorded{0};
};

// ---------------------------------------------------------------------------
// The world: ranks, communicators, statistics
// ---------------------------------------------------------------------------

namespace coco_emu {

struct comm_group;

struct collective {
  int kind = 0;  // 0 all_reduce, 1 reduce_scatter, 2 all_gather, 3 broadcast
  const void *send = nullptr;
  void *recv = nullptr;
  size_t count = 0;
  ncclDataType_t type = ncclFloat;
  ncclRedOp_t op = ncclSum;
  int root = 0;
  CUstream_st *stream = nullptr;
};

struct collective_slot {
  std::vector<collective> entries;
  int arrived = 0, departed = 0;
  bool done = false;
};

struct p2p_slot {
  const void *send = nullptr;
  size_t bytes = 0;
  CUstream_st *sender = nullptr;
  bool posted = false, done = false;
  int finished = 0;
};

struct comm_group {
  coco_emu_world *world = nullptr;
  const char *label = "";
  std::vector<int> global;  // comm rank -> global rank
  std::mutex m;
  std::condition_variable cv;
  std::map<uint64_t, collective_slot> collectives;
  std::map<std::tuple<int, int, uint64_t>, p2p_slot> p2p;  // (src, dst, seq)
  int size() const { return (int)global.size(); }
};

}  // namespace coco_emu

struct ncclComm {
  coco_emu::comm_group *group = nullptr;
  int rank = 0;
  std::atomic<uint64_t> collective_seq{0};
  std::vector<uint64_t> send_seq, recv_seq;
  std::mutex seq_mutex;
};

struct cublasContext {
  cudaStream_t stream = nullptr;
};


#define COCO_EMU_STREAMS 4

namespace coco_emu {

// The timeline of one kernel launch on one rank (docs/gpu/emulation.md): the
// sequence numbers, on one process-wide counter, of its blocks' "tile
// computed" marks and of their stores into peers (`count_peer_bytes`, issued
// right after a tile's stores). Two events of one thread are numbered in
// program order, so "first remote store < last tile computed" is a fact
// about the run, not about clocks. Kept only for launches that mark tiles.
struct timeline_record {
  int rank = 0;  // global: stage * world + rank
  std::string kernel;
  uint64_t tiles = 0, first_tile = UINT64_MAX, last_tile = 0;
  uint64_t remote_stores = 0, first_remote_store = UINT64_MAX, last_remote_store = 0;
};

// What the launch's threads update while it runs: relaxed atomics, which
// order nothing, so ThreadSanitizer sees no synchronization through them.
struct launch_timeline {
  std::atomic<uint64_t> tiles{0}, first_tile{UINT64_MAX}, last_tile{0};
  std::atomic<uint64_t> remote_stores{0}, first_remote_store{UINT64_MAX},
      last_remote_store{0};

  timeline_record record(int rank, const char *kernel) const {
    auto get = [](const std::atomic<uint64_t> &v) { return v.load(std::memory_order_relaxed); };
    return {rank,           kernel,          get(tiles),
            get(first_tile), get(last_tile), get(remote_stores),
            get(first_remote_store), get(last_remote_store)};
  }
};

inline thread_local launch_timeline *current_launch = nullptr;  // in kernel threads

// A stream-level event of the timeline: one GEMM or copy a stream worker ran,
// with the numbers (same counter as the tiles') of its start and its end
// (docs/gpu/emulation.md, "Timeline"). `peer` is the rank a peer copy stored into
// (global), -1 otherwise.
struct stream_event {
  int rank = 0, stream = 0, peer = -1;  // rank: global
  const char *kind = "";
  uint64_t start = 0, end = 0;
};
constexpr size_t STREAM_EVENT_CAPACITY = 1 << 16;  // more are counted, not kept

// One clock per world: the process's, or in a world of processes rank 0's
// (below, "A rank per process"), so that events of different processes are
// numbered in an order the run had.
std::atomic<uint64_t> &timeline_clock();

struct process_world;  // a rank per process: below, "A rank per process"

}  // namespace coco_emu

struct coco_emu_world {
  int world = 0;       // ranks per stage
  int num_stages = 0;  // stages
  int ranks = 0;       // world * num_stages; global rank = stage * world + rank
  int ranks_per_node = 0;  // world on one node (coco_ranks_per_node())
  size_t symmetric_bytes = 0, signal_slots = 0;
  std::vector<coco_context *> contexts;                  // by global rank
  std::vector<std::unique_ptr<CUstream_st>> streams;    // global * COCO_EMU_STREAMS + s
  std::vector<std::unique_ptr<coco_emu::comm_group>> groups;  // stage comms, then pipeline
  std::vector<std::unique_ptr<ncclComm>> comms;          // global * 2 + {0 stage, 1 pipeline}
  std::vector<std::unique_ptr<cublasContext>> blas;      // by global rank
  std::vector<char *> symmetric;                         // by global rank
  std::vector<uint64_t *> pads;                          // by global rank
  // Statistics (docs/gpu/emulation.md).
  std::unique_ptr<std::atomic<uint64_t>[]> launches;    // [global][stream]
  std::unique_ptr<std::atomic<uint64_t>[]> nccl_calls;  // [global][stream]
  std::unique_ptr<std::atomic<uint64_t>[]> gemms;       // [global][stream]
  std::unique_ptr<std::atomic<uint64_t>[]> bytes;       // [src][dst][stream]
  std::mutex names_mutex;                                // guards the two below
  std::map<std::string, uint64_t> kernel_launches;      // kernel name -> launches
  std::vector<coco_emu::timeline_record> timelines;     // launches that marked tiles
  // Stream-level events, each written by the worker that ran it into the slot
  // a relaxed counter gives it (no lock: nothing to hide races from TSan).
  std::unique_ptr<coco_emu::stream_event[]> stream_events;
  std::atomic<size_t> stream_event_count{0};
  // Set when this process holds one rank of a world of processes
  // (coco_emu_create_rank); null when every rank is a thread of this one.
  coco_emu::process_world *process = nullptr;

  std::atomic<uint64_t> &byte_counter(int src, int dst, int stream) {
    return bytes[((size_t)src * ranks + dst) * COCO_EMU_STREAMS + stream];
  }
};

namespace coco_emu {

inline std::string describe_current() {
  char text[128];
  stream_state *s = current.stream;
  if (!s) return "host thread";
  snprintf(text, sizeof text, "rank %d of stage %d, stream %d", s->rank, s->stage, s->index);
  return text;
}

inline thread_local cudaError_t last_error = cudaSuccess;
inline cudaError_t set_error(cudaError_t e) {
  if (e != cudaSuccess) last_error = e;
  return e;
}

// ---------------------------------------------------------------------------
// A rank per process (docs/gpu/emulation.md, "Multi-process mode")
// ---------------------------------------------------------------------------
//
// Each process of the world makes one POSIX shared-memory segment,
// /coco-emu-KEY-G (G its global rank): a header, its signal pad, its symmetric
// workspace. It maps every other rank's, so ctx->symmetric[p] and
// ctx->signals[p] point into its peers' memory as on GPUs of one node, and the
// fused kernels run unchanged. NCCL calls meet through messages: a rank posts
// its part of a call as a segment of its own (/coco-emu-KEY-m-...), the others
// map it, take what they need and mark it taken; the poster removes it when
// every reader has. Every wait checks its peers' processes: a rank that exited
// ends the wait with its name, a rank that never comes ends it at the timeout.

constexpr uint64_t SEGMENT_MAGIC = 0x756d652d6f636f63ULL;  // "coco-emu"
constexpr size_t PAGE_BYTES = 4096;

inline size_t round_to_page(size_t n) { return (n + PAGE_BYTES - 1) / PAGE_BYTES * PAGE_BYTES; }

// The first page of a rank's segment.
struct rank_header {
  uint64_t magic;
  int64_t pid, global, world, num_stages;
  uint64_t symmetric_bytes, signal_slots;
  std::atomic<uint64_t> ready;     // 1: the fields above are written
  std::atomic<uint64_t> attached;  // 1: this rank has mapped every other rank's segment
  std::atomic<uint64_t> progress;  // signals raised and block barriers passed in this process
  std::atomic<uint64_t> failed;    // 1: this rank stopped on an error (fatal)
  std::atomic<uint64_t> done;      // 1: this rank ended its world (coco_emu_destroy)
  std::atomic<uint64_t> clock;     // rank 0's: the world's timeline clock
};
static_assert(sizeof(rank_header) <= PAGE_BYTES, "a rank's header fits its page");

// The first bytes of a message segment; its data follows at MESSAGE_DATA.
struct message_header {
  std::atomic<uint64_t> ready;  // 1: the fields below and the data are written
  std::atomic<uint64_t> taken;  // readers done with it
  int64_t kind, type, op, root;
  uint64_t count, bytes;
};
constexpr size_t MESSAGE_DATA = 256;
static_assert(sizeof(message_header) <= MESSAGE_DATA, "a message's header fits before its data");

struct process_world {
  std::string prefix;  // "/coco-emu-KEY"
  int global = 0;      // this process's rank: stage * world + rank
  int world = 0, ranks = 0;
  std::vector<char *> segments;  // by global rank, mapped
  std::vector<size_t> segment_bytes;
  std::vector<rank_header *> headers;

  rank_header &mine() { return *headers[global]; }
};

// The worlds of processes this library holds a rank of, in this process (for
// fatal's clean-up).
struct process_registry {
  std::mutex m;
  std::set<process_world *> worlds;
};
inline process_registry &process_worlds() {
  static process_registry r;
  return r;
}

// The world of processes the current thread (a kernel thread or stream
// worker) works for, or null.
inline process_world *current_process();

inline std::string segment_name(const process_world &p, int global) {
  return p.prefix + "-" + std::to_string(global);
}

inline std::string describe_rank(const process_world &p, int global) {
  char text[64];
  snprintf(text, sizeof text, "rank %d of stage %d", global % p.world, global / p.world);
  return text;
}

// Whether process `pid` has ended (gone, or a zombie its parent has not reaped).
inline bool process_exited(int64_t pid) {
  if (pid <= 0) return false;
  if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) return true;
  char path[64], text[512];
  snprintf(path, sizeof path, "/proc/%lld/stat", (long long)pid);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  const char *end = strrchr(text, ')');  // the state follows the command's name
  return end && end[1] == ' ' && (end[2] == 'Z' || end[2] == 'X');
}

// What is wrong with global rank `g` (or with any rank, for g = -1) that a
// wait on it will never end: "rank 1 of stage 0 (pid 4242) has exited", or "".
// Ranks that exited come first: they are the cause, the failed ones mostly
// its consequence.
inline std::string ranks_gone(const process_world &p, int g = -1) {
  std::string gone;
  for (int pass = 0; pass < 2; ++pass)
    for (int r = 0; r < p.ranks; ++r) {
      if ((g >= 0 && r != g) || r == p.global) continue;
      const rank_header *h = r < (int)p.headers.size() ? p.headers[r] : nullptr;
      if (!h) continue;
      const bool failed = h->failed.load(std::memory_order_acquire) != 0;
      // A rank that ended its world normally is not gone: nobody waits on it.
      const bool done = h->done.load(std::memory_order_acquire) != 0;
      if (pass == 0 ? failed || done || !process_exited(h->pid) : !failed) continue;
      char text[160];
      snprintf(text, sizeof text, "%s%s (pid %lld) %s", gone.empty() ? "" : "; ",
               describe_rank(p, r).c_str(), (long long)h->pid,
               pass == 0 ? "has exited" : "has stopped on an error");
      gone += text;
    }
  return gone;
}

// Poll until `ready()`. Twice a second: a rank the wait depends on (`peer`,
// global; -1 any) that is gone ends the run with its name; after
// COCO_EMU_TIMEOUT seconds the watchdog ends it with `what()`.
template <class Ready, class What>
void wait_across(process_world &p, int peer, Ready ready, What what) {
  const double start = now_seconds();
  double checked = start;
  for (unsigned spins = 0; !ready(); ++spins) {
    if (spins < 64) {
      std::this_thread::yield();
      continue;
    }
    struct timespec ts = {0, 50000};
    nanosleep(&ts, nullptr);
    const double now = now_seconds();
    if (now - checked < 0.5) continue;
    checked = now;
    std::string gone = ranks_gone(p, peer);
    if (!gone.empty())
      fatal(3, "%s: %s: %s", describe_current().c_str(), what().c_str(), gone.c_str());
    if (now - start > timeout_seconds())
      fatal(3, "watchdog: %s: waited more than %g s: %s", describe_current().c_str(),
            timeout_seconds(), what().c_str());
  }
}

inline process_world *current_process() {
  stream_state *s = current.stream;
  return s && s->world ? s->world->process : nullptr;
}

std::atomic<uint64_t> &timeline_clock() {
  static std::atomic<uint64_t> ticks{0};
  process_world *p = current_process();
  return p && p->headers[0] ? p->headers[0]->clock : ticks;
}

// fatal's clean-up in a multi-process world: say this rank failed (its peers'
// waits end with that, not a timeout) and remove the world's shared memory
// that is still named (/dev/shm/coco-emu-KEY-*: its own, and what a rank that
// was killed left): the world is over. Mapped segments stay mapped.
inline void process_failed(process_world &p) {
  if (p.headers[p.global]) p.mine().failed.store(1, std::memory_order_release);
  const std::string prefix = p.prefix.substr(1) + "-";
  if (DIR *dir = opendir("/dev/shm")) {
    while (struct dirent *entry = readdir(dir))
      if (strncmp(entry->d_name, prefix.c_str(), prefix.size()) == 0)
        shm_unlink((std::string("/") + entry->d_name).c_str());
    closedir(dir);
  }
}

inline void process_at_fatal() {
  for (process_world *p : process_worlds().worlds) process_failed(*p);  // no lock: ending
}

// A mapped shared-memory segment: a rank's, or a message.
struct shared_segment {
  std::string name;
  char *base = nullptr;
  size_t bytes = 0;
  message_header *head() const { return reinterpret_cast<message_header *>(base); }
  char *data() const { return base + MESSAGE_DATA; }
};

// Open the segment `name` another process is making: poll until it exists,
// holds `header` bytes and `ready(base)` holds, then map all of it
// (`bytes_of(base)`). `owner`: the rank making it (global).
template <class Ready, class Bytes, class What>
shared_segment open_segment(process_world &p, const std::string &name, int owner, size_t header,
                            Ready ready, Bytes bytes_of, What what) {
  shared_segment s{name};
  void *head = nullptr;
  wait_across(p, owner, [&] {
    if (!head) {
      int fd = shm_open(name.c_str(), O_RDWR, 0600);
      if (fd < 0) return false;
      struct stat st;
      if (fstat(fd, &st) != 0 || (size_t)st.st_size < header) {
        close(fd);
        return false;
      }
      head = mmap(nullptr, header, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      close(fd);
      if (head == MAP_FAILED) fatal(5, "cannot map %s: %s", name.c_str(), strerror(errno));
    }
    return ready(static_cast<char *>(head));
  }, what);
  s.bytes = bytes_of(static_cast<char *>(head));
  munmap(head, header);
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) fatal(5, "%s: %s vanished while opened: %s", describe_current().c_str(), name.c_str(), strerror(errno));
  void *all = mmap(nullptr, s.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (all == MAP_FAILED) fatal(5, "cannot map %s (%zu bytes): %s", name.c_str(), s.bytes, strerror(errno));
  s.base = static_cast<char *>(all);
  return s;
}

// Make a segment of `bytes` (zeroed) named `name`, mapped.
inline shared_segment make_segment(const std::string &name, size_t bytes) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0)
    fatal(5, "cannot make the shared-memory segment %s: %s (a world's key must be new)",
          name.c_str(), strerror(errno));
  if (ftruncate(fd, (off_t)bytes) != 0)
    fatal(5, "cannot size %s to %zu bytes: %s", name.c_str(), bytes, strerror(errno));
  void *base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) fatal(5, "cannot map %s: %s", name.c_str(), strerror(errno));
  return {name, static_cast<char *>(base), bytes};
}

// Post a message: `meta` and `bytes` of `data`, for other ranks to take.
inline shared_segment post_message(const std::string &name, const message_header &meta,
                                   const void *data, size_t bytes) {
  shared_segment m = make_segment(name, MESSAGE_DATA + bytes);
  message_header *h = m.head();
  h->kind = meta.kind;
  h->type = meta.type;
  h->op = meta.op;
  h->root = meta.root;
  h->count = meta.count;
  h->bytes = bytes;
  if (bytes) std::memcpy(m.data(), data, bytes);
  h->ready.store(1, std::memory_order_release);
  return m;
}

// Take the message `name` global rank `owner` posts (waiting for it).
template <class What>
shared_segment take_message(process_world &p, const std::string &name, int owner, What what) {
  return open_segment(
      p, name, owner, MESSAGE_DATA,
      [](char *head) {
        return reinterpret_cast<message_header *>(head)->ready.load(std::memory_order_acquire) != 0;
      },
      [](char *head) { return MESSAGE_DATA + reinterpret_cast<message_header *>(head)->bytes; },
      what);
}

// A reader is done with a message it took.
inline void release_message(shared_segment &m) {
  m.head()->taken.fetch_add(1, std::memory_order_acq_rel);
  munmap(m.base, m.bytes);
  m.base = nullptr;
}

// Wait until `readers` ranks have taken the message this rank posted, then
// remove it. `reader`: the global rank that takes it (-1: several).
template <class What>
void retire_message(process_world &p, shared_segment &m, uint64_t readers, int reader, What what) {
  wait_across(p, reader, [&] { return m.head()->taken.load(std::memory_order_acquire) >= readers; },
              what);
  shm_unlink(m.name.c_str());
  munmap(m.base, m.bytes);
  m.base = nullptr;
}

// ---------------------------------------------------------------------------
// Statistics hooks
// ---------------------------------------------------------------------------

inline void count_bytes(int src, int dst, int stream, uint64_t n, coco_emu_world *w) {
  if (src == dst || n == 0) return;
  w->byte_counter(src, dst, stream).fetch_add(n, std::memory_order_relaxed);
}

// A tile event of the current launch's timeline: its sequence number.
inline void stamp(std::atomic<uint64_t> &count, std::atomic<uint64_t> &first,
                  std::atomic<uint64_t> &last) {
  uint64_t now = timeline_clock().fetch_add(1, std::memory_order_relaxed);
  count.fetch_add(1, std::memory_order_relaxed);
  uint64_t seen = first.load(std::memory_order_relaxed);
  while (now < seen && !first.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
  seen = last.load(std::memory_order_relaxed);
  while (now > seen && !last.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

void count_peer_bytes(int rank, int p, unsigned long long n) {
  stream_state *s = current.stream;
  if (!s || !s->world) return;
  coco_emu_world *w = s->world;
  if (p < 0 || p >= w->world || rank != s->rank)
    fatal(4, "coco::count_peer_bytes: %s, kernel '%s': peer %d out of range (world %d)",
          describe_current().c_str(), current.name, p, w->world);
  count_bytes(s->global, s->stage * w->world + p, s->index, n, w);
  if (launch_timeline *t = current_launch)
    stamp(t->remote_stores, t->first_remote_store, t->last_remote_store);
}

void tile_computed() {
  if (launch_timeline *t = current_launch) stamp(t->tiles, t->first_tile, t->last_tile);
}

// Run `work` (a GEMM or a copy, in stream worker `s`) as a stream event of
// the timeline: its start and end numbered on the timeline's counter.
template <class Work>
void timed(stream_state *s, const char *kind, int peer, Work &&work) {
  uint64_t start = timeline_clock().fetch_add(1, std::memory_order_relaxed);
  work();
  uint64_t end = timeline_clock().fetch_add(1, std::memory_order_relaxed);
  coco_emu_world *w = s->world;
  if (!w) return;
  size_t slot = w->stream_event_count.fetch_add(1, std::memory_order_relaxed);
  if (slot < STREAM_EVENT_CAPACITY)
    w->stream_events[slot] = stream_event{s->global, s->index, peer, kind, start, end};
}

// A copy into a peer's memory (coco::peer_copy): counted as `bytes` from this
// rank to global rank `peer`, and a stream event.
void peer_copy(void *dst, const void *src, size_t bytes, cudaStream_t stream, int peer) {
  stream_state *s = stream;
  if (bytes)
    s->enqueue([=] {
      current.name = "coco::peer_copy";
      timed(s, "peer_copy", peer, [&] { std::memmove(dst, src, bytes); });
      if (s->world) count_bytes(s->global, peer, s->index, bytes, s->world);
    });
}

// ---------------------------------------------------------------------------
// Fibers: a block's threads taking turns on one OS thread
// ---------------------------------------------------------------------------

// By default a launch runs each block on one OS thread whose CUDA threads are
// fibers (ucontext) that take turns: a fiber runs until it waits (at
// `__syncthreads()`, or polling a signal) or returns, then the next one
// runs. Hundreds of OS threads per launch on a few cores spent most of a run
// creating threads and waking them to find nothing to do. ThreadSanitizer is
// told of every fiber and every switch (`__tsan_switch_to_fiber`, without
// synchronization: a block's threads are ordered only by its barrier's atomics
// and what the kernel itself does, as on a GPU, so a missing `__syncthreads()`
// is still a race). Under AddressSanitizer (which would need every stack
// switch announced) and with COCO_EMU_FIBERS=0, every CUDA thread is an OS
// thread, as on a GPU where they run at once.
inline bool use_fibers() {
#if defined(__SANITIZE_ADDRESS__)
  return false;
#else
  static const bool on = [] {
    const char *text = getenv("COCO_EMU_FIBERS");
    return !(text && strcmp(text, "0") == 0);
  }();
  return on;
#endif
}

struct kernel_thread;

// The fibers of one block and their scheduler (`run_block_fibers`). The
// scheduler's bookkeeping that fibers write is relaxed atomics: one OS thread
// runs them all, and ThreadSanitizer, which sees each fiber as a thread of
// its own, must take it neither for a race nor for synchronization.
struct fiber_block {
  const kernel_thread *launch;  // the block's: body, barrier, ids
  ucontext_t scheduler;
  std::vector<ucontext_t> fibers;
  std::unique_ptr<std::atomic<bool>[]> done;
  // 1 + the barrier phase a fiber waits to end; 0: none
  std::unique_ptr<std::atomic<unsigned>[]> barrier_wait;
  std::atomic<size_t> running{0};
  std::atomic<bool> busy{false};  // a fiber did something since the round began
#if defined(__SANITIZE_THREAD__)
  void *tsan_scheduler = nullptr;  // ThreadSanitizer's fiber of the scheduler
  void *const *tsan = nullptr;     // and of each CUDA thread (the stream's)
  char tsan_end = 0;               // released by each fiber, acquired by the scheduler
#endif
};

// Switch from `from` to `to`, telling ThreadSanitizer first (`tsan_to`: its
// fiber of `to`; `sync`: the switch orders what the switching fiber did before
// what `to` does next). The operands are evaluated before, and nothing
// instrumented runs between the two (ThreadSanitizer's rule for
// `__tsan_switch_to_fiber`).
#if defined(__SANITIZE_THREAD__)
#define COCO_EMU_SWITCH_SYNC(from, to, tsan_to, sync)                           \
  do {                                                                          \
    ucontext_t *from_ = (from), *to_ = (to);                                    \
    void *fiber_ = (tsan_to);                                                   \
    __tsan_switch_to_fiber(fiber_, (sync) ? 0 : __tsan_switch_to_fiber_no_sync); \
    swapcontext(from_, to_);                                                    \
  } while (0)
#else
#define COCO_EMU_SWITCH_SYNC(from, to, tsan_to, sync) swapcontext((from), (to))
#endif
#define COCO_EMU_SWITCH(from, to, tsan_to) COCO_EMU_SWITCH_SYNC(from, to, tsan_to, false)

inline thread_local fiber_block *current_fibers = nullptr;

// The scheduler tells the fiber it resumes which CUDA thread it is through the
// OS thread's `threadIdx`. ThreadSanitizer does not record that write: every
// fiber reads the variable, and each finds its own index there whenever it
// runs, but no synchronization orders one fiber's read before the next write.
inline void set_thread_index(uint3 index) {
#if defined(__SANITIZE_THREAD__)
  AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
  threadIdx = index;
  AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
#else
  threadIdx = index;
#endif
}

// Give the block's other fibers a turn. `idle`: the caller's wait saw nothing
// change since its last turn (a round in which every fiber was idle backs off
// as an OS thread's poll does).
inline void fiber_wait(bool idle) {
  fiber_block *b = current_fibers;
  if (!idle) b->busy.store(true, std::memory_order_relaxed);
  COCO_EMU_SWITCH(&b->fibers[b->running.load(std::memory_order_relaxed)], &b->scheduler,
                  b->tsan_scheduler);
}

// ---------------------------------------------------------------------------
// Signals: the poll loop's pause and watchdog
// ---------------------------------------------------------------------------

// Progress anywhere in the process: every signal raised and every block
// barrier passed counts. The watchdog fires only when a wait has seen none for
// COCO_EMU_TIMEOUT seconds — a run stuck, not one slowed down by hundreds of
// emulated threads on a few cores (a wait for a whole stage of a slow peer, in
// a fused kernel with slice reductions, can take longer than the timeout while
// the peer keeps computing). Relaxed: it orders nothing (ThreadSanitizer sees
// no synchronization through it).
inline std::atomic<uint64_t> &progress() {
  static std::atomic<uint64_t> count{0};
  return count;
}

// In a world of processes every rank's counter counts: a wait for a peer that
// is still computing is not stuck.
void note_progress() {
  progress().fetch_add(1, std::memory_order_relaxed);
  if (process_world *p = current_process()) p->mine().progress.fetch_add(1, std::memory_order_relaxed);
}

inline uint64_t progress_now() {
  uint64_t now = progress().load(std::memory_order_relaxed);
  if (process_world *p = current_process())
    for (const rank_header *h : p->headers)
      if (h) now += h->progress.load(std::memory_order_relaxed);
  return now;
}

poller::poller(const uint64_t *slot_, uint64_t expected_)
  : slot(slot_), expected(expected_), start(now_seconds()), seen_progress(progress_now()) {}

void poller::pause(uint64_t seen) {
  ++spins;
  if (current_fibers) {
    fiber_wait(spins > 1);
  } else if (spins < 16) {
    std::this_thread::yield();
    return;
  } else {
    struct timespec ts = {0, 20000};
    nanosleep(&ts, nullptr);
  }
  if ((spins & 63) != 0) return;
  uint64_t now = progress_now();
  if (process_world *p = current_process(); p && (spins & 4095) == 0) {
    std::string gone = ranks_gone(*p);  // a peer that ended never signals
    if (!gone.empty() && __atomic_load_n(slot, __ATOMIC_ACQUIRE) < expected)
      watchdog(seen, gone.c_str());
  }
  if (now != seen_progress) {  // something moved: the wait starts over
    seen_progress = now;
    start = now_seconds();
  } else if (now_seconds() - start > timeout_seconds()) {
    watchdog(seen, nullptr);
  }
}

void poller::watchdog(uint64_t seen, const char *gone) const {
  char where[160] = "not in any rank's signal pad";
  stream_state *s = current.stream;
  if (s && s->world) {
    coco_emu_world *w = s->world;
    for (int g = 0; g < w->ranks; ++g) {
      const uint64_t *pad = w->pads[g];
      if (pad && slot >= pad && slot < pad + w->signal_slots) {
        snprintf(where, sizeof where, "slot %ld of the signal pad of rank %d of stage %d",
                 (long)(slot - pad), g % w->world, g / w->world);
        break;
      }
    }
  }
  if (gone)
    fatal(3,
          "%s, kernel '%s', block (%u,%u,%u) thread (%u,%u,%u): waits for signal %p (%s) to "
          "reach %llu (it holds %llu), but %s",
          describe_current().c_str(), current.name, blockIdx.x, blockIdx.y, blockIdx.z,
          threadIdx.x, threadIdx.y, threadIdx.z, (const void *)slot, where,
          (unsigned long long)expected, (unsigned long long)seen, gone);
  fatal(3,
        "watchdog: %s, kernel '%s', block (%u,%u,%u) thread (%u,%u,%u): waited more than "
        "%g s, with no progress anywhere, for signal %p (%s) to reach %llu; it holds %llu",
        describe_current().c_str(), current.name, blockIdx.x, blockIdx.y, blockIdx.z,
        threadIdx.x, threadIdx.y, threadIdx.z, timeout_seconds(), (const void *)slot, where,
        (unsigned long long)expected, (unsigned long long)seen);
}

// ---------------------------------------------------------------------------
// Kernel launches: a block is an OS thread, its threads fibers (or OS threads)
// ---------------------------------------------------------------------------

// __syncthreads(): a barrier on the block's own atomics. libstdc++'s
// std::barrier parks waiters through a process-wide pool of atomics whose
// read-modify-writes ThreadSanitizer sees as synchronization between unrelated
// blocks and ranks, hiding real races between ranks (e.g. a fused kernel
// without its closing sync). A thread that returns drops out (arrive_and_drop),
// as with std::barrier.
struct block_barrier {
  explicit block_barrier(std::ptrdiff_t threads) : expected(threads) {}

  void arrive_and_wait() {
    unsigned phase = generation.load(std::memory_order_acquire);
    std::ptrdiff_t n = arrived.fetch_add(1, std::memory_order_acq_rel) + 1;
    if (n == expected.load(std::memory_order_acquire)) complete(n);
    if (fiber_block *b = current_fibers) {
      // The scheduler passes over this fiber until the phase ends.
      size_t self = b->running.load(std::memory_order_relaxed);
      b->barrier_wait[self].store(phase + 1, std::memory_order_relaxed);
      while (generation.load(std::memory_order_acquire) == phase) fiber_wait(false);
      b->barrier_wait[self].store(0, std::memory_order_relaxed);
      return;
    }
    for (unsigned spins = 0; generation.load(std::memory_order_acquire) == phase; ++spins) {
      if (spins < 64) {
        std::this_thread::yield();
      } else {
        struct timespec ts = {0, 20000};
        nanosleep(&ts, nullptr);
      }
    }
  }

  // Whether the phase that began as `wait - 1` (fiber_block::barrier_wait) is over.
  bool passed(unsigned wait) const {
    return generation.load(std::memory_order_acquire) != wait - 1;
  }

  void arrive_and_drop() {
    std::ptrdiff_t left = expected.fetch_sub(1, std::memory_order_acq_rel) - 1;
    if (left > 0) complete(left);
  }

 private:
  // The phase ends when `count` threads have arrived; exactly one of the
  // threads that see it (the last arrival, a thread dropping out) ends it.
  void complete(std::ptrdiff_t count) {
    std::ptrdiff_t seen = count;
    if (arrived.compare_exchange_strong(seen, 0, std::memory_order_acq_rel)) {
      note_progress();
      generation.fetch_add(1, std::memory_order_acq_rel);
    }
  }

  std::atomic<std::ptrdiff_t> expected;
  std::atomic<std::ptrdiff_t> arrived{0};
  std::atomic<unsigned> generation{0};
};

struct block_state {
  block_barrier barrier;
  std::mutex m;
  std::vector<std::pair<const void *, void *>> shared;  // COCO_SHARED tag -> memory
  std::vector<unsigned char> dynamic;
  block_state(std::ptrdiff_t threads, size_t dynamic_bytes)
      : barrier(threads), dynamic(dynamic_bytes ? dynamic_bytes : 1) {}
  ~block_state() {
    for (auto &entry : shared) free(entry.second);
  }
};

inline thread_local block_state *current_block = nullptr;

}  // namespace coco_emu

void __syncthreads() { coco_emu::current_block->barrier.arrive_and_wait(); }

namespace coco_emu {

void *block_shared(const void *tag, size_t bytes, size_t align) {
  block_state *b = current_block;
  if (!b) fatal(5, "COCO_SHARED used outside a kernel");
  std::lock_guard<std::mutex> lock(b->m);
  for (auto &entry : b->shared)
    if (entry.first == tag) return entry.second;
  if (align < 16) align = 16;
  size_t rounded = (bytes + align - 1) / align * align;
  void *memory = aligned_alloc(align, rounded ? rounded : align);
  if (!memory) fatal(5, "COCO_SHARED: out of memory");
  std::memset(memory, 0, rounded ? rounded : align);
  b->shared.emplace_back(tag, memory);
  return memory;
}

void *dynamic_shared() {
  if (!current_block) fatal(5, "COCO_SHARED_DYNAMIC used outside a kernel");
  return current_block->dynamic.data();
}

struct kernel_thread {
  block_state *block;
  uint3 tid, bid;
  dim3 bdim, gdim;
  const std::function<void()> *body;
  stream_state *stream;
  const char *name;
  launch_timeline *timeline;

  // The calling OS thread's view of the launch: its block (all but threadIdx).
  void enter() const {
    blockIdx = bid;
    blockDim = bdim;
    gridDim = gdim;
    current_block = block;
    current.stream = stream;
    current.name = name;
    current_launch = timeline;
  }
};

inline void *kernel_thread_main(void *arg) {
  auto *t = static_cast<kernel_thread *>(arg);
  t->enter();
  threadIdx = t->tid;
  (*t->body)();
  t->block->barrier.arrive_and_drop();
  return nullptr;
}

// A fiber's life: the kernel's body, then out of the block's barrier, then
// back to the scheduler for good. It never returns: under ThreadSanitizer a
// return would run the function's exit on the scheduler's fiber (its own exit
// is told first, so that the fiber, reused by the stream's next launch,
// starts with an empty call stack). Last it releases what it wrote, which the
// scheduler acquires once every fiber is done, so that the launch's end
// orders it before what follows.
inline void fiber_entry() {
  fiber_block *b = current_fibers;
  (*b->launch->body)();
  b->launch->block->barrier.arrive_and_drop();
  size_t self = b->running.load(std::memory_order_relaxed);
  b->done[self].store(true, std::memory_order_relaxed);
  b->busy.store(true, std::memory_order_relaxed);
#if defined(__SANITIZE_THREAD__)
  __tsan_release(&b->tsan_end);
  __tsan_func_exit();
#endif
  COCO_EMU_SWITCH(&b->fibers[self], &b->scheduler, b->tsan_scheduler);
  fatal(5, "a finished fiber was resumed");
}

// A block as fibers (use_fibers), on the OS thread that runs
// `run_block_fibers(t)`, `t` the block's description (its `tid` unused):
// every fiber has a stack of thread_stack_bytes(), mapped (pages are touched
// as used). The scheduler resumes the fibers in thread order, passing over
// those at a barrier whose phase has not ended.
inline void *run_block_fibers(void *arg) {
  auto *t = static_cast<kernel_thread *>(arg);
  t->enter();
  const size_t n = (size_t)t->bdim.x * t->bdim.y * t->bdim.z;
  const size_t stack = thread_stack_bytes();
  stream_state::fiber_slots &slots =
      t->stream->fiber_pool[((size_t)t->bid.z * t->gdim.y + t->bid.y) * t->gdim.x + t->bid.x];
  fiber_block b;
  b.launch = t;
  b.fibers.resize(n);
  b.done.reset(new std::atomic<bool>[n]);
  b.barrier_wait.reset(new std::atomic<unsigned>[n]);
  current_fibers = &b;
  for (size_t i = 0; i < n; ++i) {
    b.done[i].store(false, std::memory_order_relaxed);
    b.barrier_wait[i].store(0, std::memory_order_relaxed);
    ucontext_t &f = b.fibers[i];
    getcontext(&f);
    f.uc_stack.ss_sp = static_cast<char *>(slots.stacks) + i * stack;
    f.uc_stack.ss_size = stack;
    f.uc_link = &b.scheduler;
    makecontext(&f, fiber_entry, 0);
  }
#if defined(__SANITIZE_THREAD__)
  b.tsan_scheduler = __tsan_get_current_fiber();
  b.tsan = slots.tsan.data();
#endif
  // The first round starts every fiber: its switches synchronize, so that what
  // came before the launch (on its stream) happens before the CUDA threads run;
  // the scheduler has acquired nothing from a fiber yet (it looks at the
  // barrier only of fibers that have run).
  size_t live = n;
  for (unsigned idle = 0, round = 0; live > 0; ++round) {
    b.busy.store(false, std::memory_order_relaxed);
    for (size_t i = 0; i < n; ++i) {
      unsigned wait = b.barrier_wait[i].load(std::memory_order_relaxed);
      if (b.done[i].load(std::memory_order_relaxed) ||
          (wait && !t->block->barrier.passed(wait)))
        continue;
      set_thread_index(uint3((unsigned)(i % t->bdim.x), (unsigned)(i / t->bdim.x % t->bdim.y),
                             (unsigned)(i / ((size_t)t->bdim.x * t->bdim.y))));
      b.running.store(i, std::memory_order_relaxed);
      COCO_EMU_SWITCH_SYNC(&b.scheduler, &b.fibers[i], b.tsan[i], round == 0);
      if (b.done[i].load(std::memory_order_relaxed)) --live;
    }
    if (b.busy.load(std::memory_order_relaxed)) {
      idle = 0;
    } else if (++idle < 16) {
      sched_yield();
    } else {
      struct timespec ts = {0, 20000};
      nanosleep(&ts, nullptr);
    }
  }
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(&b.tsan_end);
#endif
  current_fibers = nullptr;
  return nullptr;
}

// The stacks (and ThreadSanitizer's fibers) of block `block` of this
// stream's launches, for `threads` threads: made or grown here, by the
// stream's worker, before the launch's blocks start.
inline stream_state::fiber_slots &stream_state::fibers_of_block(size_t block, size_t threads) {
  if (fiber_pool.size() <= block) fiber_pool.resize(block + 1);
  fiber_slots &slots = fiber_pool[block];
  if (slots.count < threads) {
    const size_t stack = thread_stack_bytes();
    if (slots.stacks) munmap(slots.stacks, slots.count * stack);
    slots.stacks = mmap(nullptr, threads * stack, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (slots.stacks == MAP_FAILED)
      fatal(5, "%s: cannot map the stacks of %zu fibers (%s)", describe_current().c_str(),
            threads, strerror(errno));
    slots.count = threads;
  }
#if defined(__SANITIZE_THREAD__)
  while (slots.tsan.size() < threads) slots.tsan.push_back(__tsan_create_fiber(0));
#endif
  return slots;
}

inline void stream_state::release_fibers() {
  for (fiber_slots &slots : fiber_pool) {
    if (slots.stacks) munmap(slots.stacks, slots.count * thread_stack_bytes());
#if defined(__SANITIZE_THREAD__)
    for (void *fiber : slots.tsan) __tsan_destroy_fiber(fiber);
#endif
  }
  fiber_pool.clear();
}

// A launch's tiles, if its kernel counted any, in the world's timeline.
inline void record_timeline(stream_state *s, const char *name, const launch_timeline &timeline) {
  if (timeline.tiles.load(std::memory_order_relaxed) > 0 && s->world) {
    std::lock_guard<std::mutex> lock(s->world->names_mutex);
    s->world->timelines.push_back(timeline.record(s->global, name));
  }
}

inline void run_grid_fibers(stream_state *s, const char *name, dim3 grid, dim3 block,
                            size_t shared_bytes, const std::function<void()> &body) {
  size_t blocks = (size_t)grid.x * grid.y * grid.z;
  size_t threads = (size_t)block.x * block.y * block.z;
  launch_timeline timeline;
  std::vector<std::unique_ptr<block_state>> states;
  std::vector<kernel_thread> args;
  states.reserve(blocks);
  args.reserve(blocks);
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        states.push_back(std::make_unique<block_state>((std::ptrdiff_t)threads, shared_bytes));
        args.push_back(kernel_thread{states.back().get(), uint3(0, 0, 0), uint3(bx, by, bz), block,
                                     grid, &body, s, name, &timeline});
      }
  for (size_t b = blocks; b-- > 0;) s->fibers_of_block(b, threads);
  std::vector<pthread_t> handles(blocks);
  for (size_t b = 0; b < blocks; ++b) {
    int err = pthread_create(&handles[b], nullptr, run_block_fibers, &args[b]);
    if (err)
      fatal(5, "%s: kernel '%s': cannot start block %zu of %zu (%s)", describe_current().c_str(),
            name, b, blocks, strerror(err));
  }
  for (auto &h : handles) pthread_join(h, nullptr);
  record_timeline(s, name, timeline);
}

inline void run_grid(stream_state *s, const char *name, dim3 grid, dim3 block, size_t shared_bytes,
                     const std::function<void()> &body) {
  if (use_fibers()) {
    run_grid_fibers(s, name, grid, block, shared_bytes, body);
    return;
  }
  size_t blocks = (size_t)grid.x * grid.y * grid.z;
  size_t threads = (size_t)block.x * block.y * block.z;
  std::vector<std::unique_ptr<block_state>> states;
  states.reserve(blocks);
  for (size_t b = 0; b < blocks; ++b)
    states.push_back(std::make_unique<block_state>((std::ptrdiff_t)threads, shared_bytes));
  launch_timeline timeline;
  std::vector<kernel_thread> args(blocks * threads);
  std::vector<pthread_t> handles(blocks * threads);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  size_t stack = thread_stack_bytes();
  if (stack < (size_t)PTHREAD_STACK_MIN) stack = PTHREAD_STACK_MIN;
  pthread_attr_setstacksize(&attr, stack);
  size_t i = 0;
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        block_state *state = states[(bz * grid.y + by) * grid.x + bx].get();
        for (unsigned tz = 0; tz < block.z; ++tz)
          for (unsigned ty = 0; ty < block.y; ++ty)
            for (unsigned tx = 0; tx < block.x; ++tx, ++i) {
              args[i] = kernel_thread{state, uint3(tx, ty, tz), uint3(bx, by, bz), block, grid,
                                      &body, s, name, &timeline};
              int err = pthread_create(&handles[i], &attr, kernel_thread_main, &args[i]);
              if (err)
                fatal(5, "%s: kernel '%s': cannot start thread %zu of %zu (%s)",
                      describe_current().c_str(), name, i, blocks * threads, strerror(err));
            }
      }
  pthread_attr_destroy(&attr);
  for (auto &h : handles) pthread_join(h, nullptr);
  record_timeline(s, name, timeline);
}

inline void count_launch(stream_state *s, const char *name) {
  coco_emu_world *w = s->world;
  if (!w) return;
  w->launches[(size_t)s->global * COCO_EMU_STREAMS + s->index].fetch_add(1);
  std::lock_guard<std::mutex> lock(w->names_mutex);
  ++w->kernel_launches[name];
}

void launch_body(const char *name, dim3 grid, dim3 block, size_t shared_bytes,
                 cudaStream_t stream, void *body, void (*invoke)(void *),
                 void (*release)(void *)) {
  std::shared_ptr<void> owner(body, release);
  if (!stream) fatal(5, "COCO_LAUNCH(%s): null stream (the emulation has no default stream)", name);
  size_t threads = (size_t)block.x * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0 || threads > 1024 ||
      block.z > 64 || grid.y > 65535 || grid.z > 65535) {
    set_error(cudaErrorInvalidConfiguration);
    return;
  }
  count_launch(stream, name);
  std::function<void()> run = [owner, invoke] { invoke(owner.get()); };
  stream_state *s = stream;
  s->enqueue([s, name, grid, block, shared_bytes, run] {
    current.name = name;
    run_grid(s, name, grid, block, shared_bytes, run);
  });
}

// ---------------------------------------------------------------------------
// NCCL: operations run in stream workers; ranks rendezvous in the comm_group
// ---------------------------------------------------------------------------

enum { COLL_ALL_REDUCE = 0, COLL_REDUCE_SCATTER = 1, COLL_ALL_GATHER = 2, COLL_BROADCAST = 3 };
inline const char *collective_name(int kind) {
  static const char *names[] = {"ncclAllReduce", "ncclReduceScatter", "ncclAllGather",
                                "ncclBroadcast"};
  return names[kind];
}

inline size_t nccl_type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
  }
  return 0;
}

template <class T> struct accumulator { using type = T; };
template <> struct accumulator<__half> { using type = float; };
template <> struct accumulator<__nv_bfloat16> { using type = float; };
template <> struct accumulator<int8_t> { using type = int64_t; };
template <> struct accumulator<uint8_t> { using type = uint64_t; };
template <> struct accumulator<int32_t> { using type = int64_t; };
template <> struct accumulator<uint32_t> { using type = uint64_t; };

template <class A> A combine(A a, A b, ncclRedOp_t op) {
  switch (op) {
    case ncclProd: return a * b;
    case ncclMax: return a < b ? b : a;
    case ncclMin: return b < a ? b : a;
    default: return a + b;
  }
}

template <class T> void compute_collective(std::vector<collective> &e) {
  using A = typename accumulator<T>::type;
  const int n = (int)e.size();
  const collective &c = e[0];
  const size_t count = c.count;
  if (c.kind == COLL_ALL_REDUCE || c.kind == COLL_REDUCE_SCATTER) {
    size_t total = c.kind == COLL_ALL_REDUCE ? count : count * n;
    std::vector<A> acc(total);
    for (int r = 0; r < n; ++r) {
      const T *in = static_cast<const T *>(e[r].send);
      for (size_t i = 0; i < total; ++i) {
        A v = (A)in[i];
        acc[i] = r == 0 ? v : combine(acc[i], v, c.op);
      }
    }
    if (c.op == ncclAvg)
      for (auto &v : acc) v = v / (A)n;
    for (int r = 0; r < n; ++r) {
      T *out = static_cast<T *>(e[r].recv);
      if (!out) continue;  // another process's rank (run_collective_across)
      size_t first = c.kind == COLL_ALL_REDUCE ? 0 : (size_t)r * count;
      for (size_t i = 0; i < count; ++i) out[i] = (T)acc[first + i];
    }
    return;
  }
  if (c.kind == COLL_ALL_GATHER) {
    std::vector<T> gathered(count * n);
    for (int r = 0; r < n; ++r) std::memcpy(&gathered[(size_t)r * count], e[r].send, count * sizeof(T));
    for (int r = 0; r < n; ++r)
      if (e[r].recv) std::memcpy(e[r].recv, gathered.data(), gathered.size() * sizeof(T));
    return;
  }
  std::vector<T> value(count);  // broadcast
  std::memcpy(value.data(), e[c.root].send, count * sizeof(T));
  for (int r = 0; r < n; ++r)
    if (e[r].recv) std::memcpy(e[r].recv, value.data(), count * sizeof(T));
}

inline void compute_collective_typed(std::vector<collective> &e) {
  switch (e[0].type) {
    case ncclInt8: return compute_collective<int8_t>(e);
    case ncclUint8: return compute_collective<uint8_t>(e);
    case ncclInt32: return compute_collective<int32_t>(e);
    case ncclUint32: return compute_collective<uint32_t>(e);
    case ncclInt64: return compute_collective<int64_t>(e);
    case ncclUint64: return compute_collective<uint64_t>(e);
    case ncclFloat16: return compute_collective<__half>(e);
    case ncclBfloat16: return compute_collective<__nv_bfloat16>(e);
    case ncclFloat32: return compute_collective<float>(e);
    case ncclFloat64: return compute_collective<double>(e);
  }
}

// Bytes as NCCL's ring moves them (docs/gpu/emulation.md): each rank sends to the
// next rank of the ring (comm rank + 1 mod N). In a world of processes each
// counts its own rank's (the others' entries have no stream).
inline void count_collective(comm_group &g, std::vector<collective> &e) {
  const int n = g.size();
  const collective &c = e[0];
  const uint64_t elem = nccl_type_size(c.type);
  for (int r = 0; r < n; ++r) {
    if (!e[r].stream) continue;
    uint64_t sent = 0;
    switch (c.kind) {
      case COLL_ALL_REDUCE: sent = 2 * (uint64_t)(n - 1) * c.count * elem / n; break;
      case COLL_REDUCE_SCATTER:
      case COLL_ALL_GATHER: sent = (uint64_t)(n - 1) * c.count * elem; break;
      case COLL_BROADCAST: sent = r == (c.root + n - 1) % n ? 0 : c.count * elem; break;
    }
    count_bytes(g.global[r], g.global[(r + 1) % n], e[r].stream->index, sent, g.world);
  }
}

// The k-th collectives of two ranks (`r` made `o`) must be the same call.
inline void check_match(const comm_group &g, uint64_t seq, const collective &mine,
                        const collective &o, int r) {
  if (o.kind != mine.kind || o.count != mine.count || o.type != mine.type || o.op != mine.op ||
      o.root != mine.root)
    fatal(4,
          "%s: %s call #%llu on the %s communicator does not match rank %d's (%s, count "
          "%zu, type %d, op %d, root %d vs count %zu, type %d, op %d, root %d)",
          describe_current().c_str(), collective_name(mine.kind), (unsigned long long)seq,
          g.label, r, collective_name(o.kind), mine.count, (int)mine.type, (int)mine.op,
          mine.root, o.count, (int)o.type, (int)o.op, o.root);
}

inline void run_collective(ncclComm *comm, uint64_t seq, const collective &mine) {
  comm_group &g = *comm->group;
  const int n = g.size();
  std::unique_lock<std::mutex> lock(g.m);
  collective_slot &slot = g.collectives[seq];
  if (slot.entries.empty()) slot.entries.resize(n);
  slot.entries[comm->rank] = mine;
  if (++slot.arrived == n) {
    for (int r = 0; r < n; ++r) check_match(g, seq, mine, slot.entries[r], r);
    compute_collective_typed(slot.entries);
    count_collective(g, slot.entries);
    slot.done = true;
    g.cv.notify_all();
  } else {
    wait_or_die(lock, g.cv, [&] { return slot.done; }, [&] {
      std::string missing;
      for (int r = 0; r < n; ++r)
        if (!slot.entries[r].stream) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      char text[256];
      snprintf(text, sizeof text, "call #%llu on the %s communicator: %d of %d ranks arrived "
               "(missing ranks: %s)", (unsigned long long)seq, g.label, slot.arrived, n,
               missing.c_str());
      return std::string(text);
    });
  }
  if (++slot.departed == n) g.collectives.erase(seq);
}

struct nccl_op {
  enum kind_t { COLLECTIVE, SEND, RECV } kind = COLLECTIVE;
  ncclComm *comm = nullptr;
  CUstream_st *stream = nullptr;
  uint64_t seq = 0;
  collective coll;
  int peer = 0;
  const void *send = nullptr;
  void *recv = nullptr;
  size_t bytes = 0;
};

inline std::tuple<int, int, uint64_t> p2p_key(const nccl_op &op) {
  return op.kind == nccl_op::SEND ? std::make_tuple(op.comm->rank, op.peer, op.seq)
                                  : std::make_tuple(op.peer, op.comm->rank, op.seq);
}

inline void post_send(const nccl_op &op) {
  comm_group &g = *op.comm->group;
  std::lock_guard<std::mutex> lock(g.m);
  p2p_slot &slot = g.p2p[p2p_key(op)];
  slot.send = op.send;
  slot.bytes = op.bytes;
  slot.sender = op.stream;
  slot.posted = true;
  g.cv.notify_all();
}

inline void finish_p2p(comm_group &g, const std::tuple<int, int, uint64_t> &key, p2p_slot &slot) {
  if (++slot.finished == 2) g.p2p.erase(key);
}

// The start of both halves of a send/recv pair: with the communicator's
// lock held, name the call in `what` (the watchdog's and the errors' words)
// and wait until the peer's half has reached the pair's slot (`ready`).
template <class Ready>
inline p2p_slot &meet_peer(const nccl_op &op, std::unique_lock<std::mutex> &lock,
                           char (&what)[200], Ready ready) {
  comm_group &g = *op.comm->group;
  p2p_slot &slot = g.p2p[p2p_key(op)];
  const bool send = op.kind == nccl_op::SEND;
  snprintf(what, sizeof what, "%s #%llu %s rank %d of the %s communicator",
           send ? "ncclSend" : "ncclRecv", (unsigned long long)op.seq, send ? "to" : "from",
           op.peer, g.label);
  current.name = what;
  wait_or_die(lock, g.cv, [&] { return ready(slot); }, [&] {
    return std::string(send ? "the matching ncclRecv never came"
                            : "the matching ncclSend never came");
  });
  return slot;
}

inline void complete_recv(const nccl_op &op) {
  comm_group &g = *op.comm->group;
  std::unique_lock<std::mutex> lock(g.m);
  char what[200];
  p2p_slot &slot = meet_peer(op, lock, what, [](const p2p_slot &s) { return s.posted; });
  if (slot.bytes != op.bytes)
    fatal(4, "%s: %s expects %zu bytes but the matching ncclSend has %zu",
          describe_current().c_str(), what, op.bytes, slot.bytes);
  std::memcpy(op.recv, slot.send, op.bytes);
  count_bytes(g.global[op.peer], g.global[op.comm->rank], slot.sender->index, op.bytes, g.world);
  slot.done = true;
  g.cv.notify_all();
  finish_p2p(g, p2p_key(op), slot);
}

inline void wait_send(const nccl_op &op) {
  comm_group &g = *op.comm->group;
  std::unique_lock<std::mutex> lock(g.m);
  char what[200];
  p2p_slot &slot = meet_peer(op, lock, what, [](const p2p_slot &s) { return s.done; });
  finish_p2p(g, p2p_key(op), slot);
}

// NCCL between processes (a rank per process): the calls meet through
// messages in shared memory (above, "A rank per process"). A collective:
// every rank posts its input (a broadcast's non-roots an empty one, so that
// every call is matched), takes every other rank's, computes its own output
// from them in rank order (the result the ranks of one process get) and
// waits until the others have taken its input.
inline std::string message_name(const comm_group &g, const char *what, uint64_t a, uint64_t b,
                                 uint64_t c) {
  char text[96];
  snprintf(text, sizeof text, "-m-%c%d-%s-%llu-%llu-%llu", g.label[0], g.global[0], what,
           (unsigned long long)a, (unsigned long long)b, (unsigned long long)c);
  return g.world->process->prefix + text;
}

inline void run_collective_across(ncclComm *comm, uint64_t seq, const collective &mine) {
  comm_group &g = *comm->group;
  process_world &p = *g.world->process;
  const int n = g.size(), me = comm->rank;
  const size_t elem = nccl_type_size(mine.type);
  size_t inputs = mine.count;
  if (mine.kind == COLL_REDUCE_SCATTER) inputs *= n;
  if (mine.kind == COLL_BROADCAST && me != mine.root) inputs = 0;
  message_header meta{};
  meta.kind = mine.kind;
  meta.type = mine.type;
  meta.op = mine.op;
  meta.root = mine.root;
  meta.count = mine.count;
  shared_segment own =
      post_message(message_name(g, "c", seq, me, 0), meta, mine.send, inputs * elem);
  std::vector<collective> entries(n, mine);
  std::vector<shared_segment> taken(n);
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    taken[r] = take_message(p, message_name(g, "c", seq, r, 0), g.global[r], [&] {
      char text[160];
      snprintf(text, sizeof text, "%s call #%llu on the %s communicator waits for rank %d's part",
               collective_name(mine.kind), (unsigned long long)seq, g.label, r);
      return std::string(text);
    });
    const message_header &h = *taken[r].head();
    collective theirs{(int)h.kind,          taken[r].data(),     nullptr,
                      (size_t)h.count,      (ncclDataType_t)h.type, (ncclRedOp_t)h.op,
                      (int)h.root,          nullptr};
    check_match(g, seq, mine, theirs, r);
    entries[r] = theirs;
  }
  compute_collective_typed(entries);  // only this rank's output: the others' recv is null
  count_collective(g, entries);
  for (int r = 0; r < n; ++r)
    if (r != me) release_message(taken[r]);
  retire_message(p, own, n - 1, -1, [&] {
    char text[160];
    snprintf(text, sizeof text, "%s call #%llu on the %s communicator waits for the other %d "
             "ranks to take its part", collective_name(mine.kind), (unsigned long long)seq,
             g.label, n - 1);
    return std::string(text);
  });
}

// run_nccl_ops between processes: a send posts its data, a receive takes it,
// the send is done when its receiver has taken it.
inline void run_nccl_ops_across(const std::vector<nccl_op> &ops) {
  auto p2p_name = [](const nccl_op &op) {
    auto [src, dst, seq] = p2p_key(op);
    return message_name(*op.comm->group, "p", src, dst, seq);
  };
  auto what = [](const nccl_op &op) {
    char text[160];
    snprintf(text, sizeof text, "%s #%llu %s rank %d of the %s communicator",
             op.kind == nccl_op::SEND ? "ncclSend" : "ncclRecv", (unsigned long long)op.seq,
             op.kind == nccl_op::SEND ? "to" : "from", op.peer, op.comm->group->label);
    return std::string(text);
  };
  std::vector<shared_segment> sends;
  for (const auto &op : ops)
    if (op.kind == nccl_op::SEND) {
      message_header meta{};
      meta.count = op.bytes;
      sends.push_back(post_message(p2p_name(op), meta, op.send, op.bytes));
    }
  for (const auto &op : ops)
    if (op.kind == nccl_op::RECV) {
      comm_group &g = *op.comm->group;
      shared_segment m =
          take_message(*g.world->process, p2p_name(op), g.global[op.peer], [&] { return what(op); });
      if (m.head()->bytes != op.bytes)
        fatal(4, "%s: %s expects %zu bytes but the matching ncclSend has %llu",
              describe_current().c_str(), what(op).c_str(), op.bytes,
              (unsigned long long)m.head()->bytes);
      std::memcpy(op.recv, m.data(), op.bytes);
      release_message(m);
    }
  for (const auto &op : ops)
    if (op.kind == nccl_op::COLLECTIVE) {
      current.name = collective_name(op.coll.kind);
      run_collective_across(op.comm, op.seq, op.coll);
    }
  size_t k = 0;
  for (const auto &op : ops)
    if (op.kind == nccl_op::SEND) {
      comm_group &g = *op.comm->group;
      retire_message(*g.world->process, sends[k++], 1, g.global[op.peer], [&] {
        return what(op) + ": the matching ncclRecv never came";
      });
      count_bytes(g.global[op.comm->rank], g.global[op.peer], op.stream->index, op.bytes, g.world);
    }
}

// One NCCL group (or one ungrouped call) on one stream: post every send, then
// receive, then the collectives, then wait for the sends to be taken.
inline void run_nccl_ops(const std::vector<nccl_op> &ops) {
  if (!ops.empty() && ops[0].stream->world && ops[0].stream->world->process)
    return run_nccl_ops_across(ops);
  for (const auto &op : ops)
    if (op.kind == nccl_op::SEND) post_send(op);
  for (const auto &op : ops)
    if (op.kind == nccl_op::RECV) complete_recv(op);
  for (const auto &op : ops)
    if (op.kind == nccl_op::COLLECTIVE) {
      current.name = collective_name(op.coll.kind);
      run_collective(op.comm, op.seq, op.coll);
    }
  for (const auto &op : ops)
    if (op.kind == nccl_op::SEND) wait_send(op);
}

inline thread_local int group_depth = 0;
// Heap-held: a thread_local with a destructor races with the TLS teardown of
// threads the harness does not join (ThreadSanitizer reports it).
inline thread_local std::vector<nccl_op> *group_ops = nullptr;

inline void submit(nccl_op op) {
  coco_emu_world *w = op.stream->world;
  if (w) w->nccl_calls[(size_t)op.stream->global * COCO_EMU_STREAMS + op.stream->index].fetch_add(1);
  if (group_depth > 0) {
    if (!group_ops) group_ops = new std::vector<nccl_op>();
    group_ops->push_back(std::move(op));
    return;
  }
  CUstream_st *s = op.stream;
  s->enqueue([op] { run_nccl_ops({op}); });
}

inline ncclResult_t collective_call(int kind, const void *send, void *recv, size_t count,
                                    ncclDataType_t type, ncclRedOp_t op, int root, ncclComm_t comm,
                                    cudaStream_t stream) {
  if (!comm || !stream || nccl_type_size(type) == 0 || (unsigned)op > (unsigned)ncclAvg)
    return ncclInvalidArgument;
  if (kind == COLL_BROADCAST && (root < 0 || root >= comm->group->size())) return ncclInvalidArgument;
  if (count && (!recv || (!send && !(kind == COLL_BROADCAST && comm->rank != root))))
    return ncclInvalidArgument;
  nccl_op o;
  o.kind = nccl_op::COLLECTIVE;
  o.comm = comm;
  o.stream = stream;
  o.seq = comm->collective_seq.fetch_add(1);
  o.coll = collective{kind, send, recv, count, type, op, root, stream};
  submit(o);
  return ncclSuccess;
}

inline ncclResult_t p2p_call(bool is_send, const void *send, void *recv, size_t count,
                             ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream) {
  if (!comm || !stream || nccl_type_size(type) == 0 || peer < 0 || peer >= comm->group->size())
    return ncclInvalidArgument;
  nccl_op o;
  o.kind = is_send ? nccl_op::SEND : nccl_op::RECV;
  o.comm = comm;
  o.stream = stream;
  o.peer = peer;
  o.send = send;
  o.recv = recv;
  o.bytes = count * nccl_type_size(type);
  {
    std::lock_guard<std::mutex> lock(comm->seq_mutex);
    o.seq = is_send ? comm->send_seq[peer]++ : comm->recv_seq[peer]++;
  }
  submit(o);
  return ncclSuccess;
}

// ---------------------------------------------------------------------------
// cuBLAS: column-major GEMM in the stream worker
// ---------------------------------------------------------------------------

inline double load_element(const void *p, cudaDataType_t t, size_t i) {
  switch (t) {
    case CUDA_R_32F: return static_cast<const float *>(p)[i];
    case CUDA_R_64F: return static_cast<const double *>(p)[i];
    case CUDA_R_16F: return (float)static_cast<const __half *>(p)[i];
    case CUDA_R_16BF: return (float)static_cast<const __nv_bfloat16 *>(p)[i];
    case CUDA_R_32I: return static_cast<const int32_t *>(p)[i];
    case CUDA_R_8I: return static_cast<const int8_t *>(p)[i];
    case CUDA_R_8U: return static_cast<const uint8_t *>(p)[i];
  }
  return 0;
}

inline void store_element(void *p, cudaDataType_t t, size_t i, double v) {
  switch (t) {
    case CUDA_R_32F: static_cast<float *>(p)[i] = (float)v; break;
    case CUDA_R_64F: static_cast<double *>(p)[i] = v; break;
    case CUDA_R_16F: static_cast<__half *>(p)[i] = __float2half((float)v); break;
    case CUDA_R_16BF: static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16((float)v); break;
    default: break;
  }
}

struct gemm_call {
  cublasOperation_t ta, tb;
  int m, n, k;
  double alpha, beta;
  const void *a, *b;
  void *c;
  cudaDataType_t at, bt, ct;
  int lda, ldb, ldc;
  long long sa, sb, sc;
  int batches;
};

template <class Acc> void run_gemm(const gemm_call &g) {
  const int m = g.m, n = g.n, k = g.k;
  const size_t ea = g.at == CUDA_R_64F ? 8 : g.at == CUDA_R_32F ? 4 : 2;
  const size_t eb = g.bt == CUDA_R_64F ? 8 : g.bt == CUDA_R_32F ? 4 : 2;
  const size_t ec = g.ct == CUDA_R_64F ? 8 : g.ct == CUDA_R_32F ? 4 : 2;
  std::vector<Acc> a((size_t)m * k), b((size_t)n * k);
  for (int batch = 0; batch < g.batches; ++batch) {
    const char *pa = static_cast<const char *>(g.a) + (size_t)batch * g.sa * ea;
    const char *pb = static_cast<const char *>(g.b) + (size_t)batch * g.sb * eb;
    char *pc = static_cast<char *>(g.c) + (size_t)batch * g.sc * ec;
    // a[i*k + l] = op(A)(i, l); b[j*k + l] = op(B)(l, j)
    for (int i = 0; i < m; ++i)
      for (int l = 0; l < k; ++l)
        a[(size_t)i * k + l] = (Acc)load_element(
            pa, g.at, g.ta == CUBLAS_OP_N ? (size_t)i + (size_t)l * g.lda : (size_t)l + (size_t)i * g.lda);
    for (int j = 0; j < n; ++j)
      for (int l = 0; l < k; ++l)
        b[(size_t)j * k + l] = (Acc)load_element(
            pb, g.bt, g.tb == CUBLAS_OP_N ? (size_t)l + (size_t)j * g.ldb : (size_t)j + (size_t)l * g.ldb);
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        Acc sum = 0;
        const Acc *ra = &a[(size_t)i * k];
        const Acc *rb = &b[(size_t)j * k];
        for (int l = 0; l < k; ++l) sum += ra[l] * rb[l];
        size_t at = (size_t)i + (size_t)j * g.ldc;
        Acc value = (Acc)g.alpha * sum;
        if (g.beta != 0) value += (Acc)g.beta * (Acc)load_element(pc, g.ct, at);
        store_element(pc, g.ct, at, (double)value);
      }
  }
}

inline cublasStatus_t gemm(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb,
                           int m, int n, int k, const void *alpha, const void *a,
                           cudaDataType_t at, int lda, long long sa, const void *b,
                           cudaDataType_t bt, int ldb, long long sb, const void *beta, void *c,
                           cudaDataType_t ct, int ldc, long long sc, int batches,
                           cublasComputeType_t compute) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!handle->stream) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || k < 0 || batches < 0 || (ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) ||
      (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T) || !alpha || !beta)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (lda < std::max(1, ta == CUBLAS_OP_N ? m : k) || ldb < std::max(1, tb == CUBLAS_OP_N ? k : n) ||
      ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  bool f64 = compute == CUBLAS_COMPUTE_64F;
  auto io_ok = [&](cudaDataType_t t) {
    return f64 ? t == CUDA_R_64F : (t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF);
  };
  if (at != bt || !io_ok(at) || !io_ok(ct) || (ct != at && ct != CUDA_R_32F))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (!f64 && compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_FAST_16F &&
      compute != CUBLAS_COMPUTE_32F_FAST_16BF && compute != CUBLAS_COMPUTE_32F_FAST_TF32)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  gemm_call g{ta, tb, m, n, k,
              f64 ? *static_cast<const double *>(alpha) : *static_cast<const float *>(alpha),
              f64 ? *static_cast<const double *>(beta) : *static_cast<const float *>(beta),
              a, b, c, at, bt, ct, lda, ldb, ldc, sa, sb, sc, batches};
  CUstream_st *s = handle->stream;
  if (s->world) s->world->gemms[(size_t)s->global * COCO_EMU_STREAMS + s->index].fetch_add(1);
  s->enqueue([s, g, f64] {
    current.name = "cublasGemmEx";
    timed(s, "gemm", -1, [&] {
      if (f64)
        run_gemm<double>(g);
      else
        run_gemm<float>(g);
    });
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace coco_emu

// ===========================================================================
// The API the emitted code calls
// ===========================================================================

cudaError_t cudaGetLastError() {
  cudaError_t e = coco_emu::last_error;
  coco_emu::last_error = cudaSuccess;
  return e;
}
cudaError_t cudaPeekAtLastError() { return coco_emu::last_error; }
const char *cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    default: return "unknown error";
  }
}
// An enumerator's own name, as cudaGetErrorName and cublasGetStatusString give it.
#define COCO_EMU_NAME_CASE(x) \
  case x:                     \
    return #x;

const char *cudaGetErrorName(cudaError_t e) {
  switch (e) {
    COCO_EMU_NAME_CASE(cudaSuccess)
    COCO_EMU_NAME_CASE(cudaErrorInvalidValue)
    COCO_EMU_NAME_CASE(cudaErrorMemoryAllocation)
    COCO_EMU_NAME_CASE(cudaErrorInvalidConfiguration)
    COCO_EMU_NAME_CASE(cudaErrorInvalidResourceHandle)
    COCO_EMU_NAME_CASE(cudaErrorLaunchFailure)
    default: return "cudaErrorUnknown";
  }
}

cudaError_t cudaMallocAsync(void **ptr, size_t bytes, cudaStream_t stream) {
  if (!ptr || !stream) return coco_emu::set_error(cudaErrorInvalidValue);
  size_t rounded = (bytes + 255) / 256 * 256;
  void *memory = aligned_alloc(256, rounded ? rounded : 256);
  if (!memory) return coco_emu::set_error(cudaErrorMemoryAllocation);
  std::memset(memory, 0xff, rounded ? rounded : 256);  // NaN-filled, as uninitialized as it gets
  *ptr = memory;
  return cudaSuccess;
}
cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream) {
  if (!stream) return coco_emu::set_error(cudaErrorInvalidValue);
  if (ptr) stream->enqueue([ptr] { free(ptr); });
  return cudaSuccess;
}
cudaError_t cudaMalloc(void **ptr, size_t bytes) {
  if (!ptr) return coco_emu::set_error(cudaErrorInvalidValue);
  size_t rounded = (bytes + 255) / 256 * 256;
  *ptr = aligned_alloc(256, rounded ? rounded : 256);
  return *ptr ? cudaSuccess : coco_emu::set_error(cudaErrorMemoryAllocation);
}
cudaError_t cudaFree(void *ptr) {
  free(ptr);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind,
                                   cudaStream_t stream) {
  if (!stream || (bytes && (!dst || !src))) return coco_emu::set_error(cudaErrorInvalidValue);
  if (bytes)
    stream->enqueue([stream, dst, src, bytes] {
      coco_emu::timed(stream, "copy", -1, [&] { std::memmove(dst, src, bytes); });
    });
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream) {
  if (!stream || (bytes && !ptr)) return coco_emu::set_error(cudaErrorInvalidValue);
  if (bytes) stream->enqueue([ptr, value, bytes] { std::memset(ptr, value, bytes); });
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (!stream) return coco_emu::set_error(cudaErrorInvalidResourceHandle);
  stream->synchronize();
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) {
  if (!event) return coco_emu::set_error(cudaErrorInvalidValue);
  *event = new CUevent_st();
  return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int) {
  return cudaEventCreate(event);
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;  // pending records and waits hold the shared state
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event || !stream) return coco_emu::set_error(cudaErrorInvalidResourceHandle);
  uint64_t target = event->recorded.fetch_add(1) + 1;
  auto state = event->s;
  stream->enqueue([state, target] {
    std::lock_guard<std::mutex> lock(state->m);
    state->complete(target);
    state->cv.notify_all();
  });
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                       unsigned int flags) {
  (void)flags;
  if (!event || !stream) return coco_emu::set_error(cudaErrorInvalidResourceHandle);
  uint64_t target = event->recorded.load();
  if (target == 0) return cudaSuccess;
  auto state = event->s;
  stream->enqueue([state, target] {
    coco_emu::current.name = "cudaStreamWaitEvent";
    std::unique_lock<std::mutex> lock(state->m);
    coco_emu::wait_or_die(lock, state->cv, [&] { return state->done(target); }, [&] {
      return "the event's record #" + std::to_string(target) + " never completed";
    });
  });
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!event) return coco_emu::set_error(cudaErrorInvalidResourceHandle);
  uint64_t target = event->recorded.load();
  std::unique_lock<std::mutex> lock(event->s->m);
  event->s->cv.wait(lock, [&] { return event->s->done(target); });
  return cudaSuccess;
}

const char *ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
  }
  return "unknown result code";
}
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                                  ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return coco_emu::collective_call(coco_emu::COLL_ALL_REDUCE, send, recv, count, type, op, 0, comm,
                                   stream);
}
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount,
                                      ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                                      cudaStream_t stream) {
  return coco_emu::collective_call(coco_emu::COLL_REDUCE_SCATTER, send, recv, recvcount, type, op,
                                   0, comm, stream);
}
ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount,
                                  ncclDataType_t type, ncclComm_t comm, cudaStream_t stream) {
  return coco_emu::collective_call(coco_emu::COLL_ALL_GATHER, send, recv, sendcount, type, ncclSum,
                                   0, comm, stream);
}
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type,
                                  int root, ncclComm_t comm, cudaStream_t stream) {
  return coco_emu::collective_call(coco_emu::COLL_BROADCAST, send, recv, count, type, ncclSum, root,
                                   comm, stream);
}
ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t type, int peer,
                             ncclComm_t comm, cudaStream_t stream) {
  return coco_emu::p2p_call(true, send, nullptr, count, type, peer, comm, stream);
}
ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t type, int peer,
                             ncclComm_t comm, cudaStream_t stream) {
  return coco_emu::p2p_call(false, nullptr, recv, count, type, peer, comm, stream);
}
ncclResult_t ncclGroupStart() {
  ++coco_emu::group_depth;
  return ncclSuccess;
}
ncclResult_t ncclGroupEnd() {
  if (coco_emu::group_depth <= 0) return ncclInvalidUsage;
  if (--coco_emu::group_depth > 0) return ncclSuccess;
  std::vector<coco_emu::nccl_op> ops;
  if (coco_emu::group_ops) {
    ops.swap(*coco_emu::group_ops);
    delete coco_emu::group_ops;
    coco_emu::group_ops = nullptr;
  }
  std::vector<CUstream_st *> order;  // one task per stream, in issue order
  for (auto &op : ops)
    if (std::find(order.begin(), order.end(), op.stream) == order.end()) order.push_back(op.stream);
  for (CUstream_st *s : order) {
    std::vector<coco_emu::nccl_op> mine;
    for (auto &op : ops)
      if (op.stream == s) mine.push_back(op);
    s->enqueue([mine] { coco_emu::run_nccl_ops(mine); });
  }
  return ncclSuccess;
}
ncclResult_t ncclCommCount(ncclComm_t comm, int *count) {
  *count = comm->group->size();
  return ncclSuccess;
}
ncclResult_t ncclCommUserRank(ncclComm_t comm, int *rank) {
  *rank = comm->rank;
  return ncclSuccess;
}

cublasStatus_t cublasCreate(cublasHandle_t *handle) {
  *handle = new cublasContext();
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t *stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  *stream = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}
const char *cublasGetStatusString(cublasStatus_t s) {
  switch (s) {
    COCO_EMU_NAME_CASE(CUBLAS_STATUS_SUCCESS)
    COCO_EMU_NAME_CASE(CUBLAS_STATUS_NOT_INITIALIZED)
    COCO_EMU_NAME_CASE(CUBLAS_STATUS_ALLOC_FAILED)
    COCO_EMU_NAME_CASE(CUBLAS_STATUS_INVALID_VALUE)
    COCO_EMU_NAME_CASE(CUBLAS_STATUS_NOT_SUPPORTED)
  }
  return "CUBLAS_STATUS_UNKNOWN";
}
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                                   cublasOperation_t transb, int m, int n, int k,
                                   const void *alpha, const void *A, cudaDataType_t Atype, int lda,
                                   const void *B, cudaDataType_t Btype, int ldb, const void *beta,
                                   void *C, cudaDataType_t Ctype, int ldc,
                                   cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  (void)algo;
  return coco_emu::gemm(handle, transa, transb, m, n, k, alpha, A, Atype, lda, 0, B, Btype, ldb,
                        0, beta, C, Ctype, ldc, 0, 1, computeType);
}
cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const void *alpha, const void *A, cudaDataType_t Atype, int lda, long long strideA,
    const void *B, cudaDataType_t Btype, int ldb, long long strideB, const void *beta, void *C,
    cudaDataType_t Ctype, int ldc, long long strideC, int batchCount,
    cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  (void)algo;
  return coco_emu::gemm(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype,
                        ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType);
}

