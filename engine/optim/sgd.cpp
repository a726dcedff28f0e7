#include "engine/optim/sgd.h"

#include "engine/core/error.h"
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

void SGD::update(const Tensor& p, const Tensor& g, StateDict& state, const nlohmann::json& o) {
  const double momentum = o.at("momentum").get<double>();
  bool first_step = false;
  TensorView buf_view;
  if (momentum != 0) {
    if (!state.contains("momentum_buffer")) {
      // The kernel writes buf = g' on the first step, so its initial contents do not matter.
      state.insert("momentum_buffer", Tensor::empty(p.shape(), p.dtype(), p.device()));
      first_step = true;
    }
    buf_view = state.at("momentum_buffer").view_desc();
  }
  backend_for(p.device())
      .sgd_step(p.view_desc(), g.view_desc(), momentum != 0 ? &buf_view : nullptr, o.at("lr").get<double>(), momentum,
                o.at("dampening").get<double>(), o.at("weight_decay").get<double>(), o.at("nesterov").get<bool>(),
                first_step);
}

}  // namespace tandem::optim
