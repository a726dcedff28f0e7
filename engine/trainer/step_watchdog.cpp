#include "engine/trainer/step_watchdog.h"

#include <algorithm>

namespace tandem::trainer {

StepWatchdog::StepWatchdog(double timeout_s, double peer_timeout_s, std::function<void(const std::string&, double)> on_stuck)
    : timeout_s_(timeout_s), peer_timeout_s_(std::max(timeout_s, peer_timeout_s)), on_stuck_(std::move(on_stuck)), last_beat_(std::chrono::steady_clock::now()) {
  thread_ = std::thread([this] { watch(); });
}

StepWatchdog::~StepWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
}

void StepWatchdog::beat(const char* phase, bool waits_for_peers, int64_t epoch, int64_t batch, int64_t global_step) {
  std::lock_guard<std::mutex> lock(mutex_);
  last_beat_ = std::chrono::steady_clock::now();
  phase_ = phase;
  waits_for_peers_ = waits_for_peers;
  epoch_ = epoch;
  batch_ = batch;
  global_step_ = global_step;
}

void StepWatchdog::watch() {
  // Checked a few times per timeout (at most every 0.5 s), so a stuck rank is noticed within
  // timeout + min(timeout / 4, 0.5 s).
  const auto period = std::chrono::duration<double>(std::min(timeout_s_ / 4.0, 0.5));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_cv_.wait_for(lock, period, [this] { return stopping_; })) {
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_beat_).count();
    if (waited < (waits_for_peers_ ? peer_timeout_s_ : timeout_s_)) continue;
    const std::string where = std::string(phase_) + " at epoch " + std::to_string(epoch_) + ", batch " +
                              std::to_string(batch_) + " (global step " + std::to_string(global_step_) + ")";
    lock.unlock();
    on_stuck_(where, waited);
    return;
  }
}

}  // namespace tandem::trainer
