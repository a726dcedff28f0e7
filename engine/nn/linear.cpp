#include "engine/nn/linear.h"

#include <cmath>

#include "engine/nn/init.h"
#include "tensor/ops/ops.h"

namespace tandem::nn {

namespace {
void check_positive(const char* module, const char* what, int64_t v) {
  if (v <= 0) throw ValueError(std::string(module) + ": " + what + " must be > 0, got " + std::to_string(v));
}
}  // namespace

Linear::Linear(int64_t in, int64_t out, bool with_bias, DType dtype, Device device)
    : in_features(in), out_features(out) {
  check_positive("Linear", "in_features", in);
  check_positive("Linear", "out_features", out);
  weight = register_parameter("weight", Tensor::empty({out, in}, dtype, device));
  if (with_bias) bias = register_parameter("bias", Tensor::empty({out}, dtype, device));
  reset_parameters();
}

void Linear::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(double(in_features));
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Linear::forward(const Tensor& x) { return forward(x, "none"); }

Tensor Linear::forward(const Tensor& x, const std::string& activation) {
  if (x.dim() < 1 || x.size(-1) != in_features)
    throw ShapeError("Linear(" + std::to_string(in_features) + ", " + std::to_string(out_features) +
                     "): input must be [..., " + std::to_string(in_features) + "], got " + x.shape_str());
  return linear(x, weight, bias, activation);
}

std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(in_features) + ", out_features=" + std::to_string(out_features) +
         ", bias=" + (bias.defined() ? "True" : "False");
}

Embedding::Embedding(int64_t num, int64_t dim, DType dtype, Device device)
    : num_embeddings(num), embedding_dim(dim) {
  check_positive("Embedding", "num_embeddings", num);
  check_positive("Embedding", "embedding_dim", dim);
  weight = register_parameter("weight", Tensor::empty({num, dim}, dtype, device));
  reset_parameters();
}

void Embedding::reset_parameters() { init::normal_(weight, 0.0, 1.0); }

Tensor Embedding::forward(const Tensor& ids) { return embedding(ids, weight); }

std::string Embedding::extra_repr() const {
  return std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim);
}

}  // namespace tandem::nn
