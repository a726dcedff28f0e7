#include "engine/optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "base/error.h"
#include "base/json_integer.h"

namespace tandem::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (auto& group : optimizer_.param_groups()) {
    if (!group.options.contains("initial_lr")) group.options["initial_lr"] = group.lr();
    base_lrs_.push_back(group.options["initial_lr"].get<double>());
  }
}

void LRScheduler::start() { step(); }

void LRScheduler::step() {
  resume_at(last_epoch_ + 1);
}

void LRScheduler::resume_at(int64_t epoch) {
  if (epoch < 0) throw ValueError(name() + ": cannot resume at step " + std::to_string(epoch) + "; expected >= 0");
  last_epoch_ = epoch;
  auto& groups = optimizer_.param_groups();
  if (groups.size() != base_lrs_.size())
    throw ValueError(name() + ": the optimizer has " + std::to_string(groups.size()) + " parameter groups but the "
                     "scheduler was built for " + std::to_string(base_lrs_.size()) + "; create the scheduler after "
                     "adding every group");
  last_lr_.clear();
  for (size_t i = 0; i < groups.size(); ++i) {
    const double lr = lr_at(base_lrs_[i], last_epoch_);
    groups[i].set_lr(lr);
    last_lr_.push_back(lr);
  }
}

nlohmann::json LRScheduler::state_dict() const {
  return {{"last_epoch", last_epoch_}, {"base_lrs", base_lrs_}, {"_last_lr", last_lr_}};
}

void LRScheduler::load_state_dict(const nlohmann::json& s) {
  auto base = s.at("base_lrs").get<std::vector<double>>();
  if (base.size() != base_lrs_.size())
    throw StateDictError(name() + ": the loaded state has " + std::to_string(base.size()) + " base rates but the "
                         "optimizer has " + std::to_string(base_lrs_.size()) + " parameter groups");
  last_epoch_ = json_integer(s.at("last_epoch"), name() + " state last_epoch", -1, kMaxJsonCounter);
  base_lrs_ = std::move(base);
  last_lr_ = s.at("_last_lr").get<std::vector<double>>();
}

// ---------------- StepLR ----------------

StepLR::StepLR(Optimizer& opt, int64_t step_size_, double gamma_)
    : LRScheduler(opt), step_size(step_size_), gamma(gamma_) {
  if (step_size <= 0) throw ValueError("StepLR: step_size must be > 0, got " + std::to_string(step_size));
  if (!(gamma > 0)) throw ValueError("StepLR: gamma must be > 0, got " + format_number(gamma));
  start();
}

double StepLR::lr_at(double base_lr, int64_t epoch) const {
  return base_lr * std::pow(gamma, double(epoch / step_size));
}

nlohmann::json StepLR::state_dict() const {
  auto s = LRScheduler::state_dict();
  s["step_size"] = step_size;
  s["gamma"] = gamma;
  return s;
}

// ---------------- CosineAnnealingLR ----------------

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t T_max_, double eta_min_)
    : LRScheduler(opt), T_max(T_max_), eta_min(eta_min_) {
  if (T_max <= 0) throw ValueError("CosineAnnealingLR: T_max must be > 0, got " + std::to_string(T_max));
  if (!(eta_min >= 0)) throw ValueError("CosineAnnealingLR: eta_min must be >= 0, got " + format_number(eta_min));
  start();
}

double CosineAnnealingLR::lr_at(double base_lr, int64_t epoch) const {
  return eta_min + (base_lr - eta_min) * (1.0 + std::cos(std::numbers::pi * double(epoch) / double(T_max))) / 2.0;
}

nlohmann::json CosineAnnealingLR::state_dict() const {
  auto s = LRScheduler::state_dict();
  s["T_max"] = T_max;
  s["eta_min"] = eta_min;
  return s;
}

// ---------------- LinearLR ----------------

LinearLR::LinearLR(Optimizer& opt, double start_f, double end_f, int64_t total)
    : LRScheduler(opt), start_factor(start_f), end_factor(end_f), total_iters(total) {
  if (!(start_factor > 0 && start_factor <= 1))
    throw ValueError("LinearLR: start_factor must be in (0, 1], got " + format_number(start_factor));
  if (!(end_factor >= 0 && end_factor <= 1))
    throw ValueError("LinearLR: end_factor must be in [0, 1], got " + format_number(end_factor));
  if (total_iters <= 0) throw ValueError("LinearLR: total_iters must be > 0, got " + std::to_string(total_iters));
  start();
}

double LinearLR::lr_at(double base_lr, int64_t epoch) const {
  const double progress = double(std::min(epoch, total_iters)) / double(total_iters);
  return base_lr * (start_factor + (end_factor - start_factor) * progress);
}

nlohmann::json LinearLR::state_dict() const {
  auto s = LRScheduler::state_dict();
  s["start_factor"] = start_factor;
  s["end_factor"] = end_factor;
  s["total_iters"] = total_iters;
  return s;
}

// ---------------- SequentialLR ----------------

SequentialLR::SequentialLR(Optimizer& opt, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones)
    : LRScheduler(opt), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  if (schedulers_.empty()) throw ValueError("SequentialLR: needs at least one scheduler");
  if (milestones_.size() + 1 != schedulers_.size())
    throw ValueError("SequentialLR: needs one milestone fewer than schedulers, got " + std::to_string(schedulers_.size()) +
                     " schedulers and " + std::to_string(milestones_.size()) + " milestones");
  for (size_t i = 0; i < milestones_.size(); ++i)
    if (milestones_[i] <= 0 || (i > 0 && milestones_[i] <= milestones_[i - 1]))
      throw ValueError("SequentialLR: milestones must be positive and increasing, got milestone " +
                       std::to_string(milestones_[i]) + " at position " + std::to_string(i));
  for (const auto& s : schedulers_)
    if (!s) throw ValueError("SequentialLR: a scheduler is null");
  start();
}

double SequentialLR::lr_at(double base_lr, int64_t epoch) const {
  // The active scheduler is the one after the last milestone <= epoch.
  const size_t i = size_t(std::upper_bound(milestones_.begin(), milestones_.end(), epoch) - milestones_.begin());
  const int64_t since = i == 0 ? epoch : epoch - milestones_[i - 1];
  return schedulers_[i]->lr_at(base_lr, since);
}

nlohmann::json SequentialLR::state_dict() const {
  auto s = LRScheduler::state_dict();
  s["_milestones"] = milestones_;
  s["_schedulers"] = nlohmann::json::array();
  for (const auto& sub : schedulers_) s["_schedulers"].push_back(sub->state_dict());
  return s;
}

void SequentialLR::load_state_dict(const nlohmann::json& s) {
  LRScheduler::load_state_dict(s);
  if (s.contains("_schedulers")) {
    const auto& subs = s["_schedulers"];
    if (subs.size() != schedulers_.size())
      throw StateDictError("SequentialLR: the loaded state has " + std::to_string(subs.size()) +
                           " schedulers, this one has " + std::to_string(schedulers_.size()));
    for (size_t i = 0; i < subs.size(); ++i) schedulers_[i]->load_state_dict(subs[i]);
  }
}

std::shared_ptr<SequentialLR> warmup_cosine(Optimizer& opt, int64_t warmup_iters, int64_t total_iters,
                                            double start_factor, double eta_min) {
  if (warmup_iters <= 0 || total_iters <= warmup_iters)
    throw ValueError("warmup_cosine: needs 0 < warmup_iters < total_iters, got warmup_iters=" +
                     std::to_string(warmup_iters) + ", total_iters=" + std::to_string(total_iters));
  auto warmup = std::make_shared<LinearLR>(opt, start_factor, 1.0, warmup_iters);
  auto cosine = std::make_shared<CosineAnnealingLR>(opt, total_iters - warmup_iters, eta_min);
  return std::make_shared<SequentialLR>(opt, std::vector<std::shared_ptr<LRScheduler>>{warmup, cosine},
                                        std::vector<int64_t>{warmup_iters});
}

}  // namespace tandem::optim
