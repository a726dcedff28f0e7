#include "base/error.h"
#include "engine/optim/qadam.h"
#include "engine/strategies/bagua/algorithms.h"
#include "engine/strategies/bagua/compressed_average.h"
#include "engine/strategies/bagua/min_max_uint8.h"

namespace tandem::bagua {

void QAdamAlgorithm::on_setup(const std::vector<Tensor>& /*params*/) {
  warmup_steps_ = -1;
  residuals_.clear();
}

void QAdamAlgorithm::before_optimizer_step(collectives::Communicator& comm, optim::Optimizer& optimizer,
                                           int64_t /*step*/) {
  auto* qadam = dynamic_cast<optim::QAdam*>(&optimizer);
  if (qadam == nullptr) {
    throw ConfigError("bagua algorithm=qadam communicates QAdam's compressed momentum, but the optimizer is " +
                      optimizer.name() + "; use --optimizer=QAdam (with --optimizer.warmup_steps), or another "
                      "bagua algorithm for " + optimizer.name());
  }
  if (warmup_steps_ >= 0) return;
  warmup_steps_ = qadam->warmup_steps();
  // The communicator and this algorithm are the strategy's, which outlives the optimizer's use of them.
  collectives::Communicator* world = &comm;
  qadam->set_momentum_averager([this, world](const Tensor& exp_avg) {
    std::vector<int> everyone(static_cast<size_t>(world->size()));
    for (int r = 0; r < world->size(); ++r) everyone[static_cast<size_t>(r)] = r;
    // Residuals start at zero for a momentum tensor not seen before (also after a checkpoint
    // load replaced it; they are not saved) and for memory reused by a tensor of another size.
    CompressionResiduals& residuals = residuals_[exp_avg.raw_data()];
    if (residuals.sent.defined() && residuals.sent.numel() != exp_avg.numel()) residuals = {};
    compressed_group_average(*world, exp_avg, everyone, kDefaultCompressionBlock, &residuals);
  });
}

std::string QAdamAlgorithm::describe() const {
  return "qadam: gradients averaged during QAdam's warm-up, then QAdam's momentum sent as 8-bit codes with a "
         "min/max per " + std::to_string(kDefaultCompressionBlock) + " elements (scatter-reduce, then allgather) "
         "with error feedback; steps bounded as Adam's";
}

}  // namespace tandem::bagua
