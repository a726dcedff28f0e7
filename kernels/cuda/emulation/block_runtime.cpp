// The emulator's block scheduler (see block_runtime.h): fibers per CUDA thread, the block
// barrier, the warp collectives and the diagnosis of a block that can no longer make progress.
#include "kernels/cuda/emulation/block_runtime.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/emulation/fiber.h"

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace tandem::emu {

thread_local ThreadState* t_thread = nullptr;
thread_local BlockState* t_block = nullptr;

namespace {

// Happens-before edges for ThreadSanitizer: fibers are switched without synchronization, so
// these are the only orderings between CUDA threads it sees.
inline void tsan_release(void* addr) {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(addr);
#else
  (void)addr;
#endif
}
inline void tsan_acquire(void* addr) {
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(addr);
#else
  (void)addr;
#endif
}

enum class LaneStatus : uint8_t { Runnable, AtBarrier, InCollective, Exited };

struct Lane {
  ThreadState state;
  FiberContext fiber;
  LaneStatus status = LaneStatus::Runnable;
  int warp = 0, lane = 0;
  uint64_t value = 0, result = 0;
  int arg = 0, width = 32;
};

struct Warp {
  unsigned present = 0;  // lanes that exist (the last warp of a block may be partial)
  unsigned exited = 0;
  unsigned arrived = 0;  // lanes waiting in the pending collective
  unsigned mask = 0;
  WarpOp op = WarpOp::Sync;
};

const char* op_name(WarpOp op) {
  switch (op) {
    case WarpOp::Sync: return "__syncwarp";
    case WarpOp::ShuffleIndex: return "__shfl_sync";
    case WarpOp::ShuffleUp: return "__shfl_up_sync";
    case WarpOp::ShuffleDown: return "__shfl_down_sync";
    case WarpOp::ShuffleXor: return "__shfl_xor_sync";
    case WarpOp::Ballot: return "__ballot_sync";
    case WarpOp::Any: return "__any_sync";
    case WarpOp::All: return "__all_sync";
    case WarpOp::MatchAny: return "__match_any_sync";
  }
  return "?";
}

std::string hex(unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

struct Runner {
  std::vector<std::unique_ptr<FiberStack>> stacks;
  std::vector<Lane> lanes;
  std::vector<Warp> warps;
  FiberContext scheduler;
  BlockState block{};
  Lane* current = nullptr;
  const char* kernel = "";
  void (*body)(void*) = nullptr;
  void* ctx = nullptr;
  int threads = 0, barrier_arrived = 0, exited = 0;
  bool running = false;
  // Sync addresses for ThreadSanitizer: [0] the block barrier, [1 + w] warp w's collectives.
  // Blocks are also ordered one after another (the scheduler acquires launch_end, which every
  // exiting thread releases, and releases launch_start, which every starting thread acquires,
  // between two blocks), because they reuse the same
  // `__shared__` storage here; so TSan reports races within a block (a missing __syncthreads or
  // __syncwarp), not between blocks of one launch. Raw memory: the scheduler's accesses must stay
  // in its untracked functions.
  char* sync = nullptr;
  char launch_start = 0, launch_end = 0;

  // Lane slot t keeps its fiber context (and TSan fiber) from block to block and launch to launch.
  ~Runner() {
    for (Lane& lane : lanes) fiber_release(lane.fiber);
    delete[] sync;
  }

  [[noreturn]] void fail(const std::string& what) const {
    const std::string where = std::string("block (") + std::to_string(block.block_idx.x) + "," +
                              std::to_string(block.block_idx.y) + "," + std::to_string(block.block_idx.z) +
                              ") of a " + std::to_string(block.grid_dim.x) + "x" + std::to_string(block.grid_dim.y) +
                              "x" + std::to_string(block.grid_dim.z) + " grid, " + std::to_string(threads) +
                              " threads per block: " + what;
    device_abort(kernel, where.c_str());
  }
};

thread_local std::unique_ptr<Runner> t_runner;

Runner& runner() {
  if (!t_runner) t_runner = std::make_unique<Runner>();
  return *t_runner;
}

TANDEM_EMU_UNTRACKED void lane_entry(void* arg) {
  Lane& lane = *static_cast<Lane*>(arg);
  Runner& r = *t_runner;
  tsan_acquire(&r.launch_start);  // after the host's work and the blocks before this one
  r.body(r.ctx);
  lane.status = LaneStatus::Exited;
  ++r.exited;
  Warp& w = r.warps[size_t(lane.warp)];
  const unsigned bit = 1u << lane.lane;
  w.exited |= bit;
  if (w.arrived && (w.mask & bit))
    r.fail("thread " + std::to_string(lane.warp * 32 + lane.lane) + " (warp " + std::to_string(lane.warp) +
           ", lane " + std::to_string(lane.lane) + ") exited while lanes " + hex(w.arrived) + " wait for it in " +
           op_name(w.op) + " with mask " + hex(w.mask));
  tsan_release(&r.launch_end);
  fiber_switch(lane.fiber, r.scheduler, /*from_finished=*/true);
}

TANDEM_EMU_UNTRACKED void yield_to_scheduler(Runner& r, Lane& lane) { fiber_switch(lane.fiber, r.scheduler); }

TANDEM_EMU_UNTRACKED [[noreturn]] void diagnose_stall(Runner& r) {
  int at_barrier = 0;
  for (int i = 0; i < r.threads; ++i) at_barrier += r.lanes[size_t(i)].status == LaneStatus::AtBarrier;
  std::string why;
  for (size_t wi = 0; wi < r.warps.size(); ++wi) {
    const Warp& w = r.warps[wi];
    if (!w.arrived) continue;
    unsigned barrier_lanes = 0;
    for (int l = 0; l < 32; ++l) {
      const size_t t = wi * 32 + size_t(l);
      if (t < size_t(r.threads) && r.lanes[t].status == LaneStatus::AtBarrier) barrier_lanes |= 1u << l;
    }
    why += "warp " + std::to_string(wi) + " waits in " + op_name(w.op) + " with mask " + hex(w.mask) + ": lanes " +
           hex(w.arrived) + " arrived, " + hex(w.mask & ~w.arrived) + " never will (exited " +
           hex(w.mask & w.exited) + ", absent " + hex(w.mask & ~w.present) + ", at __syncthreads " +
           hex(w.mask & barrier_lanes) + "); ";
  }
  if (at_barrier)
    why += std::to_string(at_barrier) + " of " + std::to_string(r.threads) + " threads wait at __syncthreads, " +
           std::to_string(r.exited) + " have exited (every thread of a block must reach each barrier)";
  r.fail("no thread can continue: " + why);
}

TANDEM_EMU_UNTRACKED void run_block(Runner& r) {
  const int n = r.threads;
  r.barrier_arrived = 0;
  r.exited = 0;
  for (size_t w = 0; w < r.warps.size(); ++w) {
    const int lanes = std::min(32, n - int(w) * 32);
    r.warps[w] = Warp{};
    r.warps[w].present = lanes == 32 ? ~0u : (1u << lanes) - 1;
  }
  const dim3 bd = r.block.block_dim;
  for (int t = 0; t < n; ++t) {
    Lane& lane = r.lanes[size_t(t)];
    lane.state.thread_idx = uint3{unsigned(t) % bd.x, unsigned(t) / bd.x % bd.y, unsigned(t) / (bd.x * bd.y)};
    lane.status = LaneStatus::Runnable;
    lane.warp = t / 32;
    lane.lane = t % 32;
    fiber_init(lane.fiber, *r.stacks[size_t(t)], &lane_entry, &lane);
  }
  while (r.exited < n) {
    bool progressed = false;
    for (int t = 0; t < n; ++t) {
      Lane& lane = r.lanes[size_t(t)];
      if (lane.status != LaneStatus::Runnable) continue;
      progressed = true;
      r.current = &lane;
      t_thread = &lane.state;
      fiber_switch(r.scheduler, lane.fiber);
    }
    if (!progressed) diagnose_stall(r);
  }
  r.current = nullptr;
  t_thread = nullptr;
}

// The result lane `l` of a completed collective receives.
TANDEM_EMU_UNTRACKED uint64_t collective_result(const Runner& r, const Warp& w, size_t warp, const Lane& me) {
  const Lane* lanes = &r.lanes[warp * 32];
  auto value_of = [&](int src) -> uint64_t {
    if (!(w.mask & (1u << src)))
      r.fail(std::string(op_name(w.op)) + " in warp " + std::to_string(warp) + ": lane " + std::to_string(me.lane) +
             " reads lane " + std::to_string(src) + ", which is not in the mask " + hex(w.mask));
    return lanes[src].value;
  };
  const int width = me.width, segment = me.lane & ~(width - 1);
  switch (w.op) {
    case WarpOp::Sync: return 0;
    case WarpOp::ShuffleIndex: return value_of(segment + (me.arg & (width - 1)));
    case WarpOp::ShuffleUp: return (me.lane - segment) < me.arg ? me.value : value_of(me.lane - me.arg);
    case WarpOp::ShuffleDown: return (me.lane - segment) + me.arg >= width ? me.value : value_of(me.lane + me.arg);
    case WarpOp::ShuffleXor: {
      const int src = me.lane ^ me.arg;
      return (src & ~(width - 1)) != segment || src > 31 ? me.value : value_of(src);
    }
    case WarpOp::Ballot:
    case WarpOp::Any:
    case WarpOp::All:
    case WarpOp::MatchAny: {
      unsigned set = 0;
      for (int l = 0; l < 32; ++l) {
        if (!(w.mask & (1u << l))) continue;
        const bool hit = w.op == WarpOp::MatchAny ? lanes[l].value == me.value : lanes[l].value != 0;
        if (hit) set |= 1u << l;
      }
      if (w.op == WarpOp::Any) return set != 0;
      if (w.op == WarpOp::All) return set == w.mask;
      return set;
    }
  }
  return 0;
}

}  // namespace

void device_abort(const char* kernel, const char* message) {
  std::fprintf(stderr, "tandem CUDA emulator: kernel %s: %s\n", kernel, message);
  std::fflush(stderr);
  std::abort();
}

TANDEM_EMU_UNTRACKED void block_barrier() {
  Runner& r = *t_runner;
  Lane& me = *r.current;
  tsan_release(r.sync);
  if (++r.barrier_arrived == r.threads) {
    r.barrier_arrived = 0;
    for (int t = 0; t < r.threads; ++t)
      if (r.lanes[size_t(t)].status == LaneStatus::AtBarrier) r.lanes[size_t(t)].status = LaneStatus::Runnable;
  } else {
    me.status = LaneStatus::AtBarrier;
    yield_to_scheduler(r, me);
  }
  tsan_acquire(r.sync);
}

TANDEM_EMU_UNTRACKED uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width) {
  Runner& r = *t_runner;
  Lane& me = *r.current;
  const size_t wi = size_t(me.warp);
  Warp& w = r.warps[wi];
  const unsigned bit = 1u << me.lane;
  // Built only when a check fails: every shuffle of every lane comes through here.
  const auto who = [&] {
    return std::string(op_name(op)) + " in warp " + std::to_string(wi) + ", lane " + std::to_string(me.lane) + ": ";
  };
  if (width < 1 || width > 32 || (width & (width - 1))) r.fail(who() + "width " + std::to_string(width) + " is not a power of two in 1..32");
  if (!(mask & bit)) r.fail(who() + "the mask " + hex(mask) + " does not include the calling lane");
  if (mask & ~w.present) r.fail(who() + "the mask " + hex(mask) + " names lanes the block does not have: " + hex(mask & ~w.present));
  if (mask & w.exited) r.fail(who() + "the mask " + hex(mask) + " names lanes that have exited: " + hex(mask & w.exited));
  if (w.arrived == 0) {
    w.mask = mask;
    w.op = op;
  } else if (w.mask != mask || w.op != op) {
    r.fail(who() + "lanes " + hex(w.arrived) + " wait in " + op_name(w.op) + " with mask " + hex(w.mask) +
           " while this lane calls it with mask " + hex(mask));
  }
  me.value = value;
  me.arg = arg;
  me.width = width;
  w.arrived |= bit;
  void* sync = r.sync + 1 + wi;
  tsan_release(sync);
  if (w.arrived == mask) {
    for (int l = 0; l < 32; ++l) {
      if (!(mask & (1u << l))) continue;
      Lane& other = r.lanes[wi * 32 + size_t(l)];
      other.result = collective_result(r, w, wi, other);
      if (other.status == LaneStatus::InCollective) other.status = LaneStatus::Runnable;
    }
    w.arrived = 0;
  } else {
    me.status = LaneStatus::InCollective;
    yield_to_scheduler(r, me);
  }
  tsan_acquire(sync);
  return me.result;
}

TANDEM_EMU_UNTRACKED unsigned active_lanes() {
  Runner& r = *t_runner;
  const Warp& w = r.warps[size_t(r.current->warp)];
  return w.present & ~w.exited;
}

TANDEM_EMU_UNTRACKED cudaError_t run_grid(const char* kernel, dim3 grid, dim3 block, size_t shared_bytes, void (*body)(void*), void* ctx) {
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (threads == 0 || threads > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
      grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535 || shared_bytes > 48 * 1024)
    return cudaErrorInvalidConfiguration;
  if (shared_bytes > 0) device_abort(kernel, "dynamic shared memory (a non-zero third launch argument) is not emulated");
  Runner& r = runner();
  if (r.running) device_abort(kernel, "launched from inside another kernel (dynamic parallelism is not emulated)");
  r.running = true;
  r.kernel = kernel;
  r.body = body;
  r.ctx = ctx;
  r.threads = int(threads);
  while (r.stacks.size() < threads) r.stacks.push_back(std::make_unique<FiberStack>(default_fiber_stack_bytes()));
  if (r.lanes.size() < threads) r.lanes.resize(threads);
  if (r.warps.size() < (threads + 31) / 32) {
    delete[] r.sync;
    r.sync = new char[(threads + 31) / 32 + 1];
  }
  r.warps.resize((threads + 31) / 32);
  r.block.block_dim = block;
  r.block.grid_dim = grid;
  t_block = &r.block;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        r.block.block_idx = uint3{x, y, z};
        tsan_acquire(&r.launch_end);
        tsan_release(&r.launch_start);
        run_block(r);
      }
  tsan_acquire(&r.launch_end);
  t_block = nullptr;
  r.running = false;
  return cudaSuccess;
}

}  // namespace tandem::emu
