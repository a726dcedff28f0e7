#include "engine/nn/activation.h"

#include <sstream>

#include "tensor/ops/ops.h"

namespace tandem::nn {

Tensor ReLU::forward(const Tensor& x) { return relu(x); }

GELU::GELU(std::string approx) : approximate(std::move(approx)) {
  if (approximate != "none" && approximate != "tanh")
    throw ValueError("GELU: approximate must be 'none' or 'tanh', got '" + approximate + "'");
}
Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate); }

Dropout::Dropout(double p_) : p(p_) {
  if (!(p >= 0.0 && p <= 1.0)) throw ValueError("Dropout: p must be in [0, 1], got " + std::to_string(p));
}
Tensor Dropout::forward(const Tensor& x) { return dropout(x, p, training_); }
std::string Dropout::extra_repr() const {
  std::ostringstream os;
  os << "p=" << p << ", inplace=False";
  return os.str();
}

Tensor Flatten::forward(const Tensor& x) { return flatten(x, start_dim, end_dim); }
std::string Flatten::extra_repr() const {
  return "start_dim=" + std::to_string(start_dim) + ", end_dim=" + std::to_string(end_dim);
}

}  // namespace tandem::nn
