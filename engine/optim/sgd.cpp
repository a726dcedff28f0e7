#include "engine/optim/sgd.h"

#include "base/error.h"
#include "kernels/backend.h"

namespace tandem::optim {

namespace {
nlohmann::json to_json(const SGDOptions& o) {
  return {{"lr", o.lr}, {"momentum", o.momentum}, {"dampening", o.dampening},
          {"weight_decay", o.weight_decay}, {"nesterov", o.nesterov}};
}
}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions options) : SGD(std::vector<ParamGroup>{{std::move(params)}}, options) {}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions defaults) : Optimizer(to_json(defaults)) {
  init_groups(std::move(groups));
}

std::unique_ptr<Optimizer> SGD::make_shard_optimizer(std::vector<ParamGroup> groups) const {
  return std::make_unique<SGD>(std::move(groups));
}

void SGD::validate(const nlohmann::json& o) const {
  const double lr = o.at("lr").get<double>(), momentum = o.at("momentum").get<double>();
  const double dampening = o.at("dampening").get<double>(), wd = o.at("weight_decay").get<double>();
  if (!(lr >= 0)) throw ValueError("SGD: lr must be >= 0, got " + format_number(lr));
  if (!(momentum >= 0)) throw ValueError("SGD: momentum must be >= 0, got " + format_number(momentum));
  if (!(wd >= 0)) throw ValueError("SGD: weight_decay must be >= 0, got " + format_number(wd));
  if (o.at("nesterov").get<bool>() && (momentum <= 0 || dampening != 0))
    throw ValueError("SGD: nesterov momentum requires momentum > 0 and dampening = 0, got momentum=" +
                     format_number(momentum) + ", dampening=" + format_number(dampening));
}

// Parameters that share a device, a dtype and the first-step flag go to the backend in one
// sgd_step_multi call (usually the whole group: one fused launch on CUDA).
void SGD::update_group(const std::vector<ParamUpdate>& items, const nlohmann::json& o) {
  const double momentum = o.at("momentum").get<double>();
  struct Bucket {
    Device device;
    DType dtype;
    bool first_step;
    std::vector<TensorView> params, grads, bufs;
  };
  std::vector<Bucket> buckets;
  for (const ParamUpdate& item : items) {
    const Tensor& p = item.param;
    bool first_step = false;
    if (momentum != 0 && !item.state->contains("momentum_buffer")) {
      // The kernel writes buf = g' on the first step, so its initial contents do not matter.
      item.state->insert("momentum_buffer", Tensor::empty(p.shape(), p.dtype(), p.device()));
      first_step = true;
    }
    Bucket* bucket = nullptr;
    for (Bucket& b : buckets)
      if (b.device == p.device() && b.dtype == p.dtype() && b.first_step == first_step) bucket = &b;
    if (!bucket) bucket = &buckets.emplace_back(Bucket{p.device(), p.dtype(), first_step, {}, {}, {}});
    bucket->params.push_back(p.view_desc());
    bucket->grads.push_back(item.grad.view_desc());
    if (momentum != 0) bucket->bufs.push_back(item.state->at("momentum_buffer").view_desc());
  }
  for (const Bucket& b : buckets)
    backend_for(b.device).sgd_step_multi(b.params, b.grads, b.bufs, o.at("lr").get<double>(), momentum,
                                         o.at("dampening").get<double>(), o.at("weight_decay").get<double>(),
                                         o.at("nesterov").get<bool>(), b.first_step);
}

}  // namespace tandem::optim
