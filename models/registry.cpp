#include "models/registry.h"

#include "base/error.h"
#include "base/named_registry.h"
#include "engine/optim/optimizer.h"
#include "models/cnn.h"
#include "models/gpt.h"
#include "models/mlp.h"

namespace tandem::models {

namespace {

OptionSpec hidden_option() {
  YAML::Node sizes(YAML::NodeType::Sequence);
  sizes.push_back(1024);
  sizes.push_back(1024);
  sizes.SetStyle(YAML::EmitterStyle::Flow);
  OptionSpec o = make_option("hidden", ValueKind::List, sizes, "hidden layer widths");
  o.validate = [](const YAML::Node& v, const std::string& key) {
    bool ok = v.IsSequence() && v.size() > 0;
    for (const auto& item : v) {
      int64_t n = 0;
      ok = ok && item.IsScalar() && YAML::convert<int64_t>::decode(item, n) && n > 0;
    }
    if (!ok) {
      throw ConfigError("--" + key + "=" + yaml_to_text(v) +
                        " is not valid: expected a non-empty list of positive layer widths like [512, 256]");
    }
  };
  return o;
}

OptionSpec positive_int(const std::string& name, int64_t value, const std::string& help) {
  OptionSpec o = make_option(name, ValueKind::Int, YAML::Node(value), help);
  o.validate = [](const YAML::Node& v, const std::string& key) {
    int64_t n = 0;
    if (!YAML::convert<int64_t>::decode(v, n) || n <= 0) {
      throw ConfigError("--" + key + "=" + yaml_to_text(v) + " is not valid: expected a positive integer");
    }
  };
  return o;
}

// gpt and its presets: the same options, other defaults.
ModelEntry gpt_entry(const std::string& name, const std::string& help, const GPTOptions& d) {
  OptionSpec dropout = make_option("dropout", ValueKind::Float, YAML::Node(d.dropout == 0 ? std::string("0.0") : optim::format_number(d.dropout)),
                                   "dropout on embeddings, attention weights and residual branches");
  dropout.validate = [](const YAML::Node& v, const std::string& key) { require_range(v, key, 0, 1, false, true); };
  ClassSpec spec{name, help,
                 {positive_int("n_layer", d.n_layer, "transformer blocks"),
                  positive_int("n_head", d.n_head, "attention heads (n_embd must be a multiple)"),
                  positive_int("n_embd", d.n_embd, "embedding width"),
                  positive_int("block_size", d.block_size, "longest context, in tokens"),
                  positive_int("vocab_size", d.vocab_size, "token ids 0..vocab_size-1 (256: bytes)"), dropout,
                  make_option("bias", ValueKind::Bool, YAML::Node(d.bias), "biases in Linear and LayerNorm layers")}};
  return {spec, [](const YAML::Node& s, const OptimizationConfig& opt) {
            GPTOptions o;
            o.n_layer = s["n_layer"].as<int64_t>();
            o.n_head = s["n_head"].as<int64_t>();
            o.n_embd = s["n_embd"].as<int64_t>();
            o.block_size = s["block_size"].as<int64_t>();
            o.vocab_size = s["vocab_size"].as<int64_t>();
            o.dropout = s["dropout"].as<double>();
            o.bias = s["bias"].as<bool>();
            if (o.n_embd % o.n_head != 0) {
              throw ConfigError("--model.n_embd=" + std::to_string(o.n_embd) + " is not a multiple of --model.n_head=" +
                                std::to_string(o.n_head) + "; every head needs n_embd / n_head channels");
            }
            return std::make_shared<GPT>(o, opt);
          }};
}

std::vector<ModelEntry> builtin_models() {
  OptionSpec dropout = make_option("dropout", ValueKind::Float, YAML::Node("0.0"), "dropout probability after each hidden ReLU");
  dropout.validate = [](const YAML::Node& v, const std::string& key) { require_range(v, key, 0, 1, false, true); };
  ModelEntry mlp{{"mlp", "784 -> hidden... -> 10 perceptron with ReLU", {hidden_option(), dropout}},
                 [](const YAML::Node& s, const OptimizationConfig& opt) {
                   MLPOptions o;
                   o.hidden = s["hidden"].as<std::vector<int64_t>>();
                   o.dropout = s["dropout"].as<double>();
                   return std::make_shared<MLP>(o, opt);
                 }};
  ModelEntry cnn{{"cnn", "two conv+pool blocks (32, 64 channels), fc 3136 -> 128 -> 10",
                  {make_option("batch_norm", ValueKind::Bool, YAML::Node(false), "BatchNorm2d after each conv")}},
                 [](const YAML::Node& s, const OptimizationConfig& opt) {
                   CNNOptions o;
                   o.batch_norm = s["batch_norm"].as<bool>();
                   return std::make_shared<CNN>(o, opt);
                 }};
  const GPTOptions nano{};  // nanoGPT's CPU recipe: 4 layers, 4 heads, 128 wide, 64 tokens
  const GPTOptions chars{.n_layer = 6, .n_head = 6, .n_embd = 384, .block_size = 256, .vocab_size = 256, .dropout = 0.2};
  const GPTOptions gpt2{.n_layer = 12, .n_head = 12, .n_embd = 768, .block_size = 1024, .vocab_size = 50304};
  return {mlp, cnn,
          gpt_entry("gpt", "GPT-2 layout decoder (models/gpt.h); defaults as gpt-nano", nano),
          gpt_entry("gpt-nano", "GPT 4 layers x 4 heads x 128, block 64, bytes (nanoGPT's CPU recipe)", nano),
          gpt_entry("gpt-char", "GPT 6 x 6 x 384, block 256, bytes, dropout 0.2 (nanoGPT's shakespeare_char)", chars),
          gpt_entry("gpt2", "GPT-2 124M: 12 x 12 x 768, block 1024, vocab 50304", gpt2)};
}

std::vector<ModelEntry>& mutable_registry() {
  static std::vector<ModelEntry> entries = builtin_models();
  return entries;
}

}  // namespace

const std::vector<ModelEntry>& model_registry() { return mutable_registry(); }

void register_model(ModelEntry entry) {
  for (auto& existing : mutable_registry()) {
    if (lower_case(existing.spec.name) == lower_case(entry.spec.name)) {
      existing = std::move(entry);
      return;
    }
  }
  mutable_registry().push_back(std::move(entry));
}

std::vector<ClassSpec> model_classes() { return specs_of(model_registry()); }

SectionSpec model_section() {
  return class_section("model", "the LightningModule to train", model_classes(), "mlp");
}

void resolve_model_section(YAML::Node& config) { resolve_class_section("model", model_classes(), config); }

std::shared_ptr<trainer::LightningModule> make_model(const YAML::Node& config) {
  const YAML::Node section = config["model"];
  TANDEM_CHECK(section && section.IsMap() && section["name"] && section["name"].IsScalar(), ConfigError,
               "no model chosen; pass --model=NAME (e.g. mlp or cnn)");
  const std::string name = section["name"].Scalar();
  const bool configured = config["optimizer"] && config["optimizer"].IsMap();
  const OptimizationConfig optimization =
      configured ? OptimizationConfig{YAML::Clone(config["optimizer"]),
                                      config["lr_scheduler"] ? YAML::Clone(config["lr_scheduler"]) : YAML::Node()}
                 : OptimizationConfig::defaults();
  for (const auto& e : model_registry()) {
    if (lower_case(e.spec.name) != lower_case(name)) continue;
    std::shared_ptr<trainer::LightningModule> model = e.build(section, optimization);
    // The presets are gpt with other defaults: hparams say which.
    if (auto* gpt = dynamic_cast<GPT*>(model.get())) gpt->hparams["model"] = lower_case(e.spec.name);
    if (auto* classifier = dynamic_cast<ImageClassifier*>(model.get())) {
      classifier->replica_factory = [build = e.build, section = YAML::Clone(section), optimization] {
        return build(section, optimization);
      };
    }
    return model;
  }
  throw ConfigError("--model=" + name + " is not registered");
}

}  // namespace tandem::models
