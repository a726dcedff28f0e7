// Bagua's communication algorithms: each one a plugin behind BaguaAlgorithm, registered by name
// in bagua_algorithm_registry() (builtin_algorithms.cpp); the bagua strategy
// (bagua_strategy.h) trains with the one `--trainer.strategy.algorithm=` names and never
// compares names itself.
//
// An algorithm acts at up to two points of a training step:
//   gradients  when averages_gradients(step): the Reducer averages each gradient bucket during
//              backward with bucket_averager() (empty: its own allreduce(avg), as ddp)
//              (gradient_allreduce, bytegrad); otherwise gradients stay local
//   weights    after_optimizer_step(): what happens to the weights after each step
//              (decentralized averages them with peers; low_precision_decentralized with its
//              ring neighbours through compressed differences; async hands snapshots to
//              a background thread that averages them on a communicator of its own, and
//              applies the averages)
//   the end    finish_training(): after the last step of a fit (async: replicas made equal);
//              abandon_training() instead when the fit failed
// Options arrive as strings (InitParams); each algorithm declares the ones it takes in its
// registry entry, so an option another algorithm takes is refused with the list of its own.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/named_registry.h"
#include "collectives/communicator.h"
#include "engine/optim/optimizer.h"
#include "engine/strategies/optimizer_requirement.h"
#include "engine/strategies/reducer.h"

namespace tandem::bagua {

class BaguaAlgorithm {
 public:
  virtual ~BaguaAlgorithm() = default;
  virtual std::string name() const = 0;
  // The optimizer this algorithm's communication is written for; nullopt: any.
  virtual std::optional<OptimizerRequirement> required_optimizer() const { return std::nullopt; }
  // Planning: ConfigError when the algorithm cannot run on `world_size` processes.
  virtual void validate(int /*world_size*/) const {}
  // False: the gradients of optimizer step `step` (counted from 1) stay on each rank (the
  // weights are averaged instead).
  virtual bool averages_gradients(int64_t /*step*/) const { return true; }
  // True: the strategy hands it a communicator of its own (set_own_communicator) at setup, so
  // its operations never interleave with the others' on the main one.
  virtual bool needs_own_communicator() const { return false; }
  virtual void set_own_communicator(std::shared_ptr<collectives::Communicator> /*comm*/) {}
  // The Reducer's bucket averaging over `comm`; empty: allreduce(avg).
  virtual BucketAverager bucket_averager(const collectives::Communicator& comm) const = 0;
  // Once the module is set up (weights equal on every rank), with its trainable parameters.
  virtual void on_setup(const std::vector<Tensor>& /*params*/) {}
  // After a resumed fit loaded its checkpoint's weights (equal on every rank), before its first
  // step; state that tracks the weights starts again from them.
  virtual void on_weights_restored(const std::vector<Tensor>& /*params*/) {}
  // Before optimizer step `step` (counted from 1), with the optimizer that will take it
  // (qadam connects QAdam's momentum averaging here).
  virtual void before_optimizer_step(collectives::Communicator& /*comm*/, optim::Optimizer& /*optimizer*/,
                                     int64_t /*step*/) {}
  // After every optimizer step taken; `step` counts them from 1.
  virtual void after_optimizer_step(collectives::Communicator& /*comm*/, const std::vector<Tensor>& /*params*/,
                                    int64_t /*step*/) {}
  // After the last optimizer step of a run that took steps; collective over `comm`.
  virtual void finish_training(collectives::Communicator& /*comm*/, const std::vector<Tensor>& /*params*/) {}
  // Instead of finish_training when the fit failed (an exception on this rank): ends the
  // algorithm's background work without any collective, since the other ranks may be anywhere.
  virtual void abandon_training() {}
  // What goes on the wire, for the end-of-fit summary.
  virtual std::string describe() const = 0;
};

class BaguaAlgorithmRegistry : public NamedRegistry<BaguaAlgorithm> {
 public:
  BaguaAlgorithmRegistry() : NamedRegistry<BaguaAlgorithm>("bagua algorithm") {}
};

// The process-wide registry with the built-in algorithms.
BaguaAlgorithmRegistry& bagua_algorithm_registry();

// ---- option parsing shared by the algorithms (ConfigError naming the option and what is allowed) ----
bool parse_bool_option(const InitParams& params, const std::string& key);
// An integer >= min; `meaning` says what it counts.
int64_t parse_int_option(const InitParams& params, const std::string& key, int64_t min, const std::string& meaning);

}  // namespace tandem::bagua
