// Copies through Backend::copy_strided: cast between dtypes, cat and stack (each input copied
// into its slice of the output), and flatten (a view). Each backward sits under its forward.
#include "tensor/ops/op_utils.h"

namespace tandem {

using ops::backend_of;

Tensor cast(const Tensor& x, DType dtype) {
  Tensor out = Tensor::empty(x.shape(), dtype, x.device());
  backend_of(x).copy_strided(x.view_desc(), out.view_desc());
  if (is_floating(dtype) && is_floating(x.dtype())) {
    DType from = x.dtype();
    autograd::record("Cast", out, {x}, [from](const Tensor& g) { return std::vector<Tensor>{cast(g, from)}; });
  }
  return out;
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
