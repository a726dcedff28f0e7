// The step watchdog (engine/trainer/step_watchdog.h) on its own: regular beats keep it quiet;
// when they stop it reports the last phase and position once the timeout has passed, and a
// phase that waits for other ranks gets the longer peer deadline. (The whole path, a rank
// stuck inside backward ending the job, is tests/elastic.)
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "engine/trainer/step_watchdog.h"

namespace tandem::trainer {
namespace {

using namespace std::chrono_literals;

struct Stuck {
  std::string where;
  double waited = 0;
};

TEST(StepWatchdog, NamesWhereARankStoppedOnceTheTimeoutHasPassed) {
  std::promise<Stuck> fired;
  std::future<Stuck> report = fired.get_future();
  StepWatchdog watchdog(0.3, 30.0, [&](const std::string& where, double waited) { fired.set_value({where, waited}); });
  for (int i = 0; i < 12; ++i) {  // 0.6 s of progress, twice the timeout: never stuck
    watchdog.beat("training_step", false, 0, i, i);
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(report.wait_for(0ms), std::future_status::timeout) << "fired while the rank made progress";
  const auto last_beat = std::chrono::steady_clock::now();
  watchdog.beat("backward", false, 1, 7, 9);
  ASSERT_EQ(report.wait_for(5s), std::future_status::ready) << "never fired";
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_beat).count();
  const Stuck stuck = report.get();
  EXPECT_EQ(stuck.where, "backward at epoch 1, batch 7 (global step 9)");
  EXPECT_GE(stuck.waited, 0.3);
  EXPECT_GE(seconds, 0.3);
  EXPECT_LT(seconds, 0.3 + 0.5);  // checked every timeout / 4
}

TEST(StepWatchdog, APhaseThatWaitsForPeersGetsThePeerDeadline) {
  std::promise<Stuck> fired;
  std::future<Stuck> report = fired.get_future();
  StepWatchdog watchdog(0.2, 1.0, [&](const std::string& where, double waited) { fired.set_value({where, waited}); });
  watchdog.beat("the optimizer step", true, 0, 3, 3);
  EXPECT_EQ(report.wait_for(600ms), std::future_status::timeout) << "a rank waiting in a collective got the short deadline";
  ASSERT_EQ(report.wait_for(5s), std::future_status::ready) << "never fired";
  const Stuck stuck = report.get();
  EXPECT_EQ(stuck.where, "the optimizer step at epoch 0, batch 3 (global step 3)");
  EXPECT_GE(stuck.waited, 1.0);
}

}  // namespace
}  // namespace tandem::trainer
