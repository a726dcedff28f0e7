// Helpers for optimizer tests: float64 parameters with hand-set gradients, so every
// expected value can be computed exactly from the published update formulas.
#pragma once
#include <vector>

#include "tensor/tensor.h"

namespace tandem::test {

inline Tensor param64(const std::vector<double>& values) {
  Tensor p = Tensor::from_vector(values, {int64_t(values.size())});
  p.requires_grad_(true);
  return p;
}

inline void set_grad64(const Tensor& p, const std::vector<double>& g) {
  Tensor(p).set_grad(Tensor::from_vector(g, {int64_t(g.size())}));
}

inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

}  // namespace tandem::test
