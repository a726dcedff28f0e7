#include "engine/data/fashion_mnist.h"

#include <array>
#include <filesystem>
#include <string>
#include <utility>

#include "base/error.h"
#include "engine/data/idx_reader.h"

namespace tandem::data {
namespace {

namespace fs = std::filesystem;

const char* kInstallHint =
    "Install the Debian package with `apt-get install dataset-fashion-mnist` (it puts the files in "
    "/usr/share/datasets/fashion-mnist), or download train-images-idx3-ubyte.gz, "
    "train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz from "
    "https://github.com/zalandoresearch/fashion-mnist into a directory and pass --data.root=DIR";

// root/name when it exists, else root/name.gz; a DataError saying how to get the file otherwise.
std::string find_idx_file(const std::string& root, const std::string& name) {
  const fs::path raw = fs::path(root) / name;
  const fs::path gz = fs::path(root) / (name + ".gz");
  if (fs::exists(raw)) return raw.string();
  if (fs::exists(gz)) return gz.string();
  const std::string where = fs::is_directory(root) ? "" : " (the directory " + root + " does not exist)";
  throw DataError("Fashion-MNIST file missing: " + name + " (looked for " + raw.string() + " and " +
                  gz.string() + ")" + where + ". " + kInstallHint);
}

std::string key_error(const std::string& key, const std::string& what) {
  return "--data." + key + " " + what;
}

}  // namespace

void FashionMNISTOptions::validate() const {
  if (root.empty()) throw ConfigError(key_error("root", "is empty; give the directory holding the IDX files"));
  if (batch_size < 1)
    throw ConfigError(key_error("batch_size", "must be >= 1, got " + std::to_string(batch_size)));
  if (val_size < 0)
    throw ConfigError(key_error("val_size", "must be >= 0 (0 = no validation data), got " +
                                                std::to_string(val_size)));
  if (prefetch < 0)
    throw ConfigError(key_error("prefetch", "must be >= 0 (0 = load batches synchronously), got " +
                                                std::to_string(prefetch)));
}

nlohmann::json FashionMNISTOptions::to_json() const {
  return {{"root", root},           {"batch_size", batch_size}, {"val_size", val_size},
          {"seed", seed},           {"normalize", normalize},   {"flatten", flatten},
          {"prefetch", prefetch},   {"shuffle", shuffle},       {"pin_memory", pin_memory}};
}

FashionMNISTOptions FashionMNISTOptions::from_json(const nlohmann::json& json) {
  if (!json.is_object()) throw ConfigError("data options must be a mapping, got " + json.dump());
  FashionMNISTOptions options;
  const std::string known = "root, batch_size, val_size, seed, normalize, flatten, prefetch, shuffle, pin_memory";
  for (const auto& item : json.items()) {
    // Named, not a structured binding: clang before 16 cannot capture bindings in a lambda.
    const std::string& key = item.key();
    const nlohmann::json& value = item.value();
    auto need = [&](bool ok, const char* kind) {
      if (!ok) throw ConfigError(key_error(key, std::string("must be ") + kind + ", got " + value.dump()));
    };
    if (key == "root") {
      need(value.is_string(), "a string (a directory)");
      options.root = value.get<std::string>();
    } else if (key == "batch_size" || key == "val_size" || key == "prefetch" || key == "seed") {
      need(value.is_number_integer(), "an integer");
      if (key == "batch_size") options.batch_size = value.get<int64_t>();
      if (key == "val_size") options.val_size = value.get<int64_t>();
      if (key == "prefetch") options.prefetch = value.get<int>();
      if (key == "seed") {
        need(value.get<int64_t>() >= 0 || value.is_number_unsigned(), "a non-negative integer");
        options.seed = value.get<uint64_t>();
      }
    } else if (key == "normalize" || key == "flatten" || key == "shuffle" || key == "pin_memory") {
      need(value.is_boolean(), "true or false");
      (key == "normalize"  ? options.normalize
       : key == "flatten"  ? options.flatten
       : key == "shuffle"  ? options.shuffle
                           : options.pin_memory) = value.get<bool>();
    } else {
      throw ConfigError("unknown Fashion-MNIST data option '" + key + "'; the options are: " + known);
    }
  }
  options.validate();
  return options;
}

FashionMNISTDataModule::FashionMNISTDataModule(FashionMNISTOptions options) : options_(std::move(options)) {
  options_.validate();
}

std::shared_ptr<TensorDataset> FashionMNISTDataModule::load_split(const std::string& root,
                                                                  const std::string& prefix,
                                                                  bool normalize, bool flatten) {
  const std::string images_path = find_idx_file(root, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_idx_file(root, prefix + "-labels-idx1-ubyte");
  IdxArray labels = read_idx(labels_path, 1);
  const int64_t n = labels.dims[0];
  Tensor targets = Tensor::empty({n}, DType::Int64);
  int64_t* target = targets.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t label = labels.data[size_t(i)];
    if (label >= kNumClasses)
      throw DataError("Fashion-MNIST labels file " + labels_path + " has label " + std::to_string(label) +
                      " at index " + std::to_string(i) + "; labels must be 0..9 (is it the right file?)");
    target[i] = label;
  }

  Tensor inputs;
  {
    // Scoped: the uint8 payload is freed as soon as the float copy exists.
    IdxArray images = read_idx(images_path, 3);
    if (images.dims[1] != kImageSide || images.dims[2] != kImageSide)
      throw DataError("Fashion-MNIST images file " + images_path + " holds " + std::to_string(images.dims[1]) +
                      "x" + std::to_string(images.dims[2]) + " images, expected 28x28");
    if (images.dims[0] != n)
      throw DataError("Fashion-MNIST " + prefix + " split: " + images_path + " has " +
                      std::to_string(images.dims[0]) + " images but " + labels_path + " has " +
                      std::to_string(n) + " labels; the counts must match (mixed-up or partial files?)");
    // 256 possible pixel values: decode through a table, one load per pixel.
    std::array<float, 256> value_of;
    for (int v = 0; v < 256; ++v)
      value_of[size_t(v)] = normalize ? (float(v) / 255.0f - kFashionMnistMean) / kFashionMnistStd
                                      : float(v) / 255.0f;
    const int64_t pixels = kImageSide * kImageSide;
    inputs = flatten ? Tensor::empty({n, pixels}) : Tensor::empty({n, 1, kImageSide, kImageSide});
    float* out = inputs.data_ptr<float>();
    const uint8_t* in = images.data.data();
    for (size_t i = 0, total = size_t(n * pixels); i < total; ++i) out[i] = value_of[in[i]];
  }
  return std::make_shared<TensorDataset>(std::move(inputs), std::move(targets));
}

void FashionMNISTDataModule::load_train() {
  if (train_) return;
  auto full = load_split(options_.root, "train", options_.normalize, options_.flatten);
  if (options_.val_size >= full->size())
    throw ConfigError(key_error("val_size", "is " + std::to_string(options_.val_size) + " but the training file has " +
                                                std::to_string(full->size()) +
                                                " images; it must leave some for training"));
  auto parts = random_split(full, {full->size() - options_.val_size, options_.val_size}, options_.seed);
  train_ = parts[0];
  val_ = parts[1];
}

void FashionMNISTDataModule::load_test() {
  if (!test_) test_ = load_split(options_.root, "t10k", options_.normalize, options_.flatten);
}

void FashionMNISTDataModule::setup(const std::string& stage) {
  if (stage == "fit" || stage == "validate")
    load_train();
  else if (stage == "test" || stage == "predict")
    load_test();
  else
    throw ConfigError("FashionMNISTDataModule::setup: unknown stage '" + stage +
                      "'; the stages are fit, validate, test and predict");
}

std::shared_ptr<Dataset> FashionMNISTDataModule::train_dataset() {
  load_train();
  return train_;
}
std::shared_ptr<Dataset> FashionMNISTDataModule::val_dataset() {
  load_train();
  return val_;
}
std::shared_ptr<Dataset> FashionMNISTDataModule::test_dataset() {
  load_test();
  return test_;
}

std::shared_ptr<DataLoader> FashionMNISTDataModule::make_loader(std::shared_ptr<Dataset> dataset,
                                                                bool shuffle) const {
  DataLoaderOptions loader;
  loader.batch_size = options_.batch_size;
  loader.shuffle = shuffle;
  loader.seed = options_.seed;
  loader.prefetch = options_.prefetch;
  loader.pin_memory = options_.pin_memory;
  return std::make_shared<DataLoader>(std::move(dataset), loader);
}

std::shared_ptr<DataLoader> FashionMNISTDataModule::train_dataloader() {
  return make_loader(train_dataset(), options_.shuffle);
}
std::shared_ptr<DataLoader> FashionMNISTDataModule::val_dataloader() {
  return make_loader(val_dataset(), false);
}
std::shared_ptr<DataLoader> FashionMNISTDataModule::test_dataloader() {
  return make_loader(test_dataset(), false);
}

}  // namespace tandem::data
