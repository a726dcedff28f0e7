// OptimizerShard: ZeRO stage 1 for one optimizer (ddp_sharded_strategy.h). The optimizer's
// parameters, in its group order, are laid end to end as one flat vector of N elements, which
// the communicator's chunk rule splits over the ranks: rank r owns elements
// [chunk_offset(N, W, r), + chunk_count(N, W, r)). Where its chunk crosses a parameter it holds
// a segment, a view into one flat shard buffer, and an optimizer of the full optimizer's class
// (Optimizer::make_shard_optimizer) over its segments keeps their state, and only theirs. The
// full optimizer keeps its groups (schedulers set their lr; each step copies the groups' options
// to the shard's) and no state.
//
// A step: reduce_gradients (every gradient packed into the flat vector, one reduce_scatter(avg)
// into this rank's chunk, written back as each .grad: the average on this rank's chunk, zeros
// elsewhere), then hooks and clipping may change .grad, then step (the chunk's values and
// gradients read from the parameters, the shard optimizer steps, one allgather of the updated
// chunks, written into every parameter).
//
// gather_state (collective) returns the full optimizer's state_dict as one process would have
// it, and load_state takes one, so checkpoints load at any world size and under any strategy.
#pragma once
#include <memory>
#include <vector>

#include "collectives/communicator.h"
#include "engine/optim/optimizer.h"

namespace tandem {

class OptimizerShard {
 public:
  // Throws ConfigError when `full` cannot be sharded (its class returns no shard optimizer, or
  // its parameters differ in dtype or device). No communication: every rank computes the same
  // layout.
  OptimizerShard(optim::Optimizer& full, std::shared_ptr<collectives::Communicator> comm);
  ~OptimizerShard();

  // True when built for this optimizer with its current parameters.
  bool serves(const optim::Optimizer& full) const;

  void reduce_gradients();
  void step();
  // Collective: every rank calls it and gets the whole state.
  optim::OptimizerStateDict gather_state() const;
  // Loads a whole state (checked and installed by full.load_state_dict, then split: this rank
  // keeps its segments' part and the full optimizer none).
  void load_state(const optim::OptimizerStateDict& state);

  int64_t state_bytes() const;             // the shard optimizer's state on this rank
  int64_t numel() const { return total_; }  // N
  int64_t shard_numel() const { return shard_values_.numel(); }

 private:
  // The part of parameter `param` this rank owns: its flat elements [begin, end), stored at
  // shard_offset in the shard buffers, a parameter of the shard optimizer's group shard_group.
  struct Segment {
    size_t param;
    int64_t begin, end, shard_offset;
    size_t shard_group;
  };

  optim::Optimizer* full_;
  std::shared_ptr<collectives::Communicator> comm_;
  std::vector<Tensor> params_;         // the full optimizer's, in its order
  std::vector<int64_t> offsets_;       // each one's first flat element
  int64_t total_ = 0;
  Tensor flat_;                        // N elements: packed gradients, then gathered values
  Tensor shard_values_, shard_grads_;  // this rank's chunk
  std::vector<Segment> segments_;
  std::vector<Tensor> segment_params_;     // views of shard_values_, the shard optimizer's parameters
  std::vector<size_t> shard_group_source_;  // the full group of each shard optimizer group
  std::unique_ptr<optim::Optimizer> shard_optimizer_;  // null when this rank owns no element
};

}  // namespace tandem
