// Averaging schemes of the bagua algorithms built from the Communicator's point-to-point
// operations, so they run over every backend (MPI on CPUs, NCCL on GPUs) without
// sub-communicators. Tensors are contiguous and have the same shape on every rank taking part;
// every rank of `group` calls the same function with the same group.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "collectives/communicator.h"

namespace tandem::bagua {

// A Work that is done when it is returned (the schemes below finish before they return).
collectives::WorkHandle finished_work(const collectives::Communicator& comm, std::string description);

// Averages `tensor` in place over the ranks in `group` (rank numbers of comm, ascending).
using GroupAverage = std::function<void(collectives::Communicator& comm, const Tensor& tensor, const std::vector<int>& group)>;

// The exact group mean: group[0] receives the others' tensors, adds them in group order, divides
// by the group size and sends the mean back, so every member ends with group[0]'s bits.
void exact_group_average(collectives::Communicator& comm, const Tensor& tensor, const std::vector<int>& group);

// Groups of `ranks_per_node` consecutive ranks (node = rank / ranks_per_node); the first rank
// of each group is its node root. ConfigError unless ranks_per_node >= 1 divides the world size.
void check_node_grouping(int world_size, int ranks_per_node);

// tensor becomes the mean over all ranks in three stages: each node root receives its members'
// tensors and takes their mean (exactly, in rank order); the roots average their node means with
// `across_nodes` (all nodes have the same number of ranks, so that is the world's mean); each
// root sends the result to its members.
void hierarchical_average(collectives::Communicator& comm, const Tensor& tensor, int ranks_per_node,
                          const GroupAverage& across_nodes);

// tensor goes to `peer` while the peer's same-shaped tensor arrives in `received`.
void exchange_with(collectives::Communicator& comm, const Tensor& tensor, const Tensor& received, int peer, int tag);

}  // namespace tandem::bagua
