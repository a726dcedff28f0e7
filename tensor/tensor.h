// Tensor: a handle to a strided view of a Storage, with autograd metadata.
// Copying a Tensor copies the handle (like torch.Tensor in Python); views share storage.
#pragma once
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/device.h"
#include "base/dtype.h"
#include "kernels/tensor_view.h"
#include "tensor/storage.h"

namespace tandem {

namespace autograd {
class Node;
class AccumulateGrad;
}  // namespace autograd

constexpr int kMaxDims = 8;

class Tensor;
// Runs once a leaf's .grad is final for a backward pass; it is given the leaf, so it need not
// hold a handle to it (the leaf stores its hooks: a hook holding the leaf would keep it alive).
using PostAccumulateGradHook = std::function<void(const Tensor& leaf)>;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;
  int64_t offset = 0;  // in elements
  DType dtype = DType::Float32;

  // autograd
  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<autograd::Node> grad_fn;  // null for leaves
  int output_nr = 0;                        // which output of grad_fn this is
  std::weak_ptr<autograd::AccumulateGrad> grad_accumulator;  // leaves only, made on demand
  // Hooks called after this leaf's .grad is final for a backward pass (DDP buckets), with the
  // id that removes each.
  std::vector<std::pair<uint64_t, PostAccumulateGradHook>> post_accumulate_hooks;
};

// Removes one hook from the tensor it was registered on. Removing it twice, or once the tensor
// is gone, does nothing.
class HookHandle {
 public:
  HookHandle() = default;
  HookHandle(std::weak_ptr<TensorImpl> tensor, uint64_t id) : tensor_(std::move(tensor)), id_(id) {}
  void remove();

 private:
  std::weak_ptr<TensorImpl> tensor_;
  uint64_t id_ = 0;
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- factories ----
  static Tensor empty(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
  // An uninitialized CPU tensor in pinned (page-locked) host memory, for staging data to and
  // from CUDA devices: copies between it and a device (to(), copy_) are direct DMA. It is an
  // ordinary CPU tensor in every other respect, and ordinary host memory in a build without CUDA
  // or without a visible device (is_pinned() says which). A copy from it to a device returns
  // before the DMA has read it: do not write into it until the device's stream has passed the
  // copy (Backend::synchronize); dropping it at once is safe.
  static Tensor empty_pinned(const Shape& shape, DType dtype = DType::Float32);
  // A contiguous CPU tensor over memory the caller owns (e.g. an HPC code's arrays): nothing is
  // copied and nothing freed; `data` must stay valid while any tensor views it. Writes through
  // the tensor write the caller's memory. ShapeError for a bad shape, ValueError for null data.
  static Tensor from_external(void* data, const Shape& shape, DType dtype);
  static Tensor zeros(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
  static Tensor ones(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::Float32,
                     Device device = Device::cpu());
  static Tensor scalar(double value, DType dtype = DType::Float32, Device device = Device::cpu());
  static Tensor arange(int64_t n, DType dtype = DType::Int64, Device device = Device::cpu());
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape,
                            Device device = Device::cpu());
  // Random draws from the default generator (or the one given); see philox.h.
  static Tensor rand(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());
  static Tensor randn(const Shape& shape, DType dtype = DType::Float32, Device device = Device::cpu());

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  int64_t size(int d) const;  // negative d counts from the end
  int dim() const { return int(impl().shape.size()); }
  int64_t numel() const;
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device(); }
  bool is_pinned() const { return impl().storage->pinned(); }  // page-locked host memory
  int64_t offset() const { return impl().offset; }
  bool is_contiguous() const;
  std::string shape_str() const;  // "[2, 3]"
  std::string str() const;        // short description with values (for small tensors)
  TensorView view_desc() const;   // kernel view (data pointer already offset)
  void* raw_data() const;
  template <typename T> T* data_ptr() const;  // checks dtype and CPU
  template <typename T> std::vector<T> to_vector() const;  // copies to host, converts
  double item() const;  // one-element tensor as double

  // ---- conversions and copies ----
  Tensor to(Device device) const;
  Tensor to(DType dtype) const;
  Tensor type_as(const Tensor& other) const;  // other's dtype and device
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor detach() const;  // shares storage, no autograd history
  void copy_(const Tensor& src);  // in place, no autograd; broadcasts src, casts dtype
  void fill_(double value);       // in place, no autograd
  void zero_() { fill_(0.0); }

  // ---- views (no copies); differentiable ----
  Tensor view(const Shape& shape) const;     // requires a compatible layout
  Tensor reshape(const Shape& shape) const;  // view when possible, else copy
  Tensor permute(const std::vector<int>& dims) const;
  Tensor transpose(int d0, int d1) const;
  Tensor t() const { return transpose(0, 1); }
  Tensor narrow(int dim, int64_t start, int64_t length) const;
  Tensor slice(int dim, int64_t start, int64_t end, int64_t step = 1) const;
  std::vector<Tensor> split(int64_t split_size, int dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int dim = 0) const;
  Tensor expand(const Shape& shape) const;  // -1 keeps a dim
  Tensor unsqueeze(int dim) const;
  Tensor squeeze(int dim) const;
  Tensor flatten(int start_dim = 0, int end_dim = -1) const;
  Tensor select(int dim, int64_t index) const;  // drops dim

  // ---- autograd ----
  bool requires_grad() const { return impl().requires_grad; }
  Tensor& requires_grad_(bool value = true);
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  Tensor grad() const;  // undefined Tensor when no gradient yet
  // g must have this tensor's shape, dtype and device (ShapeError / DTypeError / DeviceError).
  void set_grad(const Tensor& g);
  const std::shared_ptr<autograd::Node>& grad_fn() const { return impl().grad_fn; }
  // Backpropagates from this tensor: scalar when gradient is undefined, else gradient's shape
  // and device must equal ours (another floating dtype is cast to ours, as PyTorch does).
  // Frees the graph unless retain_graph.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  // Registers hook to run once this leaf's .grad is final in each backward pass, until the
  // handle removes it (AutogradError on a non-leaf or a tensor that does not require grad).
  HookHandle register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const;

  TensorImpl& impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same_impl(const Tensor& o) const { return impl_ == o.impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// Row-major contiguous strides for a shape.
Shape contiguous_strides(const Shape& shape);
int64_t shape_numel(const Shape& shape);
std::string shape_to_string(const Shape& shape);
// Wraps a possibly negative dim into [0, ndim); throws ShapeError naming the op.
int wrap_dim(int dim, int ndim, const char* op);

}  // namespace tandem

#include "tensor/tensor_inl.h"
