#include "engine/optim/adam.h"

#include "base/error.h"
#include "kernels/backend.h"

namespace tandem::optim {

namespace {
nlohmann::json to_json(double lr, std::pair<double, double> betas, double eps, double wd) {
  return {{"lr", lr}, {"betas", {betas.first, betas.second}}, {"eps", eps}, {"weight_decay", wd}};
}
}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions o) : Adam(std::vector<ParamGroup>{{std::move(params)}}, o) {}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions o) : Optimizer(to_json(o.lr, o.betas, o.eps, o.weight_decay)) {
  init_groups(std::move(groups));
}

Adam::Adam(std::vector<ParamGroup> groups, const AdamWOptions& o, bool decoupled)
    : Optimizer(to_json(o.lr, o.betas, o.eps, o.weight_decay)), decoupled_(decoupled) {
  init_groups(std::move(groups));
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions o) : AdamW(std::vector<ParamGroup>{{std::move(params)}}, o) {}
AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions o) : Adam(std::move(groups), o, true) {}

std::unique_ptr<Optimizer> Adam::make_shard_optimizer(std::vector<ParamGroup> groups) const {
  if (decoupled_) return std::make_unique<AdamW>(std::move(groups));
  return std::make_unique<Adam>(std::move(groups));
}

void Adam::validate(const nlohmann::json& o) const {
  const double lr = o.at("lr").get<double>(), eps = o.at("eps").get<double>(), wd = o.at("weight_decay").get<double>();
  const auto& betas = o.at("betas");
  if (!betas.is_array() || betas.size() != 2)
    throw ValueError(name() + ": betas must be two numbers [beta1, beta2], got " + betas.dump());
  const double b1 = betas[0].get<double>(), b2 = betas[1].get<double>();
  if (!(lr >= 0)) throw ValueError(name() + ": lr must be >= 0, got " + format_number(lr));
  if (!(eps >= 0)) throw ValueError(name() + ": eps must be >= 0, got " + format_number(eps));
  if (!(b1 >= 0 && b1 < 1)) throw ValueError(name() + ": beta1 must be in [0, 1), got " + format_number(b1));
  if (!(b2 >= 0 && b2 < 1)) throw ValueError(name() + ": beta2 must be in [0, 1), got " + format_number(b2));
  if (!(wd >= 0)) throw ValueError(name() + ": weight_decay must be >= 0, got " + format_number(wd));
}

// Parameters that share a device, a dtype and a step count go to the backend in one
// adam_step_multi call (usually the whole group: one fused launch on CUDA).
void Adam::update_group(const std::vector<ParamUpdate>& items, const nlohmann::json& o) {
  struct Bucket {
    Device device;
    DType dtype;
    int64_t step;
    std::vector<TensorView> params, grads, exp_avgs, exp_avg_sqs;
  };
  std::vector<Bucket> buckets;
  for (const ParamUpdate& item : items) {
    const Tensor& p = item.param;
    StateDict& state = *item.state;
    if (!state.contains("step")) {
      state.insert("step", Tensor::zeros({}, DType::Float32));
      state.insert("exp_avg", Tensor::zeros(p.shape(), p.dtype(), p.device()));
      state.insert("exp_avg_sq", Tensor::zeros(p.shape(), p.dtype(), p.device()));
    }
    Tensor step = state.at("step");
    const int64_t t = int64_t(step.item()) + 1;
    step.fill_(double(t));
    Bucket* bucket = nullptr;
    for (Bucket& b : buckets)
      if (b.device == p.device() && b.dtype == p.dtype() && b.step == t) bucket = &b;
    if (!bucket) bucket = &buckets.emplace_back(Bucket{p.device(), p.dtype(), t, {}, {}, {}, {}});
    bucket->params.push_back(p.view_desc());
    bucket->grads.push_back(item.grad.view_desc());
    bucket->exp_avgs.push_back(state.at("exp_avg").view_desc());
    bucket->exp_avg_sqs.push_back(state.at("exp_avg_sq").view_desc());
  }
  const auto& betas = o.at("betas");
  for (const Bucket& b : buckets)
    backend_for(b.device).adam_step_multi(b.params, b.grads, b.exp_avgs, b.exp_avg_sqs, o.at("lr").get<double>(),
                                          betas[0].get<double>(), betas[1].get<double>(), o.at("eps").get<double>(),
                                          o.at("weight_decay").get<double>(), decoupled_, b.step);
}

}  // namespace tandem::optim
