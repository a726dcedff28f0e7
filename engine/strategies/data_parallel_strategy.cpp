#include "engine/strategies/data_parallel_strategy.h"

#include <exception>
#include <map>
#include <thread>

#include "base/error.h"
#include "kernels/backend.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/generator.h"
#include "tensor/ops/autocast.h"
#include "tensor/ops/ops.h"

namespace tandem {

using trainer::LightningModule;
using trainer::ReduceFx;

namespace {

// One value per name from the chunks' captured log calls, in first-logged order.
void merge_logs(LightningModule& root, const std::vector<std::vector<LightningModule::LoggedValue>>& captured,
                const std::vector<int64_t>& chunk_sizes) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::pair<double, int64_t>>> values;
  std::map<std::string, trainer::LogOptions> options;
  for (size_t i = 0; i < captured.size(); ++i) {
    for (const auto& v : captured[i]) {
      if (!values.count(v.name)) {
        order.push_back(v.name);
        options[v.name] = v.options;
      }
      values[v.name].push_back({v.value, chunk_sizes[i]});
    }
  }
  for (const auto& name : order) {
    const auto& vs = values[name];
    double merged = vs.front().first;
    switch (options[name].reduce_fx) {
      case ReduceFx::Mean: {
        double sum = 0, weight = 0;
        for (const auto& [v, n] : vs) sum += v * double(n), weight += double(n);
        merged = sum / weight;
        break;
      }
      case ReduceFx::Sum:
        merged = 0;
        for (const auto& [v, n] : vs) merged += v;
        break;
      case ReduceFx::Max:
        for (const auto& [v, n] : vs) merged = std::max(merged, v);
        break;
      case ReduceFx::Min:
        for (const auto& [v, n] : vs) merged = std::min(merged, v);
        break;
    }
    root.log(name, merged, options[name]);
  }
}

}  // namespace

void DataParallelStrategy::validate(const StrategyContext& c) const {
  if (c.num_nodes != 1) {
    throw ConfigError("strategy=" + name() + " runs in one process on one node, but num_nodes=" + std::to_string(c.num_nodes) +
                      "; use --trainer.strategy=ddp2 (dp inside each node, ddp across nodes) or ddp");
  }
}

void DataParallelStrategy::validate_precision(Precision precision) const {
  if (precision == Precision::Float16Mixed) {
    throw ConfigError("strategy=" + name() + " does not train with precision=16-mixed (Lightning refuses 16-bit with "
                      "DataParallel: the loss scaler cannot follow the replicas); use --trainer.precision=bf16-mixed, "
                      "or --trainer.strategy=ddp for 16-mixed");
  }
}

void DataParallelStrategy::setup_environment(const StrategyEnvironment& env) {
  if (env.world_size != 1) {
    throw ConfigError("strategy=" + name() + " runs one process, but the launcher started " + std::to_string(env.world_size) +
                      "; run it without mpirun, or use --trainer.strategy=ddp2 for one process per node");
  }
  Strategy::setup_environment(env);
}

void DataParallelStrategy::setup_module(LightningModule& module) {
  Strategy::setup_module(module);
  root_ = &module;
  replicas_.clear();
  pending_ = {};
  const std::vector<Tensor> root_params = module.parameters();
  // Building a replica initializes weights that are overwritten at once; the random stream
  // (dropout, later inits) continues as if it had not been built.
  const Generator saved = default_generator();
  struct Restore {
    const Generator& saved;
    ~Restore() { default_generator() = saved; }
  } restore{saved};
  for (size_t i = 1; i < devices_.size(); ++i) {
    std::shared_ptr<LightningModule> replica = module.make_replica();
    if (!replica) {
      throw ConfigError("strategy=" + name() + " runs a copy of the model on each of its " + std::to_string(devices_.size()) +
                        " devices, but " + module.name() + " does not implement LightningModule::make_replica(); "
                        "override it to return a new module of the same architecture (the weights are copied from "
                        "the original), or use --trainer.strategy=ddp");
    }
    replica->to(devices_[i]);
    replica->to(compute_dtype());
    const std::vector<Tensor> params = replica->parameters();
    if (params.size() != root_params.size()) {
      throw ConfigError("strategy=" + name() + ": make_replica() of " + module.name() + " returned a module with " +
                        std::to_string(params.size()) + " parameters, the original has " +
                        std::to_string(root_params.size()) + "; return the same architecture");
    }
    for (size_t k = 0; k < params.size(); ++k) {
      if (params[k].shape() != root_params[k].shape()) {
        throw ConfigError("strategy=" + name() + ": make_replica() of " + module.name() + " returned parameter " +
                          std::to_string(k) + " of shape " + params[k].shape_str() + ", the original's is " +
                          root_params[k].shape_str() + "; return the same architecture");
      }
    }
    replica->attach_host(module.host());
    replicas_.push_back(std::move(replica));
  }
  refresh_replicas(module);
}

void DataParallelStrategy::teardown() { pending_ = {}; }

void DataParallelStrategy::refresh_replicas(LightningModule& root) {
  if (replicas_.empty()) return;
  NoGradGuard no_grad;
  const auto params = root.parameters();
  const auto buffers = root.buffers();
  for (size_t i = 0; i < replicas_.size(); ++i) {
    const auto& replica = replicas_[i];
    const auto rp = replica->parameters();
    const auto rb = replica->buffers();
    // A replica on the root's own device (CPU devices) reads the root's weights in place: the
    // device threads only read them, and the optimizer writes them when no thread runs. Each
    // keeps its own gradients and buffers.
    const bool same_device = devices_[i + 1] == root_device();
    for (size_t k = 0; k < rp.size(); ++k) {
      if (same_device) {
        nn::replace_data_in_place(rp[k], params[k]);
      } else {
        Tensor(rp[k]).copy_(params[k]);
      }
    }
    for (size_t k = 0; k < rb.size() && k < buffers.size(); ++k) Tensor(rb[k]).copy_(buffers[k]);
    replica->train(root.is_training());
  }
}

std::vector<data::Batch> DataParallelStrategy::scatter(const data::Batch& batch) const {
  const int64_t total = batch.size();
  const int64_t n = std::max<int64_t>(1, std::min<int64_t>(int64_t(devices_.size()), total));
  std::vector<data::Batch> chunks;
  int64_t start = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t size = total / n + (i < total % n ? 1 : 0);
    data::Batch chunk;
    if (batch.input.defined()) chunk.input = batch.input.narrow(0, start, size).contiguous();
    if (batch.target.defined()) chunk.target = batch.target.narrow(0, start, size).contiguous();
    chunks.push_back(chunk);
    start += size;
  }
  return chunks;
}

std::vector<int64_t> DataParallelStrategy::chunk_sizes(const std::vector<data::Batch>& chunks) {
  std::vector<int64_t> sizes;
  for (const auto& c : chunks) sizes.push_back(c.size());
  return sizes;
}

void DataParallelStrategy::run_on_devices(LightningModule& root, const std::vector<int64_t>& sizes,
                                          const std::function<void(size_t, LightningModule&)>& fn) {
  const bool grad = grad_enabled();
  std::vector<std::vector<LightningModule::LoggedValue>> logs(sizes.size());
  std::vector<std::exception_ptr> errors(sizes.size());
  // Device i > 0 draws random numbers (dropout) from its own part of the stream, 2^40 blocks
  // apart, starting where the root's draws start this step: deterministic, and no race.
  const Generator shared = default_generator();
  auto work = [&](size_t i) {
    try {
      std::optional<ThreadGenerator> generator;
      if (i > 0) generator.emplace(Generator{shared.seed, shared.offset + (uint64_t(i) << 40)});
      if (i > 0) env_.accelerator->setup_device(env_.devices[i]);
      std::optional<NoGradGuard> no_grad;
      if (!grad) no_grad.emplace();
      autocast::Guard autocast(precision_.autocast_dtype());
      LightningModule::LogCapture capture;
      fn(i, module_on(i, root));
      // The root thread reads this device's results next: its queued work must be done.
      if (devices_[i].is_cuda()) backend_for(devices_[i]).synchronize(devices_[i].index);
      logs[i] = std::move(capture.values);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  // What this thread queued for the replicas (their refreshed weights) is done before they run.
  synchronize_root();
  std::vector<std::thread> threads;
  for (size_t i = 1; i < sizes.size(); ++i) threads.emplace_back(work, i);
  work(0);
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  merge_logs(root, logs, sizes);
}

void DataParallelStrategy::synchronize_root() const {
  if (root_device().is_cuda()) backend_for(root_device()).synchronize(root_device().index);
}

data::Batch DataParallelStrategy::on_device(const data::Batch& chunk, size_t i) const {
  return i == 0 ? chunk : move_batch(chunk, devices_[i], compute_dtype());
}

Tensor DataParallelStrategy::training_step(LightningModule& module, const data::Batch& batch, int64_t batch_idx) {
  if (replicas_.empty()) return Strategy::training_step(module, batch, batch_idx);
  refresh_replicas(module);
  const std::vector<data::Batch> chunks = scatter(batch);
  std::vector<Tensor> outputs(chunks.size());
  run_on_devices(module, chunk_sizes(chunks), [&](size_t i, LightningModule& m) {
    outputs[i] = m.training_step(on_device(chunks[i], i), batch_idx);
  });
  const Tensor gathered = gather_on_root(outputs);
  if (!gathered.defined()) return Tensor();  // no loss: nothing to backward this batch
  {
    autocast::Guard autocast(precision_.autocast_dtype());
    if (std::optional<Tensor> loss = module.training_step_end(gathered, batch)) {
      pending_ = {};
      return *loss;
    }
  }
  pending_ = {};
  double value = 0.0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    TANDEM_CHECK(outputs[i].numel() == 1, ValueError,
                 "training_step returned a tensor of shape " + outputs[i].shape_str() + " under strategy=" + name() +
                     "; return the scalar loss of the chunk, or define training_step_end to combine the outputs of "
                     "all devices");
    const double weight = double(chunks[i].size()) / double(batch.size());
    pending_.losses.push_back(outputs[i]);
    pending_.weights.push_back(weight);
    pending_.sizes.push_back(chunks[i].size());
    value += weight * outputs[i].item();
  }
  pending_.combined = Tensor::scalar(value, outputs[0].dtype()).to(root_device());
  return pending_.combined;
}

void DataParallelStrategy::backward(const Tensor& loss, double factor, bool will_step) {
  if (pending_.combined.defined() && loss.same_impl(pending_.combined)) {
    // dp refuses 16-mixed, so there is no loss scale: each chunk backwards its weighted share.
    const PendingStep step = pending_;
    run_on_devices(*root_, step.sizes, [&](size_t i, LightningModule&) {
      (step.losses[i] * (step.weights[i] * factor)).backward();
    });
  } else {
    Strategy::backward(loss, factor, will_step);
  }
  pending_ = {};
  gather_gradients();
}

void DataParallelStrategy::gather_gradients() {
  if (replicas_.empty()) return;
  NoGradGuard no_grad;
  const std::vector<Tensor> params = root_->parameters();
  std::vector<std::vector<Tensor>> replica_params;
  for (const auto& r : replicas_) replica_params.push_back(r->parameters());
  for (size_t k = 0; k < params.size(); ++k) {
    Tensor p = params[k];
    for (const auto& rp : replica_params) {
      const Tensor g = rp[k].grad();
      if (!g.defined()) continue;
      const Tensor moved = g.to(root_device());
      Tensor acc = p.grad();
      if (acc.defined()) {
        acc.copy_(acc + moved);
      } else {
        p.set_grad(moved.clone());
      }
    }
  }
  synchronize_root();  // the copies are done before the replicas' gradients are freed
  for (const auto& r : replicas_) r->zero_grad(/*set_to_none=*/true);
}

Tensor DataParallelStrategy::gather_on_root(std::vector<Tensor> outputs) {
  for (Tensor& out : outputs) {
    if (!out.defined()) return Tensor();
    const Tensor moved = out.to(root_device());
    out = moved.dim() == 0 ? moved.unsqueeze(0) : moved;
  }
  synchronize_root();  // the copies read the devices' memory, which their threads reuse next
  return cat(outputs, 0);
}

void DataParallelStrategy::evaluation_step(LightningModule& module, const data::Batch& batch, int64_t batch_idx,
                                           bool validation) {
  refresh_replicas(module);
  const std::vector<data::Batch> chunks = scatter(batch);
  std::vector<Tensor> outputs(chunks.size());
  run_on_devices(module, chunk_sizes(chunks), [&](size_t i, LightningModule& m) {
    const data::Batch chunk = on_device(chunks[i], i);
    outputs[i] = validation ? m.validation_step(chunk, batch_idx) : m.test_step(chunk, batch_idx);
  });
  const Tensor gathered = gather_on_root(std::move(outputs));
  if (!gathered.defined()) return;
  autocast::Guard autocast(precision_.autocast_dtype());
  if (validation) {
    module.validation_step_end(gathered, batch);
  } else {
    module.test_step_end(gathered, batch);
  }
}

void DataParallelStrategy::validation_step(LightningModule& module, const data::Batch& batch, int64_t batch_idx) {
  if (replicas_.empty()) return Strategy::validation_step(module, batch, batch_idx);
  evaluation_step(module, batch, batch_idx, /*validation=*/true);
}

void DataParallelStrategy::test_step(LightningModule& module, const data::Batch& batch, int64_t batch_idx) {
  if (replicas_.empty()) return Strategy::test_step(module, batch, batch_idx);
  evaluation_step(module, batch, batch_idx, /*validation=*/false);
}

Tensor DataParallelStrategy::predict_step(LightningModule& module, const data::Batch& batch, int64_t batch_idx) {
  if (replicas_.empty()) return Strategy::predict_step(module, batch, batch_idx);
  refresh_replicas(module);
  const std::vector<data::Batch> chunks = scatter(batch);
  std::vector<Tensor> outputs(chunks.size());
  run_on_devices(module, chunk_sizes(chunks), [&](size_t i, LightningModule& m) {
    outputs[i] = autocast::raise(m.predict_step(on_device(chunks[i], i), batch_idx));
  });
  return gather_on_root(std::move(outputs));
}

}  // namespace tandem
