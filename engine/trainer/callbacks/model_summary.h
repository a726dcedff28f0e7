// ModelSummary: prints the parameter table at the start of fit, in Lightning's shape:
//
//     | Name | Type       | Params
//   ------------------------------------
//   0 | net  | Sequential | 101 K
//   ------------------------------------
//   101 K     Trainable params
//   0         Non-trainable params
//   101 K     Total params
//   0.404     Total estimated model params size (MB)
//
// max_depth 1 lists the module's direct children; deeper levels add "net.0", "net.1", ...
#pragma once
#include <cstdint>
#include <string>

#include "engine/nn/module.h"
#include "engine/trainer/callback.h"

namespace tandem::trainer {

class ModelSummary : public Callback {
 public:
  explicit ModelSummary(int max_depth = 1) : max_depth_(max_depth) {}
  std::string name() const override { return "ModelSummary"; }
  void on_fit_start(Trainer& trainer, LightningModule& module) override;
  int max_depth() const { return max_depth_; }

  // The table as text (without printing it).
  static std::string summarize(const nn::Module& module, int max_depth = 1);
  // 12345 -> "12.3 K", 1234567 -> "1.2 M".
  static std::string human_count(int64_t n);

 private:
  int max_depth_;
};

}  // namespace tandem::trainer
