// Optimizer: parameter groups, per-parameter state and the step loop shared by SGD, Adam and
// AdamW. Each group carries its own hyper-parameters under PyTorch's param_group keys ("lr",
// "momentum", "betas", ...) in a JSON object, so schedulers can set "lr" on any optimizer and
// a checkpoint stores groups exactly as torch.optim's state_dict()["param_groups"] does.
// The update itself runs in the parameter's backend (Backend::sgd_step_multi /
// adam_step_multi, once per group, device and dtype).
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/nn/state_dict.h"
#include "tensor/tensor.h"

namespace tandem::optim {

struct ParamGroup {
  std::vector<Tensor> params;
  // Hyper-parameters of this group. Given to a constructor it holds only the overrides
  // (e.g. {{"lr", 0.01}}); the optimizer fills in its defaults and validates the result.
  nlohmann::json options = nlohmann::json::object();

  double lr() const { return options.at("lr").get<double>(); }
  void set_lr(double lr) { options["lr"] = lr; }
};

// What a checkpoint stores, laid out as torch.optim's state_dict():
//  state:        "<param index>.<state name>" -> tensor, e.g. "0.momentum_buffer",
//                "3.exp_avg", "3.step" (a float32 scalar, as PyTorch keeps it);
//  param_groups: [{"lr": 0.1, ..., "params": [0, 1, 2]}, ...].
// Parameters are numbered in group order, then in order within each group.
struct OptimizerStateDict {
  StateDict state;
  nlohmann::json param_groups = nlohmann::json::array();
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual std::string name() const = 0;

  // Updates every parameter that has a gradient; parameters without one are skipped.
  void step();
  // Drops (set_to_none) or zeroes every parameter's gradient.
  void zero_grad(bool set_to_none = true);

  // Adds a group; missing hyper-parameters take the optimizer's defaults. A parameter may
  // belong to one group only (ValueError otherwise).
  void add_param_group(ParamGroup group);
  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  const nlohmann::json& defaults() const { return defaults_; }

  // State tensors are detached and share storage with the optimizer (clone to snapshot).
  OptimizerStateDict state_dict() const;
  // Checks the layout first (group count and sizes, parameter indices, state shapes) and
  // throws StateDictError without changing anything when it does not fit; then replaces
  // every group's hyper-parameters and all state (moved to each parameter's device, cast to
  // its dtype; "step" stays a float32 scalar on the host).
  void load_state_dict(const OptimizerStateDict& state);

  // The named state of one parameter ("momentum_buffer", "exp_avg", ...); empty before its
  // first step.
  const StateDict& state_of(const Tensor& param) const;
  // Bytes held by all state tensors (what sharding the optimizer divides).
  int64_t state_bytes() const;
  // Drops every parameter's state (the next step starts as the first did); groups stay.
  void clear_state();

  // A new optimizer of this class over `groups` (whose options are complete, as
  // param_groups() holds them), for ddp_sharded, which gives each rank the pieces of the
  // parameters it owns. Only an optimizer whose update of an element depends on nothing but that
  // element's gradient and state and its group's options can be split so; the default (nullptr)
  // says this one cannot. SGD, Adam and AdamW can.
  virtual std::unique_ptr<Optimizer> make_shard_optimizer(std::vector<ParamGroup> /*groups*/) const { return nullptr; }

 protected:
  explicit Optimizer(nlohmann::json defaults) : defaults_(std::move(defaults)) {}
  // Derived constructors call this last (validate is virtual, so not from the base ctor).
  void init_groups(std::vector<ParamGroup> groups);

  // Throws ValueError when a group's hyper-parameters are outside what is allowed.
  virtual void validate(const nlohmann::json& options) const = 0;
  // One parameter about to be updated: grad is contiguous with the param's dtype, shape and
  // device; state is this parameter's state (empty before its first update).
  struct ParamUpdate {
    Tensor param;
    Tensor grad;
    StateDict* state;
  };
  // Updates in place every parameter of one group that has a gradient, with the group's
  // options. SGD and Adam hand the whole list to the backend's multi-tensor update (one
  // fused launch per group on CUDA).
  virtual void update_group(const std::vector<ParamUpdate>& items, const nlohmann::json& options) = 0;

  nlohmann::json defaults_;
  std::vector<ParamGroup> groups_;
  std::unordered_map<const TensorImpl*, StateDict> state_;
};

// GPT training's grouping (nanoGPT, minGPT): parameters of 2 or more dimensions (matmul weights,
// embeddings) decay with the optimizer's weight_decay, the others (biases, norm weights) do not:
// {decay group (no overrides), no-decay group ({"weight_decay": 0})}, empty groups left out.
std::vector<ParamGroup> weight_decay_groups(const std::vector<Tensor>& params);

// "0.1" rather than std::to_string's "0.100000", for error messages.
std::string format_number(double v);

}  // namespace tandem::optim
