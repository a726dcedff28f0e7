// Module: the base of every layer and model. It owns named parameters, buffers and submodules
// in registration order and gives them PyTorch's dotted names ("0.weight",
// "1.running_mean"), so a state_dict written here loads into the PyTorch twin and back.
//
// Moving a module (to(Device), to(DType)) rewrites each parameter's and buffer's TensorImpl in
// place: the same handles (held by the module's members, an optimizer, DDP hooks) see the
// moved data, the way PyTorch's `param.data = param.data.to(...)` keeps nn.Parameter objects.
// Do it between steps, not while a graph built from the old data is still to be backwarded.
#pragma once
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/error.h"
#include "engine/nn/state_dict.h"
#include "tensor/tensor.h"

namespace tandem::nn {

// What load_state_dict(strict=false) could not match (strict=true throws instead).
struct LoadResult {
  std::vector<std::string> missing_keys;
  std::vector<std::string> unexpected_keys;
};

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  // Modules are shared by pointer (std::shared_ptr); copying one would silently alias or
  // duplicate its parameters, so it is not allowed.
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The class name as PyTorch prints it ("Linear", "BatchNorm2d").
  virtual std::string name() const { return "Module"; }
  // Single-input forward so Sequential can chain layers. Models with other signatures
  // define their own methods and leave this one throwing.
  virtual Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input) { return forward(input); }
  // For an activation module: its name as linear() fuses it ("relu", "gelu_tanh"), so that a
  // Sequential runs a Linear followed by it as one op; "" (the default) where it cannot be fused.
  virtual std::string fusable_activation() const { return ""; }

  // ---- registration (names are non-empty, contain no '.', and are unique per module) ----
  // Registers t as a trainable leaf (requires_grad set unless requires_grad=false) and
  // returns the same handle.
  Tensor register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  // Buffers are state that is not trained (running statistics). Non-persistent buffers move
  // with the module but are left out of state_dict. An undefined tensor is allowed and means
  // "absent" (BatchNorm without running stats), as PyTorch's None buffers.
  Tensor register_buffer(const std::string& name, Tensor t, bool persistent = true);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    static_assert(std::is_base_of_v<Module, M>, "register_module needs a Module subclass");
    add_child(name, module);
    return module;
  }

  // ---- traversal, recursive by default, in registration order, dotted names ----
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  // Defined buffers only (persistent or not).
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  // Pre-order, this module first with the name "".
  std::vector<std::pair<std::string, Module*>> named_modules() const;

  // ---- mode ----
  void train(bool on = true);  // this module and all below it
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // ---- placement: in place, see the header comment ----
  Module& to(Device device);
  // Casts floating parameters and buffers only (num_batches_tracked stays int64), like
  // PyTorch; a non-floating dtype is a DTypeError.
  Module& to(DType dtype);
  // Device of the first parameter or buffer; cpu for a module without any.
  Device device() const;

  // Drops (set_to_none) or zeroes every parameter's gradient.
  void zero_grad(bool set_to_none = true);

  // ---- state ----
  // Parameters then persistent buffers of each module, depth first; tensors are detached
  // and share storage with the module (clone them to snapshot).
  StateDict state_dict() const;
  // Copies values in place (casting dtype, moving device as needed). Checks everything
  // first and throws one StateDictError listing missing keys, unexpected keys and
  // mis-shaped keys (name, expected shape, given shape) without changing anything.
  // Shape mismatches are errors even with strict=false; missing/unexpected keys are then
  // returned instead.
  LoadResult load_state_dict(const StateDict& state, bool strict = true);

  // One line per module with its settings, nested like PyTorch's print(model).
  std::string repr() const;
  // Settings shown inside the parentheses of repr ("in_features=4, out_features=2").
  virtual std::string extra_repr() const { return ""; }

 protected:
  bool training_ = true;

 private:
  struct NamedTensor {
    std::string name;
    Tensor tensor;
    bool persistent = true;
  };
  void check_new_name(const std::string& name, const char* what) const;
  std::vector<std::pair<std::string, Tensor>> collect_named(std::vector<NamedTensor> Module::*list,
                                                            bool recurse) const;
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void collect_state(const std::string& prefix, StateDict& out) const;
  void repr_into(std::string& out, int indent) const;

  std::vector<NamedTensor> params_;
  std::vector<NamedTensor> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

// Rewrites dst's TensorImpl to hold src's data (storage, shape, strides, dtype), keeping
// dst's autograd identity (requires_grad, hooks). Used by Module::to; exposed for tests and
// strategies that replicate parameters.
void replace_data_in_place(const Tensor& dst, const Tensor& src);

}  // namespace tandem::nn
