// Backward execution. Counts, for every node reachable from the root, how many edges point
// at it; a node runs once all of them have delivered their gradient (summed). Among ready
// nodes the most recently created runs first, which reproduces reverse execution order and
// makes the order of AccumulateGrad calls (and so DDP bucket readiness) deterministic.
#include <queue>
#include <unordered_map>

#include "base/error.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/autograd/node.h"
#include "tensor/ops/ops.h"

namespace tandem::autograd {

namespace {
struct LaterFirst {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr < b->sequence_nr; }
};
}  // namespace

void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph) {
  NoGradGuard no_grad;
  Edge root_edge = gradient_edge(root);
  if (!root_edge.node)
    throw AutogradError("backward() on a tensor that does not require grad and has no grad_fn");

  // Dependency counts over the reachable graph.
  std::unordered_map<Node*, int> dependencies;
  std::vector<Node*> stack{root_edge.node.get()};
  std::unordered_map<Node*, bool> seen{{root_edge.node.get(), true}};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges) {
      if (!e.node) continue;
      Node* next = e.node.get();
      dependencies[next]++;
      if (!seen[next]) {
        seen[next] = true;
        stack.push_back(next);
      }
    }
  }

  std::unordered_map<Node*, Tensor> buffers;
  buffers[root_edge.node.get()] = grad;
  std::priority_queue<Node*, std::vector<Node*>, LaterFirst> ready;
  ready.push(root_edge.node.get());
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    Tensor g = std::move(buffers[n]);
    buffers.erase(n);
    // A node that received no gradient (all paths into it were undefined) propagates none,
    // but still releases its successors.
    std::vector<Tensor> input_grads;
    if (g.defined()) input_grads = n->apply(g);
    if (!retain_graph) {
      n->release();
      n->released = true;
    }
    for (size_t i = 0; i < n->next_edges.size(); ++i) {
      Node* next = n->next_edges[i].node.get();
      if (!next) continue;
      if (i < input_grads.size() && input_grads[i].defined()) {
        Tensor& buf = buffers[next];
        buf = buf.defined() ? buf + input_grads[i] : input_grads[i];
      }
      if (--dependencies[next] == 0) ready.push(next);
    }
  }
}

}  // namespace tandem::autograd
