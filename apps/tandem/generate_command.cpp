// `tandem generate`: samples text from a GPT checkpoint (models/gpt.h) and prints it.
//
//   tandem generate --ckpt_path=lightning_logs/version_0/checkpoints/last.safetensors \
//                   --prompt="In the beginning" --max_new_tokens=300 --temperature=0.8 --top_k=200 --seed=1337
//
// The model is rebuilt from the hyper-parameters the checkpoint's trainer state holds and its
// weights loaded by name. Text is bytes (a model with vocab_size 256, as --data=text trains);
// the prompt is printed with what follows it. Sampling is GPT::generate's: a KV cache, one token
// per step; temperature <= 0 is greedy; a prompt longer than block_size is seen through its last
// block_size bytes. --accelerator=cuda runs the same ops on GPU 0.
#include <iostream>

#include "apps/tandem/subcommands.h"
#include "engine/config/class_section.h"
#include "engine/config/config_args.h"
#include "engine/trainer/checkpoint.h"
#include "models/gpt.h"

namespace tandem::cli {

namespace {

ConfigSchema generate_schema() {
  ConfigSchema s;
  OptionSpec ckpt = make_option("ckpt_path", ValueKind::String, YAML::Node(YAML::NodeType::Null),
                                "checkpoint of a GPT trained by `tandem fit --model=gpt...` (required)");
  ckpt.nullable = true;
  s.add_option(ckpt);
  s.add_option(make_option("prompt", ValueKind::String, YAML::Node("\n"), "text the sample continues"));
  OptionSpec tokens = make_option("max_new_tokens", ValueKind::Int, YAML::Node(300), "tokens (bytes) to sample");
  tokens.validate = [](const YAML::Node& v, const std::string& key) { require_range(v, key, 0, 1e9); };
  s.add_option(tokens);
  s.add_option(make_option("temperature", ValueKind::Float, YAML::Node("0.8"), "softmax temperature; <= 0: greedy (argmax)"));
  s.add_option(make_option("top_k", ValueKind::Int, YAML::Node(200), "sample among the k most likely tokens; <= 0: all"));
  OptionSpec seed = make_option("seed", ValueKind::Int, YAML::Node(1337), "seed of the sampling");
  seed.validate = [](const YAML::Node& v, const std::string& key) { require_range(v, key, 0, 1.8e19); };
  s.add_option(seed);
  OptionSpec accelerator = make_option("accelerator", ValueKind::String, YAML::Node("cpu"), "cpu or cuda (GPU 0)");
  accelerator.choices = {"cpu", "cuda"};
  s.add_option(accelerator);
  return s;
}

int64_t integer(const nlohmann::json& h, const char* key, const std::string& path) {
  if (!h.contains(key) || !h[key].is_number_integer()) {
    throw ConfigError(path + " has no GPT hyper-parameter '" + key + "' in its trainer state; `tandem generate` needs a "
                      "checkpoint saved by `tandem fit --model=gpt...`");
  }
  return h[key].get<int64_t>();
}

}  // namespace

int run_generate(const std::vector<std::string>& args) {
  const ConfigSchema schema = generate_schema();
  const ParsedArgs parsed = parse_args(schema, args);
  if (parsed.help) {
    std::cout << "usage: tandem generate --ckpt_path=FILE [--prompt=TEXT] [--max_new_tokens=N] [--temperature=T] "
                 "[--top_k=K] [--seed=S] [--accelerator=cpu|cuda]\n\nSamples bytes from a GPT checkpoint and prints "
                 "the prompt and the sample.\n\n" << schema.help_text();
    return 0;
  }
  const YAML::Node& c = parsed.config;
  if (parsed.print_config) {  // the resolved options, as the trainer commands print theirs
    std::cout << config_to_yaml(c);
    return 0;
  }
  const YAML::Node ckpt = get_config_value(c, "ckpt_path");
  if (ckpt.IsNull() || ckpt.Scalar().empty()) throw ConfigError("--ckpt_path=FILE is required: the GPT checkpoint to sample from");
  const std::string path = ckpt.Scalar();
  trainer::Checkpoint checkpoint = trainer::load_checkpoint(path);
  const nlohmann::json h = checkpoint.trainer_state.is_object() && checkpoint.trainer_state.contains("hparams")
                               ? checkpoint.trainer_state["hparams"] : nlohmann::json::object();
  models::GPTOptions o;
  o.n_layer = integer(h, "n_layer", path);
  o.n_head = integer(h, "n_head", path);
  o.n_embd = integer(h, "n_embd", path);
  o.block_size = integer(h, "block_size", path);
  o.vocab_size = integer(h, "vocab_size", path);
  o.bias = h.value("bias", true);
  if (o.vocab_size != 256) {
    throw ConfigError(path + " is a GPT over " + std::to_string(o.vocab_size) + " token ids; `tandem generate` reads and "
                      "prints bytes, so it samples models with vocab_size 256 (trained on --data.path or the default corpus)");
  }
  models::GPT model(o);
  model.load_state_dict(checkpoint.model);
  if (get_config_value(c, "accelerator").Scalar() == "cuda") model.to(Device::cuda(0));

  models::GenerateOptions g;
  g.max_new_tokens = get_config_value(c, "max_new_tokens").as<int64_t>();
  g.temperature = get_config_value(c, "temperature").as<double>();
  g.top_k = get_config_value(c, "top_k").as<int64_t>();
  g.seed = get_config_value(c, "seed").as<uint64_t>();
  const std::string prompt = get_config_value(c, "prompt").Scalar();
  if (prompt.empty()) throw ConfigError("--prompt is empty; give at least one character (the default is a newline)");
  std::vector<int64_t> ids;
  for (unsigned char ch : prompt) ids.push_back(ch);
  std::string text;
  for (int64_t t : model.generate(ids, g)) text += char(t);
  std::cout << text << std::endl;
  return 0;
}

}  // namespace tandem::cli
