#include "engine/data/host_array_data_module.h"

#include <string>

#include "base/error.h"

namespace tandem::data {

namespace {

// "host array data option batch_size must be ..." / "... option val_size=6 leaves ..."
std::string option_error(const char* key, const std::string& what) {
  return std::string("host array data option ") + key + (what.front() == '=' ? "" : " ") + what;
}

}  // namespace

void HostArrayOptions::validate() const {
  if (batch_size < 1) throw ConfigError(option_error("batch_size", "must be >= 1, got " + std::to_string(batch_size)));
  if (val_size < 0)
    throw ConfigError(option_error("val_size", "must be >= 0 (0 = no validation data), got " + std::to_string(val_size)));
  if (prefetch < 0)
    throw ConfigError(option_error("prefetch", "must be >= 0 (0 = load batches synchronously), got " +
                                   std::to_string(prefetch)));
}

nlohmann::json HostArrayOptions::to_json() const {
  return {{"batch_size", batch_size}, {"val_size", val_size}, {"shuffle", shuffle},
          {"seed", seed},             {"prefetch", prefetch}, {"pin_memory", pin_memory}};
}

HostArrayDataModule::HostArrayDataModule(HostArrays arrays, HostArrayOptions options) : options_(options) {
  options_.validate();
  if (arrays.inputs == nullptr) throw ConfigError("host arrays: inputs is a null pointer; pass the address of the input array");
  if (arrays.input_shape.empty() || arrays.input_shape[0] < 1) {
    throw ConfigError("host arrays: input_shape must be [N, ...] with N >= 1 examples, got " +
                      shape_to_string(arrays.input_shape));
  }
  const int64_t n = arrays.input_shape[0];
  if (options_.val_size >= n) {
    throw ConfigError(option_error("val_size", "=" + std::to_string(options_.val_size) + " leaves no training example of the " +
                                   std::to_string(n) + " in this rank's arrays; allowed: 0.." + std::to_string(n - 1)));
  }
  // Read only: the views are const in spirit (datasets never write their tensors).
  Tensor inputs = Tensor::from_external(const_cast<void*>(arrays.inputs), arrays.input_shape, arrays.input_dtype);
  Tensor targets = arrays.targets
      ? Tensor::from_external(const_cast<int64_t*>(arrays.targets), {n}, DType::Int64)
      : Tensor();
  all_ = std::make_shared<TensorDataset>(inputs, targets);
}

void HostArrayDataModule::setup(const std::string& /*stage*/) {
  if (train_) return;
  if (options_.val_size == 0) {
    train_ = all_;
    return;
  }
  auto parts = random_split(all_, {all_->size() - options_.val_size, options_.val_size}, options_.seed);
  train_ = parts[0];
  val_ = parts[1];
}

std::shared_ptr<DataLoader> HostArrayDataModule::make_loader(std::shared_ptr<Dataset> dataset, bool shuffle) const {
  DataLoaderOptions loader;
  loader.batch_size = options_.batch_size;
  loader.shuffle = shuffle;
  loader.seed = options_.seed;
  loader.prefetch = options_.prefetch;
  loader.pin_memory = options_.pin_memory;
  return std::make_shared<DataLoader>(std::move(dataset), loader);
}

std::shared_ptr<DataLoader> HostArrayDataModule::train_dataloader() {
  setup("fit");
  return make_loader(train_, options_.shuffle);
}

std::shared_ptr<DataLoader> HostArrayDataModule::val_dataloader() {
  setup("fit");
  return val_ ? make_loader(val_, false) : nullptr;
}

}  // namespace tandem::data
