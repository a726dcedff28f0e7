#include "apps/tandem/plan_predict.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include "apps/tandem/subcommands.h"
#include "base/error.h"
#include "engine/accelerators/cuda_accelerator.h"
#include "engine/strategies/reducer.h"
#include "engine/strategies/scaling_model.h"
#include "engine/trainer/trainer.h"
#include "kernels/backend.h"
#include "models/registry.h"

namespace tandem::cli {

namespace {

using scaling::Averaging;
using scaling::Cluster;
using scaling::Link;
using scaling::StepProfile;

constexpr int kMeasuredBatches = 6;  // the first one warms up and is not counted

// "A,B[,C]" as `count` numbers, each finite and >= 0.
std::vector<double> parse_numbers(const std::string& flag, const std::string& value, size_t count, const std::string& form) {
  std::vector<double> out;
  bool ok = true;
  std::stringstream in(value);
  std::string item;
  while (ok && std::getline(in, item, ',')) {
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      ok = false;
    }
    ok = ok && used == item.size() && std::isfinite(v) && v >= 0;
    out.push_back(v);
  }
  if (!ok || out.size() != count) throw ConfigError("--" + flag + "=" + value + " is not valid: expected " + form);
  return out;
}

std::string flag_value(const ParsedRun& run, const std::string& name, const std::string& fallback) {
  const auto it = run.args.app_flags.find(name);
  return it == run.args.app_flags.end() ? fallback : it->second.back();
}

Link parse_link(const ParsedRun& run, const std::string& flag, const std::string& fallback) {
  const std::vector<double> v =
      parse_numbers(flag, flag_value(run, flag, fallback), 2, "LATENCY_US,GBPS (two numbers >= 0, e.g. 5,400)");
  if (v[1] <= 0) throw ConfigError("--" + flag + ": the bandwidth must be > 0 GB/s");
  return {v[0] * 1e-6, v[1] * 1e9};
}

// Times each training batch's forward, backward and optimizer phases (device work waited for).
class PhaseTimer : public trainer::Callback {
 public:
  std::vector<double> forward_s, backward_s, optimizer_s;

  std::string name() const override { return "PhaseTimer"; }
  void on_train_batch_start(trainer::Trainer&, trainer::LightningModule&, const data::Batch&, int64_t) override {
    start_ = now(std::nullopt);
  }
  void on_before_backward(trainer::Trainer&, trainer::LightningModule&, const Tensor& loss) override {
    device_ = loss.device();
    forward_end_ = now(device_);
  }
  void on_before_optimizer_step(trainer::Trainer&, trainer::LightningModule&, optim::Optimizer&) override {
    backward_end_ = now(device_);
  }
  void on_train_batch_end(trainer::Trainer&, trainer::LightningModule&, const Tensor&, const data::Batch&,
                          int64_t) override {
    const double end = now(device_);
    forward_s.push_back(forward_end_ - start_);
    backward_s.push_back(backward_end_ - forward_end_);
    optimizer_s.push_back(end - backward_end_);
  }

 private:
  static double now(const std::optional<Device>& device) {
    if (device && !device->is_cpu()) backend_for(*device).synchronize(device->index);
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  std::optional<Device> device_;
  double start_ = 0, forward_end_ = 0, backward_end_ = 0;
};

double median_after_first(std::vector<double> v) {
  if (v.size() > 1) v.erase(v.begin());
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Forward, backward and optimizer of the configured model on one device of the plan's accelerator.
StepProfile measure_profile(const ParsedRun& run, const ExecutionPlan& plan) {
  refuse_training_when_simulating("measure the step for --predict (give --predict_step_ms=F,B,O instead)");
  trainer::TrainerOptions options = trainer::trainer_options_from_config(run.config);
  options.accelerator = plan.accelerator;
  options.devices = DevicesSpec("1");
  options.strategy = "auto";
  options.num_nodes = 1;
  options.fast_dev_run = trainer::FastDevRun(int64_t{kMeasuredBatches});
  options.enable_progress_bar = false;
  options.enable_model_summary = false;
  options.max_restarts = 0;
  auto timer = std::make_shared<PhaseTimer>();
  options.callbacks = {timer};
  std::shared_ptr<trainer::LightningModule> model = models::make_model(run.config);
  std::shared_ptr<data::DataModule> datamodule = make_data_module(run.config, *model);
  trainer::Trainer trainer(std::move(options));
  trainer.fit(*model, *datamodule);
  if (timer->forward_s.empty()) throw DataError("--predict: the training data gave no batch to measure");
  return {median_after_first(timer->forward_s), median_after_first(timer->backward_s),
          median_after_first(timer->optimizer_s), {}};
}

// The configured model's trainable parameters, as the Reducer sees them.
std::vector<Tensor> trainable_parameters(const ParsedRun& run) {
  std::shared_ptr<trainer::LightningModule> model = models::make_model(run.config);
  std::vector<Tensor> trainable;
  for (const Tensor& p : model->parameters())
    if (p.requires_grad()) trainable.push_back(p);
  return trainable;
}

std::vector<int64_t> bucket_bytes(const std::vector<Tensor>& params, double cap_mib) {
  ReducerOptions reducer;
  reducer.bucket_cap_bytes = int64_t(cap_mib * (1 << 20));
  reducer.first_bucket_cap_bytes = std::min(reducer.first_bucket_cap_bytes, reducer.bucket_cap_bytes);
  std::vector<int64_t> out;
  for (const ReducerBucket& b : assign_buckets(params, reducer)) out.push_back(b.numel * int64_t(dtype_size(b.dtype)));
  return out;
}

nlohmann::ordered_json prediction_json(const scaling::StepPrediction& p) {
  return {{"step_ms", p.step_s * 1e3},
          {"compute_ms", p.compute_s * 1e3},
          {"host_cpu_ms", p.host_s * 1e3},
          {"communication_ms", p.communication_s * 1e3},
          {"exposed_communication_ms", p.exposed_s * 1e3},
          {"efficiency", p.efficiency}};
}

}  // namespace

std::vector<AppFlag> predict_flags() {
  return {{"predict", "also predict the step time and scaling efficiency (docs/SCALING.md)", false},
          {"predict_step_ms", "F,B,O: forward, backward and optimizer ms per step (default: measured here)", true},
          {"predict_intra", "LATENCY_US,GBPS of the links inside a node (default 2,370: NVLink 4)", true},
          {"predict_inter", "LATENCY_US,GBPS between nodes, all NICs of a node (default 5,400: 8 x 400 Gb/s)", true},
          {"predict_host_ns_per_byte", "CPU ns of the computing cores per byte a rank sends (default 0: DMA copies; "
                                       "TCP on the cores that compute: fitted by bench/run_scaling_check.sh)", true},
          {"predict_averaging", "allreduce | sharded | bytegrad | decentralized | low_precision_decentralized | async "
                                "(default allreduce)", true},
          {"predict_bucket_mb", "the Reducer's bucket cap in MiB (default 25; the first bucket at most 1)", true}};
}

bool wants_prediction(const ParsedRun& run) {
  for (const AppFlag& f : predict_flags())
    if (run.args.app_flags.count(f.name)) return true;
  return false;
}

nlohmann::ordered_json predict_scaling(const ParsedRun& run, const ExecutionPlan& plan) {
  Cluster cluster;
  cluster.nodes = plan.num_nodes;
  cluster.ranks_per_node = std::max(1, plan.world_size / std::max(1, plan.num_nodes));
  cluster.intra = parse_link(run, "predict_intra", "2,370");
  cluster.inter = parse_link(run, "predict_inter", "5,400");
  cluster.host_s_per_byte =
      parse_numbers("predict_host_ns_per_byte", flag_value(run, "predict_host_ns_per_byte", "0"), 1,
                    "nanoseconds per byte >= 0, e.g. 3.5")[0] * 1e-9;
  const Averaging averaging = scaling::averaging_from_name(flag_value(run, "predict_averaging", "allreduce"));
  const double cap_mb = parse_numbers("predict_bucket_mb", flag_value(run, "predict_bucket_mb", "25"), 1,
                                      "a bucket cap in MiB > 0, e.g. 25")[0];
  if (cap_mb <= 0) throw ConfigError("--predict_bucket_mb must be > 0 MiB");

  StepProfile profile;
  std::string measured = "measured here on one " + plan.accelerator + " device";
  if (run.args.app_flags.count("predict_step_ms")) {
    const std::vector<double> ms = parse_numbers("predict_step_ms", flag_value(run, "predict_step_ms", ""), 3,
                                                 "F,B,O: forward, backward and optimizer milliseconds, e.g. 10,20,2");
    profile = {ms[0] * 1e-3, ms[1] * 1e-3, ms[2] * 1e-3, {}};
    measured = "given by --predict_step_ms";
  } else {
    profile = measure_profile(run, plan);
  }
  const std::vector<Tensor> params = trainable_parameters(run);
  profile.bucket_bytes = bucket_bytes(params, cap_mb);
  const scaling::StepPrediction chosen = scaling::predict_step(profile, cluster, averaging);

  nlohmann::ordered_json out = prediction_json(chosen);
  out["ranks"] = cluster.ranks();
  out["nodes"] = cluster.nodes;
  out["averaging"] = scaling::averaging_name(averaging);
  out["step_profile"] = {{"forward_ms", profile.forward_s * 1e3}, {"backward_ms", profile.backward_s * 1e3},
                         {"optimizer_ms", profile.optimizer_s * 1e3}, {"source", measured}};
  out["bucket_bytes"] = profile.bucket_bytes;

  // What else would help: every averaging at this cap, and allreduce at other caps.
  nlohmann::ordered_json alternatives = nlohmann::ordered_json::array();
  std::string best = "the chosen configuration";
  double best_step = chosen.step_s;
  for (Averaging other : {Averaging::Allreduce, Averaging::ShardedOptimizer, Averaging::CompressedAllreduce,
                          Averaging::Decentralized, Averaging::Asynchronous}) {
    if (other == averaging) continue;
    const scaling::StepPrediction p = scaling::predict_step(profile, cluster, other);
    nlohmann::ordered_json row = prediction_json(p);
    row["averaging"] = scaling::averaging_name(other);
    alternatives.push_back(row);
    if (p.step_s < best_step) best_step = p.step_s, best = "averaging " + scaling::averaging_name(other);
  }
  for (double other_mb : {1.0, 4.0, 25.0, 100.0}) {
    if (other_mb == cap_mb) continue;
    StepProfile at_cap = profile;
    at_cap.bucket_bytes = bucket_bytes(params, other_mb);
    const scaling::StepPrediction p = scaling::predict_step(at_cap, cluster, averaging);
    nlohmann::ordered_json row = prediction_json(p);
    row["bucket_mb"] = other_mb;
    alternatives.push_back(row);
    if (p.step_s < best_step) {
      best_step = p.step_s;
      std::ostringstream name;
      name << "a bucket cap of " << other_mb << " MiB";
      best = name.str();
    }
  }
  out["alternatives"] = alternatives;
  std::ostringstream advice;
  if (best_step < 0.95 * chosen.step_s) {
    advice.precision(3);
    advice << best << " would take the step from " << chosen.step_s * 1e3 << " to " << best_step * 1e3 << " ms";
  } else {
    advice << "no averaging or bucket cap the model knows saves 5% of this step";
  }
  out["advice"] = advice.str();
  return out;
}

}  // namespace tandem::cli
