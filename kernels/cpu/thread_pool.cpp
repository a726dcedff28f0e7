#include "kernels/cpu/thread_pool.h"

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"

namespace tandem::cpu {

namespace {

thread_local bool tl_in_task = false;

// How long an idle worker (or a caller waiting for its workers) polls before it parks: long
// enough to catch the next kernel of a step (a worker woken from a futex costs the step a system
// call and a reschedule: 2% of the MLP step's samples when the poll was 2000 pauses, 40 us
// here), short enough not to steal a shared core for long. A time, not a count of pauses: one
// pause takes ~20 ns on this AMD EPYC and 5-40 ns on others.
constexpr std::chrono::microseconds kSpinTime{250};

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Polls done() for up to kSpinTime; false when it is still not done (the caller then parks).
template <typename Done>
bool spin_until(Done&& done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (unsigned i = 1;; ++i) {
    if (done()) return true;
    cpu_relax();
    if (i % 64 == 0 && std::chrono::steady_clock::now() >= deadline) return false;
  }
}

int default_threads() {
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);  // "4,2" (libgomp's nested list): its first entry
    if (end != env && n > 0) return int(std::min<long>(n, 1024));
  }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

class Pool {
 public:
  explicit Pool(int threads) { start(threads); }

  int threads() const { return threads_.load(std::memory_order_relaxed); }

  void resize(int threads) {
    std::lock_guard<std::mutex> lock(submit_);
    if (threads == this->threads()) return;
    stop();
    start(threads);
  }

  // Runs the job on the workers and the calling thread; false (nothing run) when another
  // thread's job holds the pool.
  bool try_run(int64_t tasks, TaskFn fn, void* context) {
    std::unique_lock<std::mutex> lock(submit_, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    fn_ = fn;
    context_ = context;
    tasks_ = tasks;
    next_.store(0, std::memory_order_relaxed);
    failed_.store(false, std::memory_order_relaxed);
    error_ = nullptr;
    state_.store(kOpen, std::memory_order_release);
    wake_.fetch_add(1, std::memory_order_release);
    wake_.notify_all();
    tl_in_task = true;
    work();
    tl_in_task = false;
    // Close the job (no worker joins after this), then wait for those that joined.
    uint64_t active = state_.fetch_and(~kOpen, std::memory_order_acq_rel) & ~kOpen;
    if (active != 0 && !spin_until([&] { return (active = state_.load(std::memory_order_acquire)) == 0; })) {
      while (active != 0) {
        state_.wait(active, std::memory_order_acquire);
        active = state_.load(std::memory_order_acquire);
      }
    }
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  static constexpr uint64_t kOpen = uint64_t(1) << 63;  // state_: kOpen | workers in the job

  void start(int threads) {
    threads_.store(threads, std::memory_order_relaxed);
    stopping_ = false;
    // The generation a worker starts from is read here, not by the worker: a stop() right after
    // start() must wake it even when it has not run yet.
    const uint32_t generation = wake_.load(std::memory_order_acquire);
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, generation] { worker_loop(generation); });
  }

  void stop() {
    stopping_ = true;
    wake_.fetch_add(1, std::memory_order_release);
    wake_.notify_all();
    for (std::thread& w : workers_) w.join();
    workers_.clear();
  }

  // Claims and runs tasks of the current job until none are left.
  void work() {
    for (;;) {
      const int64_t t = next_.fetch_add(1, std::memory_order_relaxed);
      if (t >= tasks_) return;
      if (failed_.load(std::memory_order_relaxed)) continue;
      try {
        fn_(context_, t);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex_);
        if (!error_) error_ = std::current_exception();
        failed_.store(true, std::memory_order_relaxed);
      }
    }
  }

  void worker_loop(uint32_t seen) {
    for (;;) {
      if (!spin_until([&] { return wake_.load(std::memory_order_acquire) != seen; }))
        while (wake_.load(std::memory_order_acquire) == seen) wake_.wait(seen, std::memory_order_acquire);
      seen = wake_.load(std::memory_order_acquire);
      if (stopping_) return;
      // Join the job only while it is open: its fields stay put until every joiner has left.
      uint64_t s = state_.load(std::memory_order_acquire);
      bool joined = false;
      while ((s & kOpen) && !joined)
        joined = state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire);
      if (!joined) continue;
      tl_in_task = true;
      work();
      tl_in_task = false;
      state_.fetch_sub(1, std::memory_order_acq_rel);
      state_.notify_all();
    }
  }

  std::mutex submit_;  // held by the thread whose job runs
  std::atomic<int> threads_{1};
  std::vector<std::thread> workers_;
  std::atomic<uint32_t> wake_{0};  // bumped to start a job or to stop
  std::atomic<uint64_t> state_{0};
  std::atomic<bool> stopping_{false};
  // The job, written by its caller before state_ opens it.
  TaskFn fn_ = nullptr;
  void* context_ = nullptr;
  int64_t tasks_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<bool> failed_{false};
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

// Never destroyed: kernels may run from other static destructors or detached threads at exit,
// and parked workers hold no resources the process must release.
Pool& pool() {
  static Pool* const instance = new Pool(default_threads());
  return *instance;
}

void run_inline(int64_t tasks, TaskFn fn, void* context) {
  for (int64_t t = 0; t < tasks; ++t) fn(context, t);
}

}  // namespace

int max_threads() { return pool().threads(); }

void set_max_threads(int threads) {
  if (threads < 1) throw ValueError("set_max_threads: the number of threads must be >= 1, got " + std::to_string(threads));
  if (tl_in_task) throw ValueError("set_max_threads: called from inside a thread-pool task; call it between jobs");
  pool().resize(threads);
}

bool in_parallel_region() { return tl_in_task; }

void run_tasks(int64_t tasks, TaskFn fn, void* context) {
  if (tasks <= 0) return;
  if (tasks == 1 || tl_in_task || pool().threads() == 1 || !pool().try_run(tasks, fn, context))
    run_inline(tasks, fn, context);
}

}  // namespace tandem::cpu
