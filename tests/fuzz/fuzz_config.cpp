// Fuzz target: the `tandem fit|validate|test|predict` configuration: dotted flags and a YAML
// --config file (engine/config/, apps/tandem/run_config.cpp), parsed and resolved as the CLI does
// before it reads any data: parse_args against the run schema, the class sections resolved, the
// seed, the trainer, data and model options taken out of the tree, --print_config's YAML.
// Input: flags one per line, then an empty line, then the config file's text (when there is
// text after the empty line, `--config FILE` comes first on the command line). Flags naming
// their own --config or --plugin are dropped: they would read or load arbitrary files.
// Allowed outcome besides success: ConfigError.
#include <cstdint>
#include <string>
#include <vector>

#include "apps/tandem/run_config.h"
#include "base/error.h"
#include "engine/config/data_section.h"
#include "engine/trainer/trainer_options.h"
#include "models/registry.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

bool names_a_file(const std::string& arg) {
  for (const char* flag : {"--config", "--plugin"}) {
    const std::string f = flag;
    if (arg == f || arg.rfind(f + "=", 0) == 0) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem;
  static const fuzz::ScratchFile file("config.yaml");
  static const ConfigSchema schema = cli::make_run_schema();
  const std::string text(reinterpret_cast<const char*>(data), size);
  const size_t blank = text.find("\n\n");
  std::vector<std::string> args;
  if (blank != std::string::npos && blank + 2 < text.size()) {
    file.write(data + blank + 2, size - blank - 2);
    args = {"--config", file.path()};
  }
  const std::string flags = text.substr(0, blank);
  if (!flags.empty()) {
    for (auto& arg : fuzz::split_bytes(flags, '\n'))
      if (!names_a_file(arg)) args.push_back(std::move(arg));
  }
  try {
    const ParsedArgs parsed = parse_args(schema, args, {{"predictions", "", true}, {"plugin", "", true}});
    YAML::Node config = YAML::Clone(parsed.config);
    cli::resolve_run_config(config);
    (void)config_to_yaml(config);
    const YAML::Node seed = get_config_value(config, "seed_everything");
    if (!seed.IsNull()) (void)seed.as<uint64_t>();
    const trainer::TrainerOptions options = trainer::trainer_options_from_config(config);
    (void)data_options_from_config(config);
    trainer::validate_trainer_options(options);
    (void)trainer::hardware_options(options);
    (void)get_config_value(config, "ckpt_path");
  } catch (const ConfigError&) {
  }
  return 0;
}
