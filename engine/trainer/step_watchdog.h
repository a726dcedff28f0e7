// StepWatchdog: notices a rank that stops making progress anywhere, not only inside a
// collective (a backward stuck in a kernel, a data loader that never delivers, a deadlock in
// user code). The fit loop calls beat() at every phase of a step (waiting for the batch,
// training_step, backward, optimizer step, batch-end hooks) and every evaluation batch; a
// thread checks that the last beat is younger than the timeout. When it is not, the thread
// calls on_stuck with where the rank is stuck and how long it has waited. A phase that waits for
// the other ranks (a collective: the gradient allreduce, a checkpoint's barriers) gets the
// collective deadline instead, since the collective timeout names the late rank better and the
// late rank's own watchdog fires first. on_stuck must end
// the process (the stuck thread cannot be unwound). The Trainer's on_stuck prints the error,
// records it for the restart agent (job_failure.h) and exits with status 1, which makes
// mpirun end the other ranks.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace tandem::trainer {

class StepWatchdog {
 public:
  // timeout_s > 0; peer_timeout_s (>= timeout_s) for phases that wait for other ranks.
  // on_stuck(where, waited_s) runs on the watchdog's thread.
  StepWatchdog(double timeout_s, double peer_timeout_s,
               std::function<void(const std::string& where, double waited_s)> on_stuck);
  ~StepWatchdog();  // stops the thread
  StepWatchdog(const StepWatchdog&) = delete;
  StepWatchdog& operator=(const StepWatchdog&) = delete;

  // Progress: the rank enters `phase` (a string literal) at this position of the fit loop;
  // waits_for_peers: the phase blocks in collectives.
  void beat(const char* phase, bool waits_for_peers, int64_t epoch, int64_t batch, int64_t global_step);

  double timeout_s() const { return timeout_s_; }

 private:
  void watch();

  const double timeout_s_, peer_timeout_s_;
  std::function<void(const std::string&, double)> on_stuck_;
  std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point last_beat_;
  const char* phase_ = "starting fit";
  bool waits_for_peers_ = false;
  int64_t epoch_ = 0, batch_ = 0, global_step_ = 0;
  std::thread thread_;
};

}  // namespace tandem::trainer
