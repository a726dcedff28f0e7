// The registry of built-in bagua algorithms and the option parsers they share.
#include <algorithm>

#include "base/error.h"
#include "engine/accelerators/device_parsing.h"
#include "engine/strategies/bagua/algorithms.h"

namespace tandem::bagua {

BaguaAlgorithmRegistry& bagua_algorithm_registry() {
  static BaguaAlgorithmRegistry* registry = [] {
    auto* r = new BaguaAlgorithmRegistry();
    const InitParams gradient_options{{"hierarchical", "false"}, {"ranks_per_node", ""}};
    r->add("gradient_allreduce", "float gradients averaged in buckets during backward, as ddp (optionally hierarchical)",
           [](const InitParams& p) { return std::make_unique<GradientAllreduce>(p); }, gradient_options);
    r->add("bytegrad", "gradients compressed to 8 bits with a min/max per chunk, scatter-reduced and allgathered",
           [](const InitParams& p) { return std::make_unique<ByteGrad>(p); }, gradient_options);
    r->add("decentralized", "gradients stay local; weights averaged with all ranks or one peer after the step",
           [](const InitParams& p) { return std::make_unique<Decentralized>(p); },
           {{"peer_selection_mode", "all"}, {"communication_interval", "1"}});
    r->add("low_precision_decentralized", "gradients stay local; weights mixed with the ring neighbours through "
                                          "8-bit compressed differences after the step",
           [](const InitParams& p) { return std::make_unique<LowPrecisionDecentralized>(p); },
           {{"communication_interval", "1"}});
    r->add("qadam", "the QAdam optimizer's communication: gradients averaged during its warm-up, then its momentum "
                    "compressed to 8 bits (--optimizer=QAdam)",
           [](const InitParams& p) { return std::make_unique<QAdamAlgorithm>(p); });
    r->add("async", "warm-up steps of gradient allreduce, then weights averaged by non-blocking rounds every "
                    "sync_interval_ms while training goes on; replicas equal at the end",
           [](const InitParams& p) { return std::make_unique<AsyncModelAverage>(p); },
           {{"sync_interval_ms", "500"}, {"warmup_steps", "0"}});
    return r;
  }();
  return *registry;
}

bool parse_bool_option(const InitParams& params, const std::string& key) {
  const auto it = params.find(key);
  if (it == params.end() || it->second.empty()) return false;
  const std::string v = lower_case(it->second);
  if (v == "true" || v == "1" || v == "yes" || v == "on") return true;
  if (v == "false" || v == "0" || v == "no" || v == "off") return false;
  throw ConfigError("--trainer.strategy." + key + "=" + it->second + " is not valid: expected true or false");
}

int64_t parse_int_option(const InitParams& params, const std::string& key, int64_t min, const std::string& meaning) {
  const std::string text = params.at(key);
  int n = 0;
  if (!parse_int_strict(text, &n) || n < min) {
    throw ConfigError("--trainer.strategy." + key + "=" + text + " is not valid: expected an integer >= " +
                      std::to_string(min) + " (" + meaning + ")");
  }
  return n;
}

}  // namespace tandem::bagua
