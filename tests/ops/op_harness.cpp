#include "op_harness.h"

#include <cmath>
#include <stdexcept>

#include "counting_backend.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/generator.h"

namespace tandem::testing {

int64_t rand_dim(std::mt19937& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

Tensor randn64(const Shape& shape, DType dtype, std::mt19937& rng) {
  std::normal_distribution<double> nd(0.0, 1.0);
  std::vector<double> v(size_t(shape_numel(shape)));
  for (double& x : v) x = nd(rng);
  return Tensor::from_vector(v, shape).to(dtype);
}

Tensor positive(const Shape& shape, DType dtype, std::mt19937& rng) {
  std::uniform_real_distribution<double> ud(0.5, 2.0);
  std::vector<double> v(size_t(shape_numel(shape)));
  for (double& x : v) x = ud(rng);
  return Tensor::from_vector(v, shape).to(dtype);
}

const OpCase& op_case(const std::string& name) {
  for (const OpCase& c : op_cases())
    if (c.name == name) return c;
  throw std::runtime_error("no op case named " + name);
}

namespace {

// Fixed weights for the scalar loss sum(out * w): distinct per element so that gradient
// errors cannot cancel out.
Tensor loss_weights(const Tensor& out) {
  std::mt19937 rng(4242);
  return randn64(out.shape(), out.dtype(), rng);
}

double weighted_sum(const OpCase& op, const std::vector<Tensor>& inputs, const Tensor& w) {
  NoGradGuard no_grad;
  Tensor out = op.apply(inputs);
  return sum(out * w).item();
}

}  // namespace

double max_gradient_error(const OpCase& op, std::vector<Tensor> inputs, std::string* where) {
  for (Tensor& t : inputs)
    if (t.dtype() == DType::Float64) t.requires_grad_(true);
  Tensor out = op.apply(inputs);
  if (!is_floating(out.dtype()) || !op.differentiable) {
    if (!out.requires_grad() && out.grad_fn() == nullptr) return 0.0;
    if (where) *where = std::string("output of dtype ") + dtype_name(out.dtype()) + " without a gradient requires grad";
    return INFINITY;
  }
  Tensor w = loss_weights(out);
  sum(out * w).backward();
  const double eps = op.fd_eps;
  double worst = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dtype() != DType::Float64) continue;
    Tensor grad = inputs[i].grad();
    std::vector<double> analytic = grad.defined() ? grad.to_vector<double>()
                                                  : std::vector<double>(size_t(inputs[i].numel()), 0.0);
    double* x = inputs[i].data_ptr<double>();  // inputs are fresh contiguous CPU tensors
    for (int64_t j = 0; j < inputs[i].numel(); ++j) {
      const double saved = x[j];
      x[j] = saved + eps;
      const double plus = weighted_sum(op, inputs, w);
      x[j] = saved - eps;
      const double minus = weighted_sum(op, inputs, w);
      x[j] = saved;
      const double numeric = (plus - minus) / (2 * eps);
      const double err = std::abs(analytic[size_t(j)] - numeric) / (1.0 + std::abs(numeric));
      if (!(err <= worst)) {  // also catches NaN
        worst = std::isnan(err) ? INFINITY : err;
        if (where)
          *where = "input " + std::to_string(i) + " element " + std::to_string(j) + ": analytic " +
                   std::to_string(analytic[size_t(j)]) + " numeric " + std::to_string(numeric);
      }
    }
  }
  return worst;
}

BackendComparison compare_backends(const OpCase& op, Device device, uint64_t seed) {
  BackendComparison result;
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::vector<Tensor> cpu_in = op.make_inputs(rng, DType::Float32), dev_in;
  for (Tensor& t : cpu_in) {
    dev_in.push_back(t.device() == device ? t.clone() : t.to(device));  // never alias the reference
    if (is_floating(t.dtype())) {
      t.requires_grad_(true);
      dev_in.back().requires_grad_(true);
    }
  }
  Tensor ref = op.apply(cpu_in);
  Tensor got = op.apply(dev_in);
  Tensor w = loss_weights(ref);
  auto compare = [&](const Tensor& a, const Tensor& b, const std::string& what, double& worst) {
    auto va = a.to_vector<double>(), vb = b.to_vector<double>();
    if (va.size() != vb.size()) {
      worst = INFINITY;
      result.where = what + ": sizes differ";
      return;
    }
    for (size_t i = 0; i < va.size(); ++i) {
      double err = std::abs(va[i] - vb[i]) / (1.0 + std::abs(va[i]));
      if (!(err <= worst)) {
        worst = std::isnan(err) ? INFINITY : err;
        result.where = what + " element " + std::to_string(i);
      }
    }
  };
  compare(ref, got, "output", result.max_output_error);
  if (is_floating(ref.dtype()) && op.differentiable) {
    sum(ref * w).backward();
    sum(got * w.to(device)).backward();
    for (size_t i = 0; i < cpu_in.size(); ++i)
      if (cpu_in[i].requires_grad() && cpu_in[i].grad().defined())
        compare(cpu_in[i].grad(), dev_in[i].grad(), "grad of input " + std::to_string(i), result.max_grad_error);
  }
  return result;
}

std::vector<std::pair<std::string, std::vector<std::string>>> kernel_coverage(const std::vector<OpCase>& cases) {
  CountingBackend counting(backend_for(DeviceType::CPU));
  std::vector<std::pair<std::string, std::vector<std::string>>> coverage;
  for (const std::string& kernel : CountingBackend::listed_kernels()) coverage.push_back({kernel, {}});
  {
    BackendOverride on_cpu(DeviceType::CPU, counting);
    for (const OpCase& op : cases) {
      counting.clear();
      compare_backends(op, Device::cpu(), 5);  // forward and (when differentiable) backward, twice
      for (auto& [kernel, reached_by] : coverage)
        if (counting.reached(kernel)) reached_by.push_back(op.name);
    }
  }
  return coverage;
}

}  // namespace tandem::testing
