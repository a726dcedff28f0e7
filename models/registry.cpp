#include "models/registry.h"

#include "engine/accelerators/named_registry.h"
#include "engine/core/error.h"
#include "models/cnn.h"
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
  return {mlp, cnn};
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

std::vector<ClassSpec> model_classes() {
  std::vector<ClassSpec> out;
  for (const auto& e : model_registry()) out.push_back(e.spec);
  return out;
}

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
