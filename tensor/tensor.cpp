// Tensor basics: factories, metadata, conversions, copies and autograd entry points.
// Views live in views.cpp.
#include "tensor/tensor.h"

#include <atomic>
#include <sstream>

#include "kernels/backend.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/autograd/node.h"
#include "tensor/generator.h"
#include "tensor/ops/ops.h"

namespace tandem {

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (int d = int(shape.size()) - 1; d >= 0; --d) {
    strides[size_t(d)] = s;
    s *= std::max<int64_t>(shape[size_t(d)], 1);
  }
  return strides;
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::string shape_to_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int wrap_dim(int dim, int ndim, const char* op) {
  int n = std::max(ndim, 1);
  if (dim < -n || dim >= n)
    throw ShapeError(std::string(op) + ": dim " + std::to_string(dim) + " out of range for a " +
                     std::to_string(ndim) + "-d tensor (allowed " + std::to_string(-n) + " to " +
                     std::to_string(n - 1) + ")");
  return dim < 0 ? dim + n : dim;
}

namespace {
thread_local Generator* t_generator = nullptr;
}  // namespace

Generator& default_generator() {
  static Generator g;
  return t_generator ? *t_generator : g;
}

ThreadGenerator::ThreadGenerator(Generator start) : own_(start), previous_(t_generator) { t_generator = &own_; }
ThreadGenerator::~ThreadGenerator() { t_generator = previous_; }
void manual_seed(uint64_t seed) { default_generator() = Generator{seed, 0}; }

TensorImpl& Tensor::impl() const {
  if (!impl_) throw Error("operation on an undefined Tensor");
  return *impl_;
}

// ---------------- factories ----------------

static void check_shape(const Shape& shape) {
  if (shape.size() > size_t(kMaxDims))
    throw ShapeError("tensors have at most " + std::to_string(kMaxDims) + " dims, got shape " +
                     shape_to_string(shape));
  for (int64_t s : shape)
    if (s < 0) throw ShapeError("negative dimension in shape " + shape_to_string(shape));
}

static Tensor empty_tensor(const Shape& shape, DType dtype, Device device, HostMemory host_memory) {
  check_shape(shape);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(size_t(shape_numel(shape)) * dtype_size(dtype), device, host_memory);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::from_external(void* data, const Shape& shape, DType dtype) {
  check_shape(shape);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::borrow(data, size_t(shape_numel(shape)) * dtype_size(dtype));
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  return empty_tensor(shape, dtype, device, HostMemory::Pageable);
}
Tensor Tensor::empty_pinned(const Shape& shape, DType dtype) {
  return empty_tensor(shape, dtype, Device::cpu(), HostMemory::Pinned);
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}
Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) { return full(shape, 0.0, dtype, device); }
Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }
Tensor Tensor::scalar(double value, DType dtype, Device device) { return full({}, value, dtype, device); }

Tensor Tensor::arange(int64_t n, DType dtype, Device device) {
  std::vector<double> v(size_t(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = double(i);
  return from_vector(v, {int64_t(v.size())}).to(dtype).to(device);
}

static Tensor random_tensor(const Shape& shape, DType dtype, Device device, bool normal) {
  if (!is_floating(dtype))
    throw DTypeError(std::string("random tensors must be floating point, got ") + dtype_name(dtype));
  DType compute = (dtype == DType::Float64) ? DType::Float64 : DType::Float32;
  Tensor t = Tensor::empty(shape, compute, device);
  Generator& g = default_generator();
  uint64_t start = g.reserve(uint64_t(t.numel()));
  backend_for(device).random_fill(t.view_desc(), g.seed, start, normal, normal ? 0.0 : 0.0, 1.0);
  return compute == dtype ? t : t.to(dtype);
}
Tensor Tensor::rand(const Shape& shape, DType dtype, Device device) { return random_tensor(shape, dtype, device, false); }
Tensor Tensor::randn(const Shape& shape, DType dtype, Device device) { return random_tensor(shape, dtype, device, true); }

// ---------------- metadata ----------------

int64_t Tensor::size(int d) const { return shape()[size_t(wrap_dim(d, dim(), "size"))]; }
int64_t Tensor::numel() const { return shape_numel(shape()); }
bool Tensor::is_contiguous() const { return view_desc().is_contiguous(); }
std::string Tensor::shape_str() const { return shape_to_string(shape()); }

void* Tensor::raw_data() const {
  return static_cast<char*>(impl().storage->data()) + impl().offset * int64_t(dtype_size(dtype()));
}

TensorView Tensor::view_desc() const {
  return TensorView{raw_data(), dtype(), shape(), strides()};
}

double Tensor::item() const {
  if (numel() != 1)
    throw ShapeError("item() needs a tensor with one element, got shape " + shape_str());
  return to_vector<double>()[0];
}

std::string Tensor::str() const {
  std::ostringstream os;
  os << "Tensor(" << shape_str() << ", " << dtype_name(dtype()) << ", " << device().str();
  if (numel() <= 16 && dtype() != DType::Bool) {
    os << ", [";
    auto v = to_vector<double>();
    for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
    os << "]";
  }
  os << ")";
  return os.str();
}

// ---------------- conversions and copies ----------------

Tensor Tensor::to(Device target) const {
  if (device() == target) return *this;
  Tensor src = contiguous();
  Tensor out = empty(shape(), dtype(), target);
  size_t nbytes = size_t(numel()) * dtype_size(dtype());
  if (nbytes) {
    // Copies run on the non-CPU side's backend (CPU<->CUDA), or CPU for CPU<->CPU.
    Device d = target.is_cpu() ? src.device() : target;
    backend_for(d).copy_bytes(out.raw_data(), src.raw_data(), nbytes, target.is_cpu(),
                              src.device().is_cpu(), d.index);
  }
  Device from = device();
  autograd::record("ToDevice", out, {*this}, [from](const Tensor& g) {
    return std::vector<Tensor>{g.to(from)};
  });
  return out;
}

Tensor Tensor::to(DType target) const { return dtype() == target ? *this : cast(*this, target); }
Tensor Tensor::type_as(const Tensor& other) const {
  // Cast on the host side of a host<->device move, so it needs only the CPU's cast kernel.
  return device().is_cpu() ? to(other.dtype()).to(other.device()) : to(other.device()).to(other.dtype());
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype(), device());
  backend_for(device()).copy_strided(view_desc(), out.view_desc());
  autograd::record("Clone", out, {*this}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
  return out;
}

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = this->impl().storage;
  impl->shape = shape();
  impl->strides = strides();
  impl->offset = offset();
  impl->dtype = dtype();
  return Tensor(std::move(impl));
}

void Tensor::copy_(const Tensor& src) {
  Tensor s = src.detach();
  // Between the host and a device with one layout and dtype: a single copy_bytes, no
  // intermediate tensor (from or into pinned memory it is a direct DMA).
  if (s.device() != device() && (s.device().is_cpu() || device().is_cpu()) && s.dtype() == dtype() &&
      s.shape() == shape() && s.is_contiguous() && is_contiguous()) {
    const size_t nbytes = size_t(numel()) * dtype_size(dtype());
    if (nbytes) {
      const Device d = device().is_cpu() ? s.device() : device();
      backend_for(d).copy_bytes(raw_data(), s.raw_data(), nbytes, device().is_cpu(), s.device().is_cpu(), d.index);
    }
    return;
  }
  if (s.device() != device()) s = s.to(device());
  if (s.shape() != shape()) s = s.expand(shape());
  backend_for(device()).copy_strided(s.view_desc(), view_desc());
}

void Tensor::fill_(double value) {
  if (is_contiguous()) {
    backend_for(device()).fill(view_desc(), value);
  } else {
    copy_(full({}, value, dtype(), device()));
  }
}

// ---------------- autograd ----------------

Tensor& Tensor::requires_grad_(bool value) {
  if (value && !is_floating(dtype()))
    throw AutogradError(std::string("only floating point tensors can require gradients, got ") +
                        dtype_name(dtype()));
  if (!value && !is_leaf())
    throw AutogradError("requires_grad_(false) on a non-leaf tensor; use detach() instead");
  impl().requires_grad = value;
  return *this;
}

Tensor Tensor::grad() const { return impl().grad ? Tensor(impl().grad) : Tensor(); }

void Tensor::set_grad(const Tensor& g) {
  if (g.defined() && g.shape() != shape())
    throw ShapeError("set_grad: gradient shape " + g.shape_str() + " != tensor shape " + shape_str());
  // Optimizers, clipping and the DDP reducer read .grad with the parameter's element type.
  if (g.defined() && g.dtype() != dtype())
    throw DTypeError(std::string("set_grad: gradient is ") + dtype_name(g.dtype()) + " but the tensor is " +
                     dtype_name(dtype()) + "; convert it with grad.to(tensor.dtype())");
  if (g.defined() && g.device() != device())
    throw DeviceError("set_grad: gradient is on " + g.device().str() + " but the tensor is on " + device().str() +
                      "; move it with grad.to(tensor.device())");
  impl().grad = g.defined() ? g.impl_ptr() : nullptr;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  Tensor g = gradient;
  if (!g.defined()) {
    if (numel() != 1)
      throw AutogradError("backward() without a gradient needs a scalar (one-element) tensor, got shape " +
                          shape_str() + "; pass a gradient of the same shape");
    g = ones(shape(), dtype(), device());
  } else if (g.shape() != shape()) {
    throw AutogradError("backward(): gradient shape " + g.shape_str() + " != tensor shape " + shape_str());
  } else if (g.device() != device()) {
    throw DeviceError("backward(): gradient is on " + g.device().str() + " but the tensor is on " + device().str() +
                      "; move it with gradient.to(tensor.device())");
  } else if (g.dtype() != dtype()) {
    g = g.detach().to(dtype());  // as PyTorch: the given gradient takes the output's dtype
  }
  autograd::run_backward(*this, g.detach(), retain_graph);
}

HookHandle Tensor::register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const {
  if (!is_leaf() || !requires_grad())
    throw AutogradError("post-accumulate-grad hooks can only be registered on leaf tensors that require grad");
  static std::atomic<uint64_t> next_hook_id{1};
  const uint64_t id = next_hook_id++;
  impl().post_accumulate_hooks.emplace_back(id, std::move(hook));
  return HookHandle(impl_, id);
}

void HookHandle::remove() {
  auto impl = tensor_.lock();
  if (!impl) return;
  std::erase_if(impl->post_accumulate_hooks, [this](const auto& entry) { return entry.first == id_; });
  tensor_.reset();
}

}  // namespace tandem
