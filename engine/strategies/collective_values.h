// The small collectives every multi-process strategy (ddp, horovod, ddp_spawn, ddp2) answers
// the Trainer's questions with: sync_dist reductions, stop decisions, rank 0's value, and
// Lightning's all_gather. Scalars travel as one-element tensors on `device` (the communicator's:
// the host for MPI, the GPU for NCCL).
#pragma once
#include <cstdint>

#include "collectives/communicator.h"
#include "engine/module/metrics_sink.h"

namespace tandem {

double reduce_value(collectives::Communicator& comm, Device device, double value, trainer::ReduceFx reduce_fx);
bool reduce_any_rank(collectives::Communicator& comm, Device device, bool decision);
int64_t broadcast_value(collectives::Communicator& comm, Device device, int64_t value);
// [world_size, *shape] in rank order; the same shape on every rank.
Tensor all_gather_tensor(collectives::Communicator& comm, Device device, const Tensor& tensor);

}  // namespace tandem
