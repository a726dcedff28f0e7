// The C interface (capi/tandem.h) over the C++ one: flags parsed with the `tandem` program's
// schema (apps/tandem/run_config.h), the Trainer on TrainerOptions::communicator, the data in a
// HostArrayDataModule. Every entry point catches everything: nothing is thrown across C.
#include "capi/tandem.h"

#include <memory>
#include <algorithm>
#include <string>
#include <vector>

#include "apps/tandem/run_config.h"
#include "base/error.h"
#include "engine/config/config_args.h"
#include "engine/data/host_array_data_module.h"
#include "engine/trainer/checkpoint.h"
#include "engine/trainer/trainer.h"
#include "models/registry.h"
#include "tensor/autograd/grad_mode.h"
#include "tensor/generator.h"

struct tandem_model {
  std::shared_ptr<tandem::trainer::LightningModule> module;
};

struct tandem_trainer {
  std::unique_ptr<tandem::trainer::Trainer> trainer;
  std::unique_ptr<tandem::data::HostArrayDataModule> data;  // the last fit's, alive for checkpoints
};

namespace {

using namespace tandem;

thread_local std::string g_last_error;

template <typename Body>
int guarded(Body&& body) {
  try {
    body();
    g_last_error.clear();
    return TANDEM_OK;
  } catch (const ConfigError& e) {
    g_last_error = e.what();
    return TANDEM_CONFIG_ERROR;
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return TANDEM_ERROR;
  } catch (...) {
    g_last_error = "unknown error";
    return TANDEM_ERROR;
  }
}

void require(const void* pointer, const char* call, const char* argument) {
  if (pointer == nullptr) throw ConfigError(std::string(call) + ": " + argument + " is NULL; pass a valid pointer");
}

// "--a=1 --b [2, 3]" -> {"--a=1", "--b", "[2,", "3]"} is not what a user means: flags are split
// on spaces outside brackets and quotes.
std::vector<std::string> split_flags(const char* flags) {
  std::vector<std::string> out;
  if (flags == nullptr) return out;
  std::string current;
  int depth = 0;
  char quote = 0;
  for (const char* p = flags; *p; ++p) {
    const char c = *p;
    if (quote) {
      if (c == quote) quote = 0;
      else current += c;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == ' ' && depth == 0) {
      if (!current.empty()) out.push_back(current);
      current.clear();
    } else {
      if (c == '[' || c == '{') ++depth;
      if (c == ']' || c == '}') --depth;
      current += c;
    }
  }
  if (!current.empty()) out.push_back(current);
  return out;
}

// The run configuration these flags give; each flag must belong to one of `sections`.
YAML::Node configure(const std::vector<std::string>& args, const std::vector<std::string>& sections, const char* call) {
  for (const std::string& a : args) {
    bool allowed = false;
    for (const std::string& s : sections) allowed = allowed || a.rfind("--" + s, 0) == 0;
    if (!allowed) {
      std::string list;
      for (const std::string& s : sections) list += (list.empty() ? "--" : ", --") + s + "*";
      throw ConfigError(std::string(call) + ": flag '" + a + "' is not allowed here; allowed: " + list);
    }
  }
  ParsedArgs parsed = parse_args(cli::make_run_schema(), args);
  cli::resolve_run_config(parsed.config);
  return parsed.config;
}

}  // namespace

extern "C" {

const char* tandem_last_error(void) { return g_last_error.c_str(); }

int tandem_model_create(const char* name, const char* flags, tandem_model** out) {
  return guarded([&] {
    require(name, "tandem_model_create", "name");
    require(out, "tandem_model_create", "out");
    *out = nullptr;
    std::vector<std::string> args{std::string("--model=") + name};
    for (std::string& f : split_flags(flags)) args.push_back(std::move(f));
    const YAML::Node config =
        configure(args, {"model", "optimizer", "lr_scheduler", "seed_everything"}, "tandem_model_create");
    const YAML::Node seed = get_config_value(config, "seed_everything");
    if (!seed.IsNull()) manual_seed(seed.as<uint64_t>());
    auto model = std::make_unique<tandem_model>();
    model->module = models::make_model(config);
    *out = model.release();
  });
}

int tandem_model_destroy(tandem_model* model) {
  return guarded([&] { delete model; });
}

int tandem_model_num_parameters(const tandem_model* model, int64_t* count) {
  return guarded([&] {
    require(model, "tandem_model_num_parameters", "model");
    require(count, "tandem_model_num_parameters", "count");
    *count = 0;
    for (const Tensor& p : model->module->parameters()) *count += p.numel();
  });
}

int tandem_model_copy_parameters(const tandem_model* model, float* out, int64_t capacity) {
  return guarded([&] {
    require(model, "tandem_model_copy_parameters", "model");
    require(out, "tandem_model_copy_parameters", "out");
    std::vector<float> values;
    for (const Tensor& p : model->module->parameters()) {
      const std::vector<float> v = p.to(Device::cpu()).to_vector<float>();
      values.insert(values.end(), v.begin(), v.end());
    }
    if (capacity < int64_t(values.size())) {
      throw ConfigError("tandem_model_copy_parameters: capacity " + std::to_string(capacity) + " is less than the " +
                        std::to_string(values.size()) + " parameter values (tandem_model_num_parameters)");
    }
    std::copy(values.begin(), values.end(), out);
  });
}

int tandem_trainer_create(int64_t mpi_comm_fortran_handle, const char* flags, tandem_trainer** out) {
  return guarded([&] {
    require(out, "tandem_trainer_create", "out");
    *out = nullptr;
    const YAML::Node config = configure(split_flags(flags), {"trainer."}, "tandem_trainer_create");
    trainer::TrainerOptions options = trainer::trainer_options_from_config(config);
    options.communicator = collectives::HostComm{mpi_comm_fortran_handle};
    auto t = std::make_unique<tandem_trainer>();
    t->trainer = std::make_unique<trainer::Trainer>(options);
    *out = t.release();
  });
}

int tandem_trainer_destroy(tandem_trainer* trainer) {
  return guarded([&] { delete trainer; });
}

namespace {

// Runs the first example through the model (eval mode, no graph) so that features the model does
// not take are bad input, found before any training or communication.
void check_features(trainer::LightningModule& module, const float* inputs, int64_t num_features) {
  const bool was_training = module.is_training();
  module.eval();
  try {
    NoGradGuard no_grad;
    module.forward(Tensor::from_vector(std::vector<float>(inputs, inputs + num_features), {1, num_features}));
  } catch (const ShapeError& e) {
    module.train(was_training);
    throw ConfigError("tandem_fit: the model does not take examples of num_features=" + std::to_string(num_features) +
                      " (" + e.what() + "); pass the number of features it was built for");
  }
  module.train(was_training);
}

}  // namespace

int tandem_fit(tandem_trainer* trainer, tandem_model* model, const float* inputs, int64_t num_examples,
               int64_t num_features, const int64_t* targets, const tandem_data_options* options) {
  return guarded([&] {
    require(trainer, "tandem_fit", "trainer");
    require(model, "tandem_fit", "model");
    require(inputs, "tandem_fit", "inputs");
    require(targets, "tandem_fit", "targets");
    require(options, "tandem_fit", "options");
    if (num_examples < 1 || num_features < 1) {
      throw ConfigError("tandem_fit: num_examples=" + std::to_string(num_examples) + " and num_features=" +
                        std::to_string(num_features) + " must both be >= 1");
    }
    check_features(*model->module, inputs, num_features);
    data::HostArrayOptions o;
    o.batch_size = options->batch_size;
    o.val_size = options->val_size;
    o.shuffle = options->shuffle != 0;
    o.seed = options->seed;
    trainer->data = std::make_unique<data::HostArrayDataModule>(
        data::HostArrays{inputs, {num_examples, num_features}, DType::Float32, targets}, o);
    trainer->trainer->fit(*model->module, *trainer->data);
  });
}

int tandem_metric(const tandem_trainer* trainer, const char* name, double* value) {
  return guarded([&] {
    require(trainer, "tandem_metric", "trainer");
    require(name, "tandem_metric", "name");
    require(value, "tandem_metric", "value");
    const auto& metrics = trainer->trainer->callback_metrics();
    const auto it = metrics.find(name);
    if (it == metrics.end()) {
      std::string known;
      for (const auto& [key, v] : metrics) known += (known.empty() ? "" : ", ") + key;
      throw ConfigError(std::string("tandem_metric: no metric '") + name + "' was logged; logged: " +
                        (known.empty() ? "none (call tandem_fit first)" : known));
    }
    *value = it->second;
  });
}

int tandem_save_checkpoint(tandem_trainer* trainer, const char* path) {
  return guarded([&] {
    require(trainer, "tandem_save_checkpoint", "trainer");
    require(path, "tandem_save_checkpoint", "path");
    trainer->trainer->save_checkpoint(path);
  });
}

int tandem_load_checkpoint(tandem_model* model, const char* path) {
  return guarded([&] {
    require(model, "tandem_load_checkpoint", "model");
    require(path, "tandem_load_checkpoint", "path");
    model->module->load_state_dict(trainer::load_checkpoint(path).model);
  });
}

}  // extern "C"
