#include "tensor/autograd/node.h"

#include <atomic>

#include "base/error.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/ops/ops.h"

namespace tandem {

namespace {
thread_local bool t_grad_enabled = true;
std::atomic<uint64_t> g_next_sequence_nr{0};
}  // namespace

bool grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool enabled) { t_grad_enabled = enabled; }

namespace autograd {

Node::Node() : sequence_nr(g_next_sequence_nr++) {}

AccumulateGrad::AccumulateGrad(std::shared_ptr<TensorImpl> leaf_impl) : leaf(std::move(leaf_impl)) {}

std::vector<Tensor> AccumulateGrad::apply(const Tensor& grad_output) {
  NoGradGuard no_grad;
  Tensor leaf_tensor(leaf);
  const Tensor& g = grad_output;  // a reference: a copy of the handle would defeat the exclusivity check below
  if (g.shape() != leaf->shape)
    throw AutogradError("gradient of shape " + g.shape_str() + " does not match parameter of shape " +
                        shape_to_string(leaf->shape));
  if (!leaf->grad) {
    // .grad must be a buffer nobody else sees: optimizers, clipping and the DDP reducer modify
    // it in place. A gradient referenced only by the engine (the usual case: a fresh GEMM
    // result) is adopted as is; one that is shared (the same tensor sent down two edges, or the
    // caller's) is copied.
    const bool exclusive = g.impl_ptr().use_count() == 1 && g.impl().storage.use_count() == 1 &&
                           g.dtype() == leaf->dtype && g.offset() == 0 && g.is_contiguous() &&
                           g.impl().storage->nbytes() == size_t(g.numel()) * dtype_size(g.dtype());
    leaf->grad = exclusive ? g.impl_ptr() : g.to(leaf->dtype).contiguous().clone().impl_ptr();
  } else {
    Tensor acc(leaf->grad);
    acc.copy_(acc.detach() + g);  // in place so views of .grad (buckets) stay valid
  }
  for (auto& [id, hook] : leaf->post_accumulate_hooks) hook(leaf_tensor);
  return {};
}

std::vector<Tensor> FunctionNode::apply(const Tensor& grad_output) {
  if (!fn_)
    throw AutogradError(
        "trying to backward through the graph a second time (node " + name_ +
        " has already been freed); call backward(gradient, /*retain_graph=*/true) the first time "
        "if you need to backward twice");
  return fn_(grad_output);
}

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor* t : inputs)
    if (t && t->defined() && t->requires_grad()) return true;
  return false;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  TensorImpl& impl = t.impl();
  if (impl.grad_fn) return {impl.grad_fn};
  auto acc = impl.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    impl.grad_accumulator = acc;
  }
  return {acc};
}

void record(const char* name, Tensor& output, const std::vector<Tensor>& inputs, BackwardFn fn) {
  if (!needs_grad(inputs)) return;
  auto node = std::make_shared<FunctionNode>(name, std::move(fn));
  node->next_edges.reserve(inputs.size());
  for (const Tensor& in : inputs) node->next_edges.push_back(gradient_edge(in));
  TensorImpl& out = output.impl();
  out.grad_fn = std::move(node);
  out.requires_grad = true;
}

}  // namespace autograd
}  // namespace tandem
