#include "engine/config/optimizer_section.h"

#include <algorithm>
#include <limits>

#include "base/error.h"
#include "engine/config/config_args.h"
#include "engine/config/hardware_values.h"
#include "engine/optim/adam.h"
#include "engine/optim/qadam.h"
#include "engine/optim/sgd.h"
#include "engine/strategies/strategy.h"

namespace tandem {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

OptionSpec positive_float(const std::string& name, const std::string& default_value, const std::string& help) {
  OptionSpec o = make_option(name, ValueKind::Float, YAML::Node(default_value), help);
  o.validate = [](const YAML::Node& v, const std::string& key) { require_range(v, key, 0, kInf, true); };
  return o;
}

OptionSpec non_negative_float(const std::string& name, const std::string& default_value, const std::string& help) {
  OptionSpec o = make_option(name, ValueKind::Float, YAML::Node(default_value), help);
  o.validate = [](const YAML::Node& v, const std::string& key) { require_range(v, key, 0, kInf); };
  return o;
}

OptionSpec positive_int(const std::string& name, YAML::Node default_value, const std::string& help) {
  OptionSpec o = make_option(name, ValueKind::Int, std::move(default_value), help);
  o.validate = [](const YAML::Node& v, const std::string& key) { require_range(v, key, 1, kInf); };
  return o;
}

OptionSpec betas_option() {
  YAML::Node betas(YAML::NodeType::Sequence);
  betas.push_back("0.9");
  betas.push_back("0.999");
  betas.SetStyle(YAML::EmitterStyle::Flow);
  OptionSpec o = make_option("betas", ValueKind::List, betas, "coefficients of the running averages [beta1, beta2]");
  o.validate = [](const YAML::Node& v, const std::string& key) {
    if (!v.IsSequence() || v.size() != 2) {
      throw ConfigError("--" + key + "=" + yaml_to_text(v) + " is not valid: expected two numbers like [0.9, 0.999]");
    }
    for (const auto& b : v) require_range(b, key, 0, 1, false, true);
  };
  return o;
}

YAML::Node required() { return YAML::Node(YAML::NodeType::Null); }

// An option whose null default has a meaning of its own (not "required").
OptionSpec nullable(OptionSpec o) {
  o.nullable = true;
  return o;
}

double num(const YAML::Node& section, const char* key) { return section[key].as<double>(); }
int64_t integer(const YAML::Node& section, const char* key) { return section[key].as<int64_t>(); }

using OptimizerBuild = std::shared_ptr<optim::Optimizer>(const YAML::Node& section, std::vector<optim::ParamGroup> groups);
// An optimizer class; one that a strategy's communication is written for (QAdam) runs only under
// a strategy that requires it, named in messages by `runs_only_under`.
struct OptimizerClass : ConfigClass<OptimizerBuild> {
  std::string runs_only_under;
};

std::pair<double, double> betas_of(const YAML::Node& section) {
  return {section["betas"][0].as<double>(), section["betas"][1].as<double>()};
}

// Adam and AdamW: the same options, another update.
template <typename AdamClass, typename Options>
std::shared_ptr<optim::Optimizer> adam_like(const YAML::Node& section, std::vector<optim::ParamGroup> groups) {
  Options o{num(section, "lr"), betas_of(section), num(section, "eps"), num(section, "weight_decay")};
  return std::make_shared<AdamClass>(std::move(groups), o);
}

OptimizerClass qadam_class(const OptionSpec& lr) {
  OptimizerClass qadam;
  qadam.spec = {"QAdam", "Adam, then 8-bit compressed momentum with error feedback, the variance frozen and each step "
                         "bounded as Adam's (Bagua's QAdam; only with "
                         "--trainer.strategy=bagua --trainer.strategy.algorithm=qadam)",
                {lr, betas_option(), non_negative_float("eps", "1e-08", "added to the denominator"),
                 non_negative_float("weight_decay", "0.0", "L2 penalty"),
                 positive_int("warmup_steps", YAML::Node(100), "Adam steps on averaged gradients before the "
                                                              "momentum is compressed and the variance frozen")}};
  qadam.build = [](const YAML::Node& section, std::vector<optim::ParamGroup> groups) -> std::shared_ptr<optim::Optimizer> {
    std::vector<Tensor> params;
    for (auto& g : groups) {
      if (!g.options.empty() && groups.size() > 1) {
        throw ConfigError("--optimizer=QAdam takes one parameter group, but the model asked for groups with their own "
                          "settings (" + g.options.dump() + "); use --optimizer=AdamW or Adam with this model");
      }
      params.insert(params.end(), g.params.begin(), g.params.end());
    }
    optim::AdamOptions o{num(section, "lr"), betas_of(section), num(section, "eps"), num(section, "weight_decay")};
    return std::make_shared<optim::QAdam>(std::move(params), o, section["warmup_steps"].as<int64_t>());
  };
  qadam.runs_only_under = "--trainer.strategy=bagua --trainer.strategy.algorithm=qadam (which sends its compressed "
                          "momentum between the ranks)";
  return qadam;
}

const std::vector<OptimizerClass>& optimizer_table() {
  static const std::vector<OptimizerClass> table = [] {
    const OptionSpec lr = positive_float("lr", "0.001", "learning rate");
    OptimizerClass sgd;
    sgd.spec = {"SGD", "stochastic gradient descent with momentum (torch.optim.SGD)",
                {lr, non_negative_float("momentum", "0.0", "momentum factor"),
                 non_negative_float("dampening", "0.0", "dampening for momentum"),
                 non_negative_float("weight_decay", "0.0", "L2 penalty"),
                 make_option("nesterov", ValueKind::Bool, YAML::Node(false), "Nesterov momentum")}};
    sgd.build = [](const YAML::Node& section, std::vector<optim::ParamGroup> groups) -> std::shared_ptr<optim::Optimizer> {
      optim::SGDOptions o;
      o.lr = num(section, "lr");
      o.momentum = num(section, "momentum");
      o.dampening = num(section, "dampening");
      o.weight_decay = num(section, "weight_decay");
      o.nesterov = section["nesterov"].as<bool>();
      return std::make_shared<optim::SGD>(std::move(groups), o);
    };
    OptimizerClass adam;
    adam.spec = {"Adam", "Adam (torch.optim.Adam)",
                 {lr, betas_option(), non_negative_float("eps", "1e-08", "added to the denominator"),
                  non_negative_float("weight_decay", "0.0", "L2 penalty")}};
    adam.build = adam_like<optim::Adam, optim::AdamOptions>;
    OptimizerClass adamw;
    adamw.spec = {"AdamW", "Adam with decoupled weight decay (torch.optim.AdamW)",
                  {lr, betas_option(), non_negative_float("eps", "1e-08", "added to the denominator"),
                   non_negative_float("weight_decay", "0.01", "decoupled weight decay")}};
    adamw.build = adam_like<optim::AdamW, optim::AdamWOptions>;
    return std::vector<OptimizerClass>{sgd, adam, adamw, qadam_class(lr)};
  }();
  return table;
}

// A scheduler: the section's interval and frequency are in `choice` when it is built.
using SchedulerClass =
    ConfigClass<std::shared_ptr<optim::LRScheduler>(const YAML::Node& section, optim::Optimizer& optimizer,
                                                    const RunLength& run, const SchedulerChoice& choice)>;

// T_max: given, or the whole run (max_epochs, or max_steps with interval step) over frequency.
int64_t cosine_length(const YAML::Node& section, const RunLength& run, const SchedulerChoice& choice) {
  if (section["T_max"] && !section["T_max"].IsNull()) return integer(section, "T_max");
  const bool by_step = choice.interval == "step";
  const int64_t length = by_step ? run.max_steps : run.max_epochs;
  if (length == 0) return 1;  // max_epochs=0 (or max_steps=0): fit stops before any step, the schedule is never used
  if (length < 1) {
    throw ConfigError(std::string("--lr_scheduler.T_max is null, which means the whole run, but the run has no ") +
                      (by_step ? "max_steps (interval step counts optimizer steps)" : "max_epochs limit") +
                      "; give --lr_scheduler.T_max=N or set --trainer." + (by_step ? "max_steps" : "max_epochs"));
  }
  return std::max<int64_t>(1, length / choice.frequency);
}

std::shared_ptr<optim::LRScheduler> warmup_cosine_from(const YAML::Node& section, optim::Optimizer& optimizer) {
  const int64_t warmup = integer(section, "warmup_iters"), total = integer(section, "total_iters");
  if (total <= warmup) {
    throw ConfigError("--lr_scheduler.total_iters=" + std::to_string(total) + " is not valid: it must exceed " +
                      "--lr_scheduler.warmup_iters=" + std::to_string(warmup));
  }
  return optim::warmup_cosine(optimizer, warmup, total, num(section, "start_factor"), num(section, "eta_min"));
}

const std::vector<SchedulerClass>& scheduler_table() {
  static const std::vector<SchedulerClass> table = [] {
    OptionSpec interval = make_option("interval", ValueKind::String, YAML::Node("epoch"),
                                      "step the scheduler every epoch or every optimizer step");
    interval.choices = {"epoch", "step"};
    const OptionSpec frequency = positive_int("frequency", YAML::Node(1), "step it every this many intervals");
    auto with_common = [&](ClassSpec c) {
      c.options.push_back(interval);
      c.options.push_back(frequency);
      return c;
    };
    return std::vector<SchedulerClass>{
        {with_common({"StepLR", "multiply the rate by gamma every step_size intervals",
                      {positive_int("step_size", required(), "intervals between decays"),
                       non_negative_float("gamma", "0.1", "decay factor")}}),
         [](const YAML::Node& s, optim::Optimizer& opt, const RunLength&, const SchedulerChoice&) -> std::shared_ptr<optim::LRScheduler> {
           return std::make_shared<optim::StepLR>(opt, integer(s, "step_size"), num(s, "gamma"));
         }},
        {with_common({"CosineAnnealingLR", "cosine from the rate down to eta_min over T_max intervals",
                      {nullable(positive_int("T_max", required(),
                                             "intervals of the half cosine (null: the whole run, max_epochs or "
                                             "with interval step max_steps, divided by frequency)")),
                       non_negative_float("eta_min", "0.0", "final rate")}}),
         [](const YAML::Node& s, optim::Optimizer& opt, const RunLength& run, const SchedulerChoice& choice) -> std::shared_ptr<optim::LRScheduler> {
           return std::make_shared<optim::CosineAnnealingLR>(opt, cosine_length(s, run, choice), num(s, "eta_min"));
         }},
        {with_common({"LinearLR", "scale the rate linearly from start_factor to end_factor over total_iters",
                      {positive_float("start_factor", "0.3333333333333333", "first factor"),
                       non_negative_float("end_factor", "1.0", "last factor"),
                       positive_int("total_iters", YAML::Node(5), "intervals of the ramp")}}),
         [](const YAML::Node& s, optim::Optimizer& opt, const RunLength&, const SchedulerChoice&) -> std::shared_ptr<optim::LRScheduler> {
           return std::make_shared<optim::LinearLR>(opt, num(s, "start_factor"), num(s, "end_factor"), integer(s, "total_iters"));
         }},
        {with_common({"WarmupCosine", "linear warmup over warmup_iters, then cosine to eta_min at total_iters",
                      {positive_int("warmup_iters", required(), "intervals of warmup"),
                       positive_int("total_iters", required(), "intervals in all"),
                       positive_float("start_factor", "0.001", "first warmup factor"),
                       non_negative_float("eta_min", "0.0", "final rate")}}),
         [](const YAML::Node& s, optim::Optimizer& opt, const RunLength&, const SchedulerChoice&) {
           return warmup_cosine_from(s, opt);
         }},
    };
  }();
  return table;
}

}  // namespace

const std::vector<ClassSpec>& optimizer_classes() {
  static const std::vector<ClassSpec> specs = specs_of(optimizer_table());
  return specs;
}

const std::vector<ClassSpec>& lr_scheduler_classes() {
  static const std::vector<ClassSpec> specs = specs_of(scheduler_table());
  return specs;
}

SectionSpec optimizer_section() {
  return class_section("optimizer", "the optimizer configure_optimizers builds", optimizer_classes(), "Adam");
}

SectionSpec lr_scheduler_section() {
  return class_section("lr_scheduler", "an optional learning-rate scheduler (null: constant rate)",
                       lr_scheduler_classes(), "");
}

std::shared_ptr<optim::Optimizer> make_optimizer(const YAML::Node& section, std::vector<Tensor> params) {
  return make_optimizer(section, std::vector<optim::ParamGroup>{optim::ParamGroup{std::move(params), nlohmann::json::object()}});
}

std::shared_ptr<optim::Optimizer> make_optimizer(const YAML::Node& section, std::vector<optim::ParamGroup> groups) {
  if (!section || !section.IsMap() || !section["name"]) {
    throw ConfigError("optimizer section is not resolved; call resolve_optimizer_sections first");
  }
  return config_class(optimizer_table(), "optimizer", section["name"].Scalar()).build(section, std::move(groups));
}

SchedulerChoice make_lr_scheduler(const YAML::Node& section, optim::Optimizer& optimizer, const RunLength& run) {
  SchedulerChoice choice;
  if (!section || section.IsNull()) return choice;
  choice.interval = section["interval"].Scalar();
  choice.frequency = integer(section, "frequency");
  choice.scheduler = config_class(scheduler_table(), "lr_scheduler", section["name"].Scalar()).build(section, optimizer, run, choice);
  return choice;
}

void resolve_optimizer_sections(YAML::Node& config) {
  resolve_class_section("optimizer", optimizer_classes(), config);
  resolve_class_section("lr_scheduler", lr_scheduler_classes(), config);
  // A dry run on one parameter: the classes' own checks, reported as configuration errors.
  try {
    auto optimizer = make_optimizer(config["optimizer"], {Tensor::zeros({1})});
    make_lr_scheduler(config["lr_scheduler"], *optimizer, {.max_epochs = 1, .max_steps = 1});
  } catch (const ValueError& e) {
    throw ConfigError(std::string("invalid optimizer or lr_scheduler setting: ") + e.what());
  }
  check_optimizer_fits_strategy(config);
}

void check_optimizer_fits_strategy(const YAML::Node& config) {
  const OptimizerClass& optimizer = config_class(optimizer_table(), "optimizer", config["optimizer"]["name"].Scalar());
  // A config holding only the optimizer sections (a model's own tests) has the default strategy.
  const YAML::Node given = get_config_value(config, "trainer.strategy");
  const auto [strategy, options] =
      given && !given.IsNull() ? strategy_from_yaml(given, "trainer.strategy") : std::pair<std::string, InitParams>{"auto", {}};
  std::unique_ptr<Strategy> built;
  try {
    built = check_strategy_request(strategy, strategy_registry(), options);
  } catch (const ConfigError&) {
    return;  // the strategy request's own check reports it
  }
  const std::optional<OptimizerRequirement> need = built ? built->required_optimizer() : std::nullopt;
  const std::string& name = optimizer.spec.name;
  if (need && need->optimizer != name) {
    throw ConfigError(need->why + ", but the optimizer is " + name + "; use --optimizer=" + need->optimizer + ", or " +
                      need->otherwise + " for " + name);
  }
  if (!optimizer.runs_only_under.empty() && !need) {
    const auto algorithm = options.find("algorithm");
    const std::string chosen = "--trainer.strategy=" + strategy +
                               (algorithm != options.end() ? " --trainer.strategy.algorithm=" + algorithm->second : "");
    throw ConfigError("--optimizer=" + name + " runs only under " + optimizer.runs_only_under + ", not " + chosen +
                      "; add those flags, or use --optimizer=Adam with this strategy");
  }
}

}  // namespace tandem
