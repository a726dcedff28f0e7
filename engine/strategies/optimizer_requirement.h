// What a strategy's communication needs of the optimizer: bagua's qadam sends QAdam's compressed
// momentum, so it needs the QAdam optimizer. Declared by the strategy (through its bagua
// algorithm); the config checks --optimizer against it before anything runs.
#pragma once
#include <string>

namespace tandem {

struct OptimizerRequirement {
  std::string optimizer;  // the optimizer class it needs ("QAdam")
  std::string why;        // the request and what it does with that optimizer, for messages
  std::string otherwise;  // what to choose instead for another optimizer
};

}  // namespace tandem
