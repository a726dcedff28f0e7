// Module bookkeeping: registration, traversal with dotted names, mode, placement, state.
#include "engine/nn/module.h"

#include <unordered_set>

#include "tensor/autograd/grad_mode.h"

namespace tandem::nn {

Tensor Module::forward(const Tensor&) {
  throw Error(name() + " has no single-input forward(); call its own methods, or override "
              "forward(const Tensor&) to use it inside Sequential");
}

void Module::check_new_name(const std::string& name, const char* what) const {
  if (name.empty()) throw ValueError(std::string(what) + " name must not be empty");
  if (name.find('.') != std::string::npos)
    throw ValueError(std::string(what) + " name '" + name + "' must not contain '.' (dots join nested names)");
  for (const auto& p : params_)
    if (p.name == name) throw ValueError("'" + name + "' is already a parameter of this " + this->name());
  for (const auto& b : buffers_)
    if (b.name == name) throw ValueError("'" + name + "' is already a buffer of this " + this->name());
  for (const auto& c : children_)
    if (c.first == name) throw ValueError("'" + name + "' is already a submodule of this " + this->name());
}

Tensor Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_new_name(name, "parameter");
  if (!t.defined()) throw ValueError("parameter '" + name + "' is undefined; leave it unregistered instead");
  if (!t.is_leaf()) t = t.detach();  // a parameter is a leaf, whatever computed its value
  t.requires_grad_(requires_grad);
  params_.push_back({name, t, true});
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t, bool persistent) {
  check_new_name(name, "buffer");
  buffers_.push_back({name, t, persistent});
  return t;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "submodule");
  if (!module) throw ValueError("submodule '" + name + "' is null");
  children_.emplace_back(name, std::move(module));
}

// ---------------- traversal ----------------

std::vector<std::pair<std::string, Module*>> Module::named_modules() const {
  std::vector<std::pair<std::string, Module*>> out{{"", const_cast<Module*>(this)}};
  for (const auto& [child_name, child] : children_)
    for (auto& [sub, m] : child->named_modules()) out.emplace_back(sub.empty() ? child_name : child_name + "." + sub, m);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const { return children_; }

// A tensor shared by two modules (tied weights) is listed once, under its first name, so
// optimizers do not step it twice. Undefined (absent) buffers are left out.
std::vector<std::pair<std::string, Tensor>> Module::collect_named(std::vector<NamedTensor> Module::*list,
                                                                  bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::unordered_set<const TensorImpl*> seen;
  auto add = [&](const std::string& prefix, const Module& m) {
    for (const auto& item : m.*list)
      if (item.tensor.defined() && seen.insert(item.tensor.impl_ptr().get()).second)
        out.emplace_back(prefix + item.name, item.tensor);
  };
  if (!recurse) {
    add("", *this);
    return out;
  }
  for (const auto& [prefix, m] : named_modules()) add(prefix.empty() ? "" : prefix + ".", *m);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  return collect_named(&Module::params_, recurse);
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  return collect_named(&Module::buffers_, recurse);
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

// ---------------- mode and placement ----------------

void Module::train(bool on) {
  for (auto& [n, m] : named_modules()) m->training_ = on;
}

void replace_data_in_place(const Tensor& dst, const Tensor& src) {
  TensorImpl& d = dst.impl();
  const TensorImpl& s = src.impl();
  d.storage = s.storage;
  d.shape = s.shape;
  d.strides = s.strides;
  d.offset = s.offset;
  d.dtype = s.dtype;
}

namespace {
// Applies convert to each tensor (and each parameter's gradient) in place.
template <typename Convert>
void convert_all(const Module& root, Convert convert) {
  NoGradGuard no_grad;
  for (auto& t : root.parameters()) {
    replace_data_in_place(t, convert(t.detach()));
    if (Tensor g = t.grad(); g.defined()) t.set_grad(convert(g.detach()));
  }
  for (auto& t : root.buffers()) replace_data_in_place(t, convert(t.detach()));
}
}  // namespace

Module& Module::to(Device device) {
  convert_all(*this, [&](const Tensor& t) { return t.to(device); });
  return *this;
}

Module& Module::to(DType dtype) {
  if (!is_floating(dtype))
    throw DTypeError(std::string("Module::to(dtype) accepts floating point dtypes only (float32, float64, "
                                 "float16, bfloat16), got ") + dtype_name(dtype));
  convert_all(*this, [&](const Tensor& t) { return is_floating(t.dtype()) ? t.to(dtype) : t; });
  return *this;
}

Device Module::device() const {
  auto params = parameters();
  if (!params.empty()) return params[0].device();
  auto bufs = buffers();
  return bufs.empty() ? Device::cpu() : bufs[0].device();
}

void Module::zero_grad(bool set_to_none) {
  for (auto& t : parameters()) {
    Tensor g = t.grad();
    if (!g.defined()) continue;
    if (set_to_none) t.set_grad(Tensor());
    else g.zero_();
  }
}

// ---------------- state ----------------

void Module::collect_state(const std::string& prefix, StateDict& out) const {
  for (const auto& p : params_) out.insert(prefix + p.name, p.tensor.detach());
  for (const auto& b : buffers_)
    if (b.persistent && b.tensor.defined()) out.insert(prefix + b.name, b.tensor.detach());
  for (const auto& [n, child] : children_) child->collect_state(prefix + n + ".", out);
}

StateDict Module::state_dict() const {
  StateDict out;
  collect_state("", out);
  return out;
}

namespace {
std::string quoted_list(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", \"" : "\"") + names[i] + "\"";
  return s;
}
}  // namespace

LoadResult Module::load_state_dict(const StateDict& state, bool strict) {
  StateDict own = state_dict();
  LoadResult result;
  std::vector<std::string> mismatched;
  for (const auto& [key, target] : own) {
    if (!state.contains(key)) {
      result.missing_keys.push_back(key);
      continue;
    }
    const Tensor& given = state.at(key);
    if (!given.defined() || given.shape() != target.shape())
      mismatched.push_back("size mismatch for " + key + ": expected shape " + target.shape_str() +
                           " (this model), got " + (given.defined() ? given.shape_str() : "an undefined tensor") +
                           " (the state dict)");
  }
  for (const auto& [key, t] : state)
    if (!own.contains(key)) result.unexpected_keys.push_back(key);

  const bool key_errors = strict && (!result.missing_keys.empty() || !result.unexpected_keys.empty());
  if (key_errors || !mismatched.empty()) {
    std::string msg = "error(s) loading state_dict into " + name() + ":";
    if (strict && !result.missing_keys.empty()) msg += "\n  missing key(s): " + quoted_list(result.missing_keys);
    if (strict && !result.unexpected_keys.empty())
      msg += "\n  unexpected key(s): " + quoted_list(result.unexpected_keys);
    for (const auto& m : mismatched) msg += "\n  " + m;
    msg += "\nNothing was loaded. Load a state dict saved from the same architecture";
    msg += mismatched.empty() ? ", or pass strict=false to skip missing and unexpected keys." : ".";
    throw StateDictError(msg);
  }
  NoGradGuard no_grad;
  for (const auto& [key, target] : own)
    if (state.contains(key)) Tensor(target).copy_(state.at(key));
  return result;
}

// ---------------- repr ----------------

void Module::repr_into(std::string& out, int indent) const {
  out += name() + "(" + extra_repr();
  if (children_.empty()) {
    out += ")";
    return;
  }
  const std::string pad(size_t(indent + 2), ' ');
  for (const auto& [n, child] : children_) {
    out += '\n';
    out += pad;
    out += "(" + n + "): ";
    child->repr_into(out, indent + 2);
  }
  out += '\n';  // appended piecewise: "\n" + std::string(...) trips a GCC 12 -Wrestrict false positive
  out.append(size_t(indent), ' ');
  out += ')';
}

std::string Module::repr() const {
  std::string out;
  repr_into(out, 0);
  return out;
}

}  // namespace tandem::nn
