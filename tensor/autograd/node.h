// The dynamic tape. Every differentiable op that sees an input requiring grad creates one
// Node for its (single) output; the node's edges point at the nodes of its inputs (or at the
// AccumulateGrad node of a leaf). backward() walks this graph once in reverse creation order.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace tandem::autograd {

class Node;

struct Edge {
  std::shared_ptr<Node> node;  // null: that input needs no gradient
};

class Node {
 public:
  Node();
  virtual ~Node() = default;
  // Given the gradient of this node's output, returns one gradient per next edge
  // (undefined Tensors where there is none).
  virtual std::vector<Tensor> apply(const Tensor& grad_output) = 0;
  // Drops saved tensors after a backward without retain_graph.
  virtual void release() {}
  virtual std::string name() const = 0;

  std::vector<Edge> next_edges;
  uint64_t sequence_nr;  // creation order: later nodes run first
  bool released = false;
};

// Gradient of a leaf: accumulates into leaf.grad, then runs the leaf's post-accumulate hooks.
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf);
  std::vector<Tensor> apply(const Tensor& grad_output) override;
  std::string name() const override { return "AccumulateGrad"; }
  std::shared_ptr<TensorImpl> leaf;
};

using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

// A node whose backward is a closure over the tensors it saved (the usual case).
class FunctionNode : public Node {
 public:
  FunctionNode(std::string name, BackwardFn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  std::vector<Tensor> apply(const Tensor& grad_output) override;
  void release() override { fn_ = nullptr; }
  std::string name() const override { return name_; }

 private:
  std::string name_;
  BackwardFn fn_;
};

// True when grad mode is on and some input requires grad.
bool needs_grad(std::initializer_list<const Tensor*> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);

// Makes `output` the result of a differentiable op over `inputs`: when needed, creates a
// FunctionNode named `name` with backward `fn` (returning one gradient per input, in order).
// `fn` must not capture `output` itself, nor any handle that shares its TensorImpl (contiguous()
// and the like may return the same handle): the node would own itself, a cycle that leaks the
// graph and, through its AccumulateGrad nodes, the parameters whenever no backward releases it
// (a loss dropped after a nan, an evaluation with grad on). Capture output.detach() instead.
void record(const char* name, Tensor& output, const std::vector<Tensor>& inputs, BackwardFn fn);

// The edge to a tensor's gradient: its grad_fn, or its leaf's AccumulateGrad.
Edge gradient_edge(const Tensor& t);

// Runs backward from roots (with their gradients) through the graph.
void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph);

}  // namespace tandem::autograd
