#include "engine/strategies/bagua/point_to_point.h"

#include "base/error.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/ops/ops.h"

namespace tandem::bagua {

namespace {

class FinishedWork : public collectives::Work {
 public:
  using Work::Work;
  bool is_completed() override { return true; }
  void wait(collectives::Millis) override {}
};

constexpr int kToLeaderTag = 7101, kFromLeaderTag = 7102, kToRootTag = 7103, kFromRootTag = 7104;

void assign(const Tensor& dst, const Tensor& value) {
  Tensor target = dst;
  target.copy_(value);
}

}  // namespace

collectives::WorkHandle finished_work(const collectives::Communicator& comm, std::string description) {
  return std::make_shared<FinishedWork>(std::move(description), comm.options().timeout);
}

void exact_group_average(collectives::Communicator& comm, const Tensor& tensor, const std::vector<int>& group) {
  if (group.size() <= 1) return;
  NoGradGuard no_grad;
  const int leader = group.front();
  if (comm.rank() != leader) {
    comm.send(tensor, leader, kToLeaderTag);
    comm.recv(tensor, leader, kFromLeaderTag);
    return;
  }
  Tensor incoming = Tensor::empty(tensor.shape(), tensor.dtype(), tensor.device());
  Tensor sum = tensor.clone();
  for (size_t k = 1; k < group.size(); ++k) {
    comm.recv(incoming, group[k], kToLeaderTag);
    sum = add(sum, incoming);
  }
  assign(tensor, sum / double(group.size()));
  for (size_t k = 1; k < group.size(); ++k) comm.send(tensor, group[k], kFromLeaderTag);
}

void check_node_grouping(int world_size, int ranks_per_node) {
  if (ranks_per_node < 1 || world_size % ranks_per_node != 0) {
    throw ConfigError("bagua hierarchical: ranks_per_node=" + std::to_string(ranks_per_node) +
                      " does not split the " + std::to_string(world_size) +
                      " ranks into equal nodes; give a divisor of the world size (default: the ranks the launcher "
                      "put on each node)");
  }
}

void hierarchical_average(collectives::Communicator& comm, const Tensor& tensor, int ranks_per_node,
                          const GroupAverage& across_nodes) {
  const int size = comm.size(), rank = comm.rank();
  check_node_grouping(size, ranks_per_node);
  NoGradGuard no_grad;
  const int root = rank - rank % ranks_per_node;
  if (rank != root) {
    comm.send(tensor, root, kToRootTag);
    comm.recv(tensor, root, kFromRootTag);
    return;
  }
  std::vector<int> node(static_cast<size_t>(ranks_per_node));
  for (int k = 0; k < ranks_per_node; ++k) node[static_cast<size_t>(k)] = root + k;
  Tensor incoming = Tensor::empty(tensor.shape(), tensor.dtype(), tensor.device());
  Tensor sum = tensor.clone();
  for (size_t k = 1; k < node.size(); ++k) {
    comm.recv(incoming, node[k], kToRootTag);
    sum = add(sum, incoming);
  }
  if (ranks_per_node > 1) assign(tensor, sum / double(ranks_per_node));
  std::vector<int> roots;
  for (int r = 0; r < size; r += ranks_per_node) roots.push_back(r);
  across_nodes(comm, tensor, roots);
  for (size_t k = 1; k < node.size(); ++k) comm.send(tensor, node[k], kFromRootTag);
}

void exchange_with(collectives::Communicator& comm, const Tensor& tensor, const Tensor& received, int peer, int tag) {
  comm.exchange({{collectives::PeerTransfer::Kind::Recv, received, peer, tag},
                 {collectives::PeerTransfer::Kind::Send, tensor, peer, tag}});
}

}  // namespace tandem::bagua
