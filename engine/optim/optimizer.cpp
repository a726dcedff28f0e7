#include "engine/optim/optimizer.h"

#include <sstream>
#include <unordered_set>

#include "base/error.h"
#include "tensor/autograd/grad_mode.h"

namespace tandem::optim {

std::string format_number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

std::vector<ParamGroup> weight_decay_groups(const std::vector<Tensor>& params) {
  ParamGroup decay, no_decay;
  no_decay.options["weight_decay"] = 0.0;
  for (const Tensor& p : params) (p.dim() >= 2 ? decay : no_decay).params.push_back(p);
  std::vector<ParamGroup> groups;
  if (!decay.params.empty()) groups.push_back(std::move(decay));
  if (!no_decay.params.empty()) groups.push_back(std::move(no_decay));
  return groups;
}

void Optimizer::init_groups(std::vector<ParamGroup> groups) {
  if (groups.empty()) throw ValueError(name() + ": got an empty list of parameter groups");
  for (auto& g : groups) add_param_group(std::move(g));
}

void Optimizer::add_param_group(ParamGroup group) {
  if (group.params.empty())
    throw ValueError(name() + ": parameter group " + std::to_string(groups_.size()) + " has no parameters");
  if (group.options.is_null()) group.options = nlohmann::json::object();  // `{}` in C++ makes a JSON null
  if (!group.options.is_object())
    throw ValueError(name() + ": a group's options must be a JSON object, got " + group.options.dump());
  std::unordered_set<const TensorImpl*> taken;
  for (const auto& g : groups_)
    for (const auto& p : g.params) taken.insert(p.impl_ptr().get());
  std::unordered_set<const TensorImpl*> in_group;
  for (size_t i = 0; i < group.params.size(); ++i) {
    const Tensor& p = group.params[i];
    const std::string where = "parameter " + std::to_string(i) + " of group " + std::to_string(groups_.size());
    if (!p.defined()) throw ValueError(name() + ": " + where + " is undefined");
    if (!is_floating(p.dtype()))
      throw DTypeError(name() + ": " + where + " is " + dtype_name(p.dtype()) + "; only floating point tensors are optimized");
    if (!p.is_leaf())
      throw ValueError(name() + ": " + where + " is not a leaf tensor (it was computed from others); optimize the "
                       "leaves, e.g. module.parameters()");
    if (taken.count(p.impl_ptr().get()) || !in_group.insert(p.impl_ptr().get()).second)
      throw ValueError(name() + ": " + where + " appears more than once across parameter groups; each parameter "
                       "may belong to one group only");
  }
  for (auto& [key, value] : defaults_.items())
    if (!group.options.contains(key)) group.options[key] = value;
  for (auto& [key, value] : group.options.items())
    if (!defaults_.contains(key) && key != "initial_lr")
      throw ValueError(name() + ": unknown hyper-parameter '" + key + "' in a parameter group (known: " +
                       [&] {
                         std::string s;
                         for (auto& [k, v] : defaults_.items()) s += (s.empty() ? "" : ", ") + k;
                         return s;
                       }() + ")");
  validate(group.options);
  groups_.push_back(std::move(group));
}

void Optimizer::step() {
  NoGradGuard no_grad;
  for (auto& group : groups_) {
    std::vector<ParamUpdate> items;
    for (auto& p : group.params) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      if (g.device() != p.device() || g.dtype() != p.dtype())
        throw DTypeError(name() + ": gradient (" + std::string(dtype_name(g.dtype())) + " on " + g.device().str() +
                         ") does not match its parameter (" + dtype_name(p.dtype()) + " on " + p.device().str() + ")");
      if (!p.is_contiguous())
        throw ValueError(name() + ": parameter of shape " + p.shape_str() + " is not contiguous; the fused update "
                         "kernels need contiguous parameters");
      StateDict& state = state_[p.impl_ptr().get()];
      for (const auto& [key, t] : state)
        if (key != "step" && t.device() != p.device())
          throw DeviceError(name() + ": state '" + key + "' is on " + t.device().str() + " but its parameter is on " +
                            p.device().str() + "; move the model before creating the optimizer, or load the "
                            "optimizer's state after moving it");
      items.push_back({p, g.contiguous(), &state});  // state_ is node-based: the pointer stays valid
    }
    if (!items.empty()) update_group(items, group.options);
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& group : groups_)
    for (auto& p : group.params) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      if (set_to_none) p.set_grad(Tensor());
      else g.zero_();
    }
}

const StateDict& Optimizer::state_of(const Tensor& param) const {
  static const StateDict empty;
  auto found = state_.find(param.impl_ptr().get());
  return found == state_.end() ? empty : found->second;
}

int64_t Optimizer::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& [param, state] : state_)
    for (const auto& [key, t] : state) bytes += t.numel() * int64_t(dtype_size(t.dtype()));
  return bytes;
}

void Optimizer::clear_state() { state_.clear(); }

OptimizerStateDict Optimizer::state_dict() const {
  OptimizerStateDict out;
  int64_t index = 0;
  for (const auto& group : groups_) {
    nlohmann::json g = group.options;
    g["params"] = nlohmann::json::array();
    for (const auto& p : group.params) {
      for (const auto& [key, t] : state_of(p)) out.state.insert(std::to_string(index) + "." + key, t.detach());
      g["params"].push_back(index++);
    }
    out.param_groups.push_back(std::move(g));
  }
  return out;
}

void Optimizer::load_state_dict(const OptimizerStateDict& sd) {
  // ---- check everything first ----
  auto sizes = [](const std::vector<size_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  };
  std::vector<size_t> ours, theirs;
  for (const auto& g : groups_) ours.push_back(g.params.size());
  if (!sd.param_groups.is_array())
    throw StateDictError(name() + ": param_groups in the loaded state must be a JSON array");
  for (const auto& g : sd.param_groups) {
    if (!g.is_object() || !g.contains("params") || !g["params"].is_array())
      throw StateDictError(name() + ": each loaded param group must be an object with a \"params\" array, got " + g.dump());
    theirs.push_back(g["params"].size());
  }
  if (ours != theirs)
    throw StateDictError(name() + ": the loaded state has parameter groups of sizes " + sizes(theirs) +
                         " but this optimizer has " + sizes(ours) + "; build the optimizer over the same parameters "
                         "in the same groups as the one that was saved");
  std::vector<Tensor> flat;
  for (const auto& g : groups_) flat.insert(flat.end(), g.params.begin(), g.params.end());
  struct Entry { size_t param; std::string key; Tensor value; };
  std::vector<Entry> entries;
  for (const auto& [full_key, t] : sd.state) {
    const size_t dot = full_key.find('.');
    size_t index = 0;
    bool ok = dot != std::string::npos && dot > 0 && dot + 1 < full_key.size();
    try {
      if (ok) index = std::stoul(full_key.substr(0, dot));
    } catch (const std::exception&) { ok = false; }
    if (!ok) throw StateDictError(name() + ": state key '" + full_key + "' is not '<param index>.<name>'");
    if (index >= flat.size())
      throw StateDictError(name() + ": state key '" + full_key + "' names parameter " + std::to_string(index) +
                           " but this optimizer has " + std::to_string(flat.size()));
    const std::string key = full_key.substr(dot + 1);
    if (!t.defined()) throw StateDictError(name() + ": state '" + full_key + "' is an undefined tensor");
    if (key == "step" ? t.numel() != 1 : t.shape() != flat[index].shape())
      throw StateDictError(name() + ": size mismatch for state '" + full_key + "': expected shape " +
                           (key == "step" ? std::string("[]") : flat[index].shape_str()) + ", got " + t.shape_str());
    entries.push_back({index, key, t});
  }
  std::vector<nlohmann::json> options;
  for (const auto& g : sd.param_groups) {
    nlohmann::json o = g;
    o.erase("params");
    for (auto& [key, value] : defaults_.items())
      if (!o.contains(key)) o[key] = value;
    // A PyTorch checkpoint carries flags we do not implement; accept them only when off.
    for (const char* flag : {"amsgrad", "maximize", "capturable", "differentiable"})
      if (o.contains(flag) && o[flag].is_boolean() && o[flag].get<bool>())
        throw StateDictError(name() + ": the loaded state has " + flag + "=true, which Tandem's " + name() +
                             " does not implement; train with " + flag + "=false");
    validate(o);
    options.push_back(std::move(o));
  }
  // ---- then replace ----
  NoGradGuard no_grad;
  for (size_t i = 0; i < groups_.size(); ++i) groups_[i].options = options[i];
  state_.clear();
  for (const auto& e : entries) {
    const Tensor& p = flat[e.param];
    Tensor v = e.key == "step" ? e.value.detach().to(Device::cpu()).to(DType::Float32).reshape({})
                               : e.value.detach().to(p.device());
    if (e.key != "step" && is_floating(v.dtype())) v = v.to(p.dtype());
    state_[p.impl_ptr().get()].insert(e.key, v.clone());
  }
}

}  // namespace tandem::optim
