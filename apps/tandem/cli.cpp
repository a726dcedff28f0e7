// tandem's command line: `tandem <subcommand> [flags]` (subcommands.h). run_cli is the whole
// program, so a user program can register its own accelerators and then hand its arguments to
// it (apps/examples/xpu/xpu_cli.cpp); main.cpp only calls it.
// Exit codes: 0 success, 2 usage or configuration errors (ConfigError), 1 anything else.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <new>

#include <yaml-cpp/yaml.h>

#include "apps/tandem/subcommands.h"
#include "base/edit_distance.h"
#include "base/error.h"

#ifndef TANDEM_VERSION_STRING
#error "TANDEM_VERSION_STRING must be the CMake project version (apps/CMakeLists.txt)"
#endif

namespace tandem::cli {

const std::vector<Subcommand>& subcommands() {
  static const std::vector<Subcommand> all{
      {"fit", "train a model on a data module (validating as it goes), with checkpoints and logs", run_fit},
      {"validate", "run the validation set through a model (--ckpt_path loads weights)", run_validate},
      {"test", "evaluate a model on the test set (--ckpt_path=PATH|last|best)", run_test},
      {"predict", "write the model's predicted class for each test example", run_predict},
      {"generate", "sample text from a GPT checkpoint (--ckpt_path, --prompt, --max_new_tokens, ...)", run_generate},
      {"plan", "resolve accelerator/devices/strategy/precision flags and print the plan as JSON", run_plan},
  };
  return all;
}

std::string shell_quote(const std::string& arg) {
  if (!arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789-_.=/:,+@%") == std::string::npos) {
    return arg;
  }
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

namespace {

std::string g_program = "tandem";  // argv[0], set by run_cli

void print_usage(std::ostream& out) {
  out << "usage: tandem <subcommand> [--config run.yaml] [--print_config] [--plugin=lib.so] "
         "[--SECTION.KEY=VALUE ...]\n       tandem --version\n\nsubcommands:\n";
  size_t width = 0;
  for (const auto& s : subcommands()) width = std::max(width, s.name.size());
  for (const auto& s : subcommands()) out << "  " << s.name << std::string(width - s.name.size() + 2, ' ') << s.summary << "\n";
  out << "\n`tandem <subcommand> --help` lists its options. --plugin=lib.so loads accelerators from a\n"
         "shared library exporting tandem_register_accelerators (docs/ACCELERATORS.md).\n";
}

}  // namespace

const std::string& invoked_program() { return g_program; }

int run_cli(const std::string& program, const std::vector<std::string>& args) {
  if (!program.empty()) g_program = program;
  if (!args.empty() && args[0] == "--version") {
    std::cout << "tandem " << TANDEM_VERSION_STRING << "\n";
    return 0;
  }
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    print_usage(args.empty() ? std::cerr : std::cout);
    return args.empty() ? 2 : 0;
  }
  const std::string name = args[0];
  const Subcommand* command = nullptr;
  std::vector<std::string> names;
  for (const auto& s : subcommands()) {
    names.push_back(s.name);
    if (s.name == name) command = &s;
  }
  if (!command) {
    const std::string guess = closest_match(name, names);
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    std::cerr << "tandem: error: unknown subcommand '" << name << "'"
              << (guess.empty() ? "" : "; did you mean '" + guess + "'?") << " (available: " << known << ")\n";
    return 2;
  }
  try {
    return command->run(std::vector<std::string>(args.begin() + 1, args.end()));
  } catch (const ConfigError& e) {
    std::cerr << "tandem " << name << ": error: " << e.what() << "\n";
    return 2;
  } catch (const Error& e) {
    std::cerr << "tandem " << name << ": error: " << e.what() << "\n";
    return 1;
  }
  // Tandem's own errors say what was wrong and what to do; a library's exception that got this
  // far gets that context here instead of reaching the user as the whole message.
  catch (const YAML::Exception& e) {
    std::cerr << "tandem " << name << ": error: a configuration value could not be read as the type its option "
              << "needs (yaml-cpp: " << e.what() << "); `tandem " << name << " --help` lists each option's type\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "tandem " << name << ": error: out of memory: the model, a batch or the data does not fit in this "
              << "machine's memory; make them smaller (e.g. --model.hidden, --data.batch_size)\n";
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    std::cerr << "tandem " << name << ": error: a file operation failed: " << e.code().message() << " ("
              << e.path1().string() << "); check that the path exists and is writable\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "tandem " << name << ": error: unexpected failure (" << e.what()
              << "); this is a bug in Tandem, please report it with the command line\n";
    return 1;
  }
}

}  // namespace tandem::cli
