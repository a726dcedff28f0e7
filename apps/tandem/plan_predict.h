// `tandem plan --predict`: the plan's predicted step time and scaling efficiency
// (engine/strategies/scaling_model.h; docs/SCALING.md). The step's forward, backward and
// optimizer times are measured here on one device of the plan's accelerator (a few batches of the
// configured model, data and batch size, the first one not counted) unless --predict_step_ms
// gives them; the gradient buckets are the Reducer's for the configured model; the links are
// --predict_intra and --predict_inter (latency in microseconds, bus bandwidth in GB/s; defaults:
// NVLink 4 inside a node and 8 x 400 Gb/s InfiniBand per node).
#pragma once
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/tandem/run_config.h"
#include "engine/config/config_args.h"
#include "engine/strategies/execution_plan.h"

namespace tandem::cli {

// The flags --predict adds to `tandem plan`.
std::vector<AppFlag> predict_flags();

// Whether the command line asked for a prediction.
bool wants_prediction(const ParsedRun& run);

// The "prediction" member of the plan's JSON. Throws ConfigError for malformed --predict_*
// values, naming the flag and the expected form.
nlohmann::ordered_json predict_scaling(const ParsedRun& run, const ExecutionPlan& plan);

}  // namespace tandem::cli
