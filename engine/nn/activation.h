// Parameter-free layers: ReLU, GELU, Dropout, Flatten. They are modules so Sequential can hold
// them and state_dict numbering matches PyTorch's (a ReLU takes index "2" in a Sequential).
#pragma once
#include <string>

#include "engine/nn/module.h"

namespace tandem::nn {

class ReLU : public Module {
 public:
  std::string name() const override { return "ReLU"; }
  Tensor forward(const Tensor& x) override;
  std::string fusable_activation() const override { return "relu"; }
};

// approximate: "none" (exact, erf) or "tanh".
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  std::string name() const override { return "GELU"; }
  std::string extra_repr() const override { return "approximate='" + approximate + "'"; }
  Tensor forward(const Tensor& x) override;
  std::string fusable_activation() const override { return approximate == "tanh" ? "gelu_tanh" : ""; }

  std::string approximate;
};

// Zeroes each element with probability p in training mode and scales the rest by 1/(1-p);
// the identity in eval mode. Masks come from the default Philox generator.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  std::string name() const override { return "Dropout"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;

  double p;
};

// Flattens dims start_dim..end_dim into one (defaults keep the batch dim).
class Flatten : public Module {
 public:
  explicit Flatten(int start_dim = 1, int end_dim = -1) : start_dim(start_dim), end_dim(end_dim) {}
  std::string name() const override { return "Flatten"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;

  int start_dim, end_dim;
};

}  // namespace tandem::nn
