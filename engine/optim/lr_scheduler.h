// Learning-rate schedulers, as torch.optim.lr_scheduler, in closed form: the rate of a group
// at epoch e is lr_at(base_lr, e), where base_lr is the group's "initial_lr" (set to its lr
// when the first scheduler is attached). Closed forms make schedules composable
// (SequentialLR) and resumable from last_epoch alone; the price is that step() overwrites a
// manually changed lr, where PyTorch's chained forms would build on it.
//
// Like PyTorch, constructing a scheduler applies epoch 0 at once, and step() is called once
// per epoch (or per iteration, for warmup) after optimizer.step(). The scheduler keeps a
// reference to its optimizer, which must outlive it.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/optim/optimizer.h"

namespace tandem::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  virtual std::string name() const = 0;
  // Advances one epoch and writes each group's lr.
  void step();
  // The rates step() (or the constructor) last wrote, one per group.
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  // The rate for a group starting at base_lr, at epoch (>= 0).
  virtual double lr_at(double base_lr, int64_t epoch) const = 0;

  // {"last_epoch", "base_lrs", "_last_lr", plus the scheduler's settings}.
  virtual nlohmann::json state_dict() const;
  // Restores last_epoch, base_lrs and the last rates (the optimizer's own state dict
  // restores the lr in its groups).
  virtual void load_state_dict(const nlohmann::json& state);
  // Continues this schedule from step `epoch` (>= 0) and writes each group's lr for it: how a
  // resumed run whose schedule differs from its checkpoint's (a longer T_max after raising
  // max_epochs) keeps its position but follows its own schedule.
  void resume_at(int64_t epoch);

 protected:
  explicit LRScheduler(Optimizer& optimizer);
  // Derived constructors call this last: applies epoch 0 (lr_at is virtual).
  void start();

  Optimizer& optimizer_;
  int64_t last_epoch_ = -1;
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;
};

// lr = base_lr * gamma^floor(epoch / step_size).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  std::string name() const override { return "StepLR"; }
  double lr_at(double base_lr, int64_t epoch) const override;
  nlohmann::json state_dict() const override;

  const int64_t step_size;
  const double gamma;
};

// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);
  std::string name() const override { return "CosineAnnealingLR"; }
  double lr_at(double base_lr, int64_t epoch) const override;
  nlohmann::json state_dict() const override;

  const int64_t T_max;
  const double eta_min;
};

// Linear warmup: lr = base_lr * (start + (end - start) * min(epoch, total_iters) / total_iters).
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3.0, double end_factor = 1.0, int64_t total_iters = 5);
  std::string name() const override { return "LinearLR"; }
  double lr_at(double base_lr, int64_t epoch) const override;
  nlohmann::json state_dict() const override;

  const double start_factor, end_factor;
  const int64_t total_iters;
};

// Runs schedulers[i] from milestones[i-1] on, each counting its epochs from 0 at its
// milestone (as PyTorch's SequentialLR). All must drive the same optimizer.
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones);
  std::string name() const override { return "SequentialLR"; }
  double lr_at(double base_lr, int64_t epoch) const override;
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& state) override;

 private:
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

// Linear warmup from start_factor * lr to lr over warmup_iters, then cosine annealing to
// eta_min at total_iters: SequentialLR(LinearLR, CosineAnnealingLR(T_max = total - warmup)).
std::shared_ptr<SequentialLR> warmup_cosine(Optimizer& optimizer, int64_t warmup_iters, int64_t total_iters,
                                            double start_factor = 1e-3, double eta_min = 0.0);

}  // namespace tandem::optim
