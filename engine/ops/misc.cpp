// dropout, embedding, cat, stack, flatten.
#include "engine/ops/op_utils.h"
#include "engine/tensor/generator.h"

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

Tensor cat(const std::vector<Tensor>& tensors, int dim) {
  if (tensors.empty()) throw ValueError("cat: expected a non-empty list of tensors");
  const Tensor& first = tensors[0];
  dim = wrap_dim(dim, first.dim(), "cat");
  Shape out_shape = first.shape();
  out_shape[size_t(dim)] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    ops::check_same_device("cat", first, t);
    ops::check_same_dtype("cat", first, t);
    bool ok = t.dim() == first.dim();
    for (int d = 0; ok && d < t.dim(); ++d) ok = d == dim || t.shape()[size_t(d)] == first.shape()[size_t(d)];
    if (!ok)
      throw ShapeError("cat: tensor " + std::to_string(i) + " has shape " + t.shape_str() + ", which differs from " +
                       first.shape_str() + " outside dim " + std::to_string(dim));
    out_shape[size_t(dim)] += t.size(dim);
  }
  Tensor out = Tensor::empty(out_shape, first.dtype(), first.device());
  std::vector<int64_t> sizes;
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    out.detach().narrow(dim, offset, t.size(dim)).copy_(t);
    sizes.push_back(t.size(dim));
    offset += t.size(dim);
  }
  autograd::record("Cat", out, tensors, [sizes, dim](const Tensor& g) {
    std::vector<Tensor> grads;
    int64_t off = 0;
    for (int64_t s : sizes) {
      grads.push_back(g.narrow(dim, off, s));
      off += s;
    }
    return grads;
  });
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int dim) {
  if (tensors.empty()) throw ValueError("stack: expected a non-empty list of tensors");
  dim = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].shape() != tensors[0].shape())
      throw ShapeError("stack: tensor " + std::to_string(i) + " has shape " + tensors[i].shape_str() +
                       ", expected " + tensors[0].shape_str() + " like tensor 0");
    parts.push_back(tensors[i].unsqueeze(dim));
  }
  return cat(parts, dim);
}

Tensor flatten(const Tensor& x, int start_dim, int end_dim) { return x.flatten(start_dim, end_dim); }

}  // namespace tandem
