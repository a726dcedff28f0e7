// Views: new TensorImpls over the same Storage with other shape/strides/offset. Each records
// its backward, which maps the gradient of the view back onto the base's shape.
#include <algorithm>
#include <numeric>
#include <optional>

#include "tensor/autograd/grad_mode.h"
#include "tensor/autograd/node.h"
#include "tensor/ops/ops.h"
#include "tensor/tensor.h"

namespace tandem {

namespace {

Tensor make_view(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
  if (shape.size() > size_t(kMaxDims))
    throw ShapeError("tensors have at most " + std::to_string(kMaxDims) + " dims; a view of " + base.shape_str() +
                     " as " + shape_to_string(shape) + " would have " + std::to_string(shape.size()));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.impl().storage;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

// Resolves one -1 in a requested shape against numel.
Shape infer_shape(const Shape& requested, int64_t numel, const Shape& from) {
  Shape shape = requested;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) throw ShapeError("view/reshape: only one dimension can be -1, got " + shape_to_string(requested));
      infer = int(i);
    } else if (shape[i] < 0) {
      throw ShapeError("view/reshape: invalid size in " + shape_to_string(requested));
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0)
      throw ShapeError("view/reshape: shape " + shape_to_string(requested) + " is invalid for input of shape " +
                       shape_to_string(from));
    shape[size_t(infer)] = numel / known;
  }
  if (shape_numel(shape) != numel)
    throw ShapeError("view/reshape: shape " + shape_to_string(requested) + " is invalid for input of shape " +
                     shape_to_string(from) + " (" + std::to_string(numel) + " elements)");
  return shape;
}

// Strides for viewing (old_shape, old_strides) as new_shape without a copy, if possible.
// Groups old dims into runs that are contiguous with each other; each run must map onto a
// run of new dims with the same element count.
std::optional<Shape> view_strides(const Shape& old_shape, const Shape& old_strides, const Shape& new_shape) {
  Shape out(new_shape.size(), 1);
  if (shape_numel(old_shape) == 0 || old_shape.empty()) return contiguous_strides(new_shape);
  int nd = int(new_shape.size()) - 1;
  int64_t run_stride = old_strides.back();
  int64_t old_count = 1, new_count = 1;
  for (int od = int(old_shape.size()) - 1; od >= 0; --od) {
    old_count *= old_shape[size_t(od)];
    bool run_ends = od == 0 || (old_shape[size_t(od - 1)] != 1 &&
                                old_strides[size_t(od - 1)] != old_count * run_stride);
    if (!run_ends) continue;
    while (nd >= 0 && (new_count < old_count || new_shape[size_t(nd)] == 1)) {
      out[size_t(nd)] = new_count * run_stride;
      new_count *= new_shape[size_t(nd)];
      --nd;
    }
    if (new_count != old_count) return std::nullopt;
    if (od > 0) {
      run_stride = old_strides[size_t(od - 1)];
      old_count = 1;
      new_count = 1;
    }
  }
  if (nd != -1) return std::nullopt;
  return out;
}

}  // namespace

Tensor Tensor::view(const Shape& requested) const {
  Shape shape = infer_shape(requested, numel(), this->shape());
  auto strides = view_strides(this->shape(), this->strides(), shape);
  if (!strides)
    throw ShapeError("view: shape " + shape_to_string(requested) + " is not compatible with the layout of a " +
                     shape_str() + " tensor (strides " + shape_to_string(this->strides()) +
                     "); use reshape() or contiguous() first");
  Tensor out = make_view(*this, shape, *strides, offset());
  Shape in_shape = this->shape();
  autograd::record("View", out, {*this}, [in_shape](const Tensor& g) {
    return std::vector<Tensor>{g.reshape(in_shape)};
  });
  return out;
}

Tensor Tensor::reshape(const Shape& requested) const {
  Shape shape = infer_shape(requested, numel(), this->shape());
  if (view_strides(this->shape(), this->strides(), shape)) return view(shape);
  return contiguous().view(shape);
}

Tensor Tensor::permute(const std::vector<int>& dims) const {
  if (int(dims.size()) != dim())
    throw ShapeError("permute: got " + std::to_string(dims.size()) + " dims for a " + std::to_string(dim()) +
                     "-d tensor");
  Shape shape(dims.size()), strides(dims.size());
  std::vector<int> inverse(dims.size(), -1);
  for (size_t i = 0; i < dims.size(); ++i) {
    int d = wrap_dim(dims[i], dim(), "permute");
    if (inverse[size_t(d)] != -1) throw ShapeError("permute: dim " + std::to_string(d) + " repeated");
    inverse[size_t(d)] = int(i);
    shape[i] = this->shape()[size_t(d)];
    strides[i] = this->strides()[size_t(d)];
  }
  Tensor out = make_view(*this, shape, strides, offset());
  autograd::record("Permute", out, {*this}, [inverse](const Tensor& g) {
    return std::vector<Tensor>{g.permute(inverse)};
  });
  return out;
}

Tensor Tensor::transpose(int d0, int d1) const {
  std::vector<int> dims(static_cast<size_t>(dim()));
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[size_t(wrap_dim(d0, dim(), "transpose"))], dims[size_t(wrap_dim(d1, dim(), "transpose"))]);
  return permute(dims);
}

Tensor Tensor::slice(int d, int64_t start, int64_t end, int64_t step) const {
  d = wrap_dim(d, dim(), "slice");
  const int64_t n = shape()[size_t(d)];
  if (step <= 0) throw ShapeError("slice: step must be positive, got " + std::to_string(step));
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape shape = this->shape(), strides = this->strides();
  shape[size_t(d)] = (end - start + step - 1) / step;
  strides[size_t(d)] *= step;
  Tensor out = make_view(*this, shape, strides, offset() + start * this->strides()[size_t(d)]);
  Shape in_shape = this->shape();
  autograd::record("Slice", out, {*this}, [in_shape, d, start, end, step](const Tensor& g) {
    Tensor gx = Tensor::zeros(in_shape, g.dtype(), g.device());
    gx.slice(d, start, end, step).copy_(g);
    return std::vector<Tensor>{gx};
  });
  return out;
}

Tensor Tensor::narrow(int d, int64_t start, int64_t length) const {
  d = wrap_dim(d, dim(), "narrow");
  const int64_t n = shape()[size_t(d)];
  if (start < 0 || length < 0 || start + length > n)
    throw ShapeError("narrow: start " + std::to_string(start) + " + length " + std::to_string(length) +
                     " exceeds dim " + std::to_string(d) + " of size " + std::to_string(n));
  return slice(d, start, start + length, 1);
}

Tensor Tensor::select(int d, int64_t index) const {
  d = wrap_dim(d, dim(), "select");
  const int64_t n = shape()[size_t(d)];
  if (index < -n || index >= n)
    throw ShapeError("select: index " + std::to_string(index) + " out of range for dim of size " + std::to_string(n));
  if (index < 0) index += n;
  return narrow(d, index, 1).squeeze(d);
}

std::vector<Tensor> Tensor::split(int64_t split_size, int d) const {
  d = wrap_dim(d, dim(), "split");
  if (split_size <= 0) throw ShapeError("split: split_size must be positive, got " + std::to_string(split_size));
  std::vector<Tensor> parts;
  const int64_t n = shape()[size_t(d)];
  for (int64_t s = 0; s < n; s += split_size) parts.push_back(narrow(d, s, std::min(split_size, n - s)));
  if (parts.empty()) parts.push_back(narrow(d, 0, 0));
  return parts;
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int d) const {
  if (chunks <= 0) throw ShapeError("chunk: chunks must be positive, got " + std::to_string(chunks));
  const int64_t n = shape()[size_t(wrap_dim(d, dim(), "chunk"))];
  return split(std::max<int64_t>((n + chunks - 1) / chunks, 1), d);
}

Tensor Tensor::expand(const Shape& requested) const {
  if (requested.size() < shape().size())
    throw ShapeError("expand: target " + shape_to_string(requested) + " has fewer dims than " + shape_str());
  const size_t lead = requested.size() - shape().size();
  Shape shape(requested.size()), strides(requested.size());
  for (size_t i = 0; i < requested.size(); ++i) {
    if (i < lead) {
      if (requested[i] < 0) throw ShapeError("expand: -1 not allowed for new leading dims");
      shape[i] = requested[i];
      strides[i] = 0;
      continue;
    }
    int64_t have = this->shape()[i - lead];
    int64_t want = requested[i] == -1 ? have : requested[i];
    if (have == want) {
      shape[i] = have;
      strides[i] = this->strides()[i - lead];
    } else if (have == 1) {
      shape[i] = want;
      strides[i] = 0;
    } else {
      throw ShapeError("expand: cannot expand " + shape_str() + " to " + shape_to_string(requested) +
                       " (dim " + std::to_string(i) + " is " + std::to_string(have) + ", not 1)");
    }
  }
  Tensor out = make_view(*this, shape, strides, offset());
  Shape in_shape = this->shape();
  autograd::record("Expand", out, {*this}, [in_shape](const Tensor& g) {
    return std::vector<Tensor>{sum_to_shape(g, in_shape)};
  });
  return out;
}

Tensor Tensor::unsqueeze(int d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape shape = this->shape();
  shape.insert(shape.begin() + d, 1);
  return view(shape);
}

Tensor Tensor::squeeze(int d) const {
  d = wrap_dim(d, dim(), "squeeze");
  if (shape()[size_t(d)] != 1) return *this;
  Shape shape = this->shape();
  shape.erase(shape.begin() + d);
  return view(shape);
}

Tensor Tensor::flatten(int start_dim, int end_dim) const {
  if (dim() == 0) return reshape({1});
  start_dim = wrap_dim(start_dim, dim(), "flatten");
  end_dim = wrap_dim(end_dim, dim(), "flatten");
  if (start_dim > end_dim) throw ShapeError("flatten: start_dim must not come after end_dim");
  Shape shape;
  for (int i = 0; i < start_dim; ++i) shape.push_back(this->shape()[size_t(i)]);
  int64_t n = 1;
  for (int i = start_dim; i <= end_dim; ++i) n *= this->shape()[size_t(i)];
  shape.push_back(n);
  for (int i = end_dim + 1; i < dim(); ++i) shape.push_back(this->shape()[size_t(i)]);
  return reshape(shape);
}

}  // namespace tandem
