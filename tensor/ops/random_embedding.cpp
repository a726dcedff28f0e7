// dropout (a Philox mask, the same on every backend) and embedding (gather forward, scatter-add
// backward). Each backward sits under its forward.
#include "tensor/generator.h"
#include "tensor/ops/op_utils.h"

namespace tandem {

using ops::backend_of;

Tensor dropout(const Tensor& x, double p, bool training) {
  if (!(p >= 0.0 && p <= 1.0)) throw ValueError("dropout: p must be in [0, 1], got " + std::to_string(p));
  if (!training || p == 0.0) return x;
  ops::check_float("dropout", x);
  if (p == 1.0) return x * 0.0;
  Tensor xd = ops::raw(x);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor mask = Tensor::empty(x.shape(), DType::UInt8, x.device());
  Generator& gen = default_generator();
  const uint64_t offset = gen.reserve(uint64_t(x.numel()));
  backend_of(x).dropout(xd.view_desc(), p, gen.seed, offset, y.view_desc(), mask.view_desc());
  const double scale = 1.0 / (1.0 - p);
  autograd::record("Dropout", y, {x}, [mask, scale](const Tensor& g) {
    return std::vector<Tensor>{g * cast(mask, g.dtype()) * scale};
  });
  return y;
}

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  ops::check_index_dtype("embedding", indices);
  ops::check_float("embedding", weight);
  ops::check_same_device("embedding", indices, weight);
  if (weight.dim() != 2) throw ShapeError("embedding: weight must be [num_embeddings, dim], got " + weight.shape_str());
  const int64_t V = weight.size(0), D = weight.size(1);
  Tensor idx = ops::raw(indices);
  for (int64_t v : idx.to_vector<int64_t>())
    if (v < 0 || v >= V)
      throw ValueError("embedding: index " + std::to_string(v) + " is out of range for " + std::to_string(V) +
                       " embeddings (allowed 0.." + std::to_string(V - 1) + ")");
  Tensor wd = ops::raw(weight);
  Shape out_shape = indices.shape();
  out_shape.push_back(D);
  Tensor y = Tensor::empty(out_shape, weight.dtype(), weight.device());
  backend_of(weight).embedding(wd.view_desc(), idx.view_desc(), y.view_desc());
  autograd::record("Embedding", y, {weight}, [idx, V, D](const Tensor& g) {
    Tensor gc = ops::raw(g).reshape({-1, D});
    Tensor gw = Tensor::empty({V, D}, g.dtype(), g.device());
    backend_of(gc).embedding_backward(gc.view_desc(), idx.view_desc(), gw.view_desc());
    return std::vector<Tensor>{gw};
  });
  return y;
}

}  // namespace tandem
