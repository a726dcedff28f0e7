// The CPU kernels' one thread pool: persistent workers (std::thread) that a kernel hands
// independent tasks to, instead of OpenMP parallel regions.
//
// - Size: max_threads() threads take part in a job, the calling thread and max_threads() - 1
//   workers. The default is OMP_NUM_THREADS when it is set (its first entry, as libgomp reads
//   it), else the CPUs this process may run on (sched_getaffinity: one under `mpirun
//   --bind-to core`). set_max_threads() changes it.
// - Waiting: a worker spins briefly after a job (back-to-back kernels of a step hand it the next
//   one without a sleep), then parks on a futex (std::atomic::wait), so an idle pool burns no
//   CPU beside other processes.
// - Callers: any thread may call. One job runs at a time; a call made while another thread's
//   job is running runs its tasks inline on the calling thread (never waits for the pool, so
//   a host program's own threads cannot deadlock on it), and so does a call from inside a task
//   (nested parallelism is inline).
// - Exceptions: the first exception a task throws is rethrown on the calling thread once every
//   started task has finished; tasks not yet started are skipped.
// - Determinism: a task is identified by its index, never by the thread that runs it, so work
//   split by task index gives the same result whichever thread runs it.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace tandem::cpu {

// Threads a parallel job uses (the caller included), >= 1.
int max_threads();
// Sets the number of threads (>= 1; the workers are restarted when it changes). Must not be
// called from inside a task.
void set_max_threads(int threads);
// True on a thread that is running a pool task (where parallel_tasks runs inline).
bool in_parallel_region();

using TaskFn = void (*)(void* context, int64_t task);
// Runs fn(context, t) for t in [0, tasks) on the pool and the calling thread; returns when
// all have run.
void run_tasks(int64_t tasks, TaskFn fn, void* context);

// body(t) for t in [0, tasks), in parallel.
template <typename Body>
void parallel_tasks(int64_t tasks, Body&& body) {
  using B = std::remove_reference_t<Body>;
  if (tasks <= 0) return;
  run_tasks(tasks, [](void* c, int64_t t) { (*static_cast<B*>(c))(t); }, const_cast<std::remove_const_t<B>*>(&body));
}

// body(begin, end) over [0, n) cut into equal contiguous chunks of at least `grain` items, at
// most one chunk per thread; one chunk (on the caller) when n < 2 * grain.
template <typename Body>
void parallel_for(int64_t n, int64_t grain, Body&& body) {
  if (n <= 0) return;
  const int64_t chunks = std::min<int64_t>(max_threads(), n / std::max<int64_t>(grain, 1));
  if (chunks <= 1 || in_parallel_region()) {
    body(int64_t(0), n);
    return;
  }
  parallel_tasks(chunks, [&](int64_t t) { body(n * t / chunks, n * (t + 1) / chunks); });
}

// body(i) for i in [0, n): in one contiguous chunk per thread when `parallel`, else in order
// on the calling thread (the form of OpenMP's `parallel for schedule(static) if (parallel)`).
template <typename Body>
void parallel_loop(int64_t n, bool parallel, Body&& body) {
  if (!parallel) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
  parallel_for(n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) body(i);
  });
}

}  // namespace tandem::cpu
