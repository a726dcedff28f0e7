// Docs that run: every shell command README.md and docs/*.md show (```sh blocks and `inline`
// spans) that names a ctest selection, the tandem program, its flags or a built binary is checked
// against this build:
//   ctest -R X / -L Y       selects at least one test (ctest -N in this build)
//   tandem SUB ARGS         parses: `tandem SUB ARGS --print_config` exits 0 (--config and
//                           --plugin files are dropped; --help and --version run as written);
//                           ./scripts/run.sh ARGS is `tandem fit ARGS`; a bare `--section.key=value`
//                           span (a flag named in prose, often needing others) parses alone or
//                           names a flag or option `tandem fit --help` lists
//   build*/bin/NAME         is in this build's bin/, or a target of this build
// Commands with placeholders (<target>, FILE, N, a|b choices, ...) and the bare name `tandem`
// are skipped. ctest selections of GoogleTest cases need their executables built (as CI's
// full build has them).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/run_command.h"

#ifndef DOCS_SOURCE_DIR
#error "DOCS_SOURCE_DIR, DOCS_BUILD_DIR, DOCS_CTEST, DOCS_CMAKE and TANDEM_CLI_PATH must be defined"
#endif

namespace fs = std::filesystem;

namespace {

struct Command {
  std::string where;  // file:line
  std::string text;
  bool plain_block = false;  // from a ``` block without a language: also diagrams, so ctest and binaries only
};

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<fs::path> doc_files() {
  std::vector<fs::path> files{fs::path(DOCS_SOURCE_DIR) / "README.md"};
  for (const auto& e : fs::directory_iterator(fs::path(DOCS_SOURCE_DIR) / "docs")) {
    if (e.path().extension() == ".md") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The lines of ```sh/```bash/```console blocks and of ``` blocks without a language
// (continuations joined, comments cut), and every inline code span outside blocks.
std::vector<Command> commands_in(const fs::path& file) {
  std::vector<Command> out;
  std::istringstream lines(read_text(file));
  bool in_shell = false, in_other = false, plain = false;
  std::string pending;
  int number = 0;
  const std::string name = file.filename().string();
  for (std::string line; std::getline(lines, line);) {
    ++number;
    if (line.rfind("```", 0) == 0) {
      if (in_shell || in_other) {
        in_shell = in_other = false;
      } else {
        const std::string lang = line.substr(3);
        plain = lang.empty();
        (plain || lang == "sh" || lang == "bash" || lang == "console" || lang == "shell" ? in_shell : in_other) = true;
      }
      continue;
    }
    if (in_other) continue;
    if (in_shell) {
      const size_t comment = line.find(" #");
      if (line.rfind("#", 0) == 0) continue;
      if (comment != std::string::npos) line.resize(comment);
      while (!line.empty() && line.back() == ' ') line.pop_back();
      if (!line.empty() && line.back() == '\\') {
        pending += line.substr(0, line.size() - 1) + " ";
        continue;
      }
      out.push_back({name + ":" + std::to_string(number), pending + line, plain});
      pending.clear();
      continue;
    }
    static const std::regex span("`([^`]+)`");
    for (std::sregex_iterator it(line.begin(), line.end(), span), end; it != end; ++it) {
      out.push_back({name + ":" + std::to_string(number), (*it)[1]});
    }
  }
  return out;
}

// Shell words: whitespace-separated, quotes kept together (and removed).
std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::string word;
  char quote = 0;
  bool any = false;
  for (char c : text) {
    if (quote) {
      if (c == quote) quote = 0; else word += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      any = true;
    } else if (c == ' ' || c == '\t') {
      if (any || !word.empty()) out.push_back(word);
      word.clear();
      any = false;
    } else {
      word += c;
    }
  }
  if (any || !word.empty()) out.push_back(word);
  return out;
}

// `bar_is_choice`: "a|b" lists choices (a ctest -R regex uses | as alternation instead).
bool has_placeholder(const std::vector<std::string>& args, bool bar_is_choice) {
  static const std::regex upper_value("(^|=)[A-Z][A-Z_]*$");
  for (const auto& a : args) {
    if (a.find('<') != std::string::npos || a.find("...") != std::string::npos || a.find('$') != std::string::npos ||
        (bar_is_choice && a.find('|') != std::string::npos) || std::regex_search(a, upper_value))
      return true;
  }
  return false;
}

// The commands of one line: split at &&, ;, | and redirections; leading VAR=value, env and
// mpirun/srun with their options dropped.
std::vector<std::vector<std::string>> segments(const std::string& text) {
  std::vector<std::vector<std::string>> out(1);
  const std::vector<std::string> all = words(text);
  for (size_t i = 0; i < all.size(); ++i) {
    const std::string& w = all[i];
    if (w == "&&" || w == ";" || w == "|" || w == "||") {
      out.emplace_back();
    } else if (w == ">" || w == "2>" || w == ">>" || w == "<") {
      ++i;
    } else if (!w.empty() && w[0] != '>') {
      out.back().push_back(w);
    }
  }
  for (auto& seg : out) {
    size_t start = 0;
    while (start < seg.size() && (seg[start] == "env" || (seg[start].find('=') != std::string::npos &&
                                                          seg[start][0] != '-')))
      ++start;
    if (start < seg.size() && (seg[start] == "mpirun" || seg[start] == "srun" || seg[start] == "horovodrun")) {
      ++start;
      while (start < seg.size() && seg[start][0] == '-') {
        const bool takes_value = seg[start] == "-np" || seg[start] == "-n" || seg[start] == "-H" || seg[start] == "-N";
        start += takes_value ? 2 : 1;
      }
    }
    seg.erase(seg.begin(), seg.begin() + long(std::min(start, seg.size())));
  }
  return out;
}

std::string quoted(const std::string& arg) {
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct Checker {
  std::vector<std::string> failures;
  int ctest = 0, tandem = 0, binaries = 0, bare_flags = 0;
  const std::string targets = run_command(quoted(DOCS_CMAKE) + " --build " + quoted(DOCS_BUILD_DIR) + " --target help").out;
  const std::string fit_help = run_command(std::string(TANDEM_CLI_PATH) + " fit --help").out;

  void fail(const Command& c, const std::string& why) { failures.push_back(c.where + ": `" + c.text + "`: " + why); }

  // Each distinct command runs once: the docs repeat flags and selections, and a sanitized
  // `tandem` start costs a quarter of a second.
  std::map<std::string, CommandResult> ran;
  const CommandResult& run_once(const std::string& command) {
    auto it = ran.find(command);
    if (it == ran.end()) it = ran.emplace(command, run_command(command)).first;
    return it->second;
  }

  void check_ctest(const Command& c, const std::vector<std::string>& seg) {
    std::string selection;
    for (size_t i = 1; i + 1 < seg.size(); ++i) {
      if (seg[i] == "-R" || seg[i] == "-L" || seg[i] == "-E" || seg[i] == "-LE")
        selection += " " + seg[i] + " " + quoted(seg[i + 1]);
    }
    if (selection.find(" -R ") == std::string::npos && selection.find(" -L ") == std::string::npos) return;
    ++ctest;
    const CommandResult& r = run_once(quoted(DOCS_CTEST) + " --test-dir " + quoted(DOCS_BUILD_DIR) + " -N" + selection);
    // "  Test #12: name"; gtest_discover_tests lists "<executable>_NOT_BUILT" for an executable not
    // built yet, which names no test of the docs.
    static const std::regex listed("Test +#[0-9]+: (\\S+)");
    int selected = 0;
    for (std::sregex_iterator it(r.out.begin(), r.out.end(), listed), end; it != end; ++it) {
      const std::string name = (*it)[1];
      if (name.size() < 10 || name.compare(name.size() - 10, 10, "_NOT_BUILT") != 0) ++selected;
    }
    if (selected == 0) fail(c, "selects no test in this build");
  }

  void check_tandem(const Command& c, std::vector<std::string> args) {
    std::vector<std::string> kept;
    bool runs_as_written = args.empty();
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--config" || args[i] == "--plugin" || args[i] == "--predictions") {
        ++i;
        continue;
      }
      if (args[i].rfind("--config=", 0) == 0 || args[i].rfind("--plugin=", 0) == 0) continue;
      if (args[i] == "--help" || args[i] == "-h" || args[i] == "--version") runs_as_written = true;
      kept.push_back(args[i]);
    }
    std::string command = TANDEM_CLI_PATH;
    for (const auto& a : kept) command += " " + quoted(a);
    if (!runs_as_written) command += " --print_config";
    ++tandem;
    const CommandResult& r = run_once("env CUDA_VISIBLE_DEVICES= " + command + " >/dev/null");
    if (r.exit_code != 0) fail(c, "`" + command + "` exits " + std::to_string(r.exit_code) + ": " + r.err);
  }

  void check_binaries(const Command& c, const std::vector<std::string>& seg) {
    static const std::regex built("^(\\./)?build[A-Za-z0-9_-]*/bin/([A-Za-z0-9_./-]+)$");
    for (const auto& w : seg) {
      std::smatch m;
      if (!std::regex_match(w, m, built)) continue;
      ++binaries;
      const std::string name = m[2].str();
      const bool target = targets.find("\n" + name + ":") != std::string::npos ||
                          targets.find("... " + name + "\n") != std::string::npos;
      if (!fs::exists(fs::path(DOCS_BUILD_DIR) / "bin" / name) && !target)
        fail(c, name + " is neither in this build's bin/ nor a target of it");
    }
  }

  // A flag named in prose: it parses alone, or `tandem fit --help` shows it (as written, or its
  // last dotted part as an option of a class or strategy).
  void check_bare_flag(const Command& c, const std::string& flag) {
    ++bare_flags;
    const CommandResult& r =
        run_once(std::string("env CUDA_VISIBLE_DEVICES= ") + TANDEM_CLI_PATH + " fit " + quoted(flag) + " --print_config");
    if (r.exit_code == 0) return;
    const std::string key = flag.substr(0, flag.find('='));
    const std::string last = key.substr(key.rfind('.') + 1);
    const std::regex option("\n +" + last + "  \\(default");
    if (fit_help.find(flag) != std::string::npos || fit_help.find(key + "=") != std::string::npos ||
        std::regex_search(fit_help, option))
      return;
    fail(c, "does not parse (" + r.err + ") and `tandem fit --help` does not name it");
  }

  void check(const Command& c) {
    static const std::regex bare_flag("^--(trainer|model|data|optimizer|lr_scheduler|seed_everything|ckpt_path)\\b.*");
    for (const auto& seg : segments(c.text)) {
      if (seg.empty() || has_placeholder(seg, seg[0] != "ctest")) continue;
      check_binaries(c, seg);
      const std::string& program = seg[0];
      if (c.plain_block && program != "ctest") continue;
      if (program == "ctest") {
        check_ctest(c, seg);
      } else if (program == "tandem" || fs::path(program).filename() == "tandem") {
        if (seg.size() > 1) check_tandem(c, std::vector<std::string>(seg.begin() + 1, seg.end()));
      } else if (program == "./scripts/run.sh") {
        std::vector<std::string> args{"fit"};
        args.insert(args.end(), seg.begin() + 1, seg.end());
        check_tandem(c, args);
      } else if (std::regex_match(program, bare_flag) && seg.size() == 1 && program.find('=') != std::string::npos) {
        check_bare_flag(c, program);
      }
    }
  }
};

}  // namespace

TEST(DocsCommands, EveryCommandTheDocsShowRunsOrResolvesInThisBuild) {
  Checker checker;
  for (const fs::path& file : doc_files()) {
    for (const Command& c : commands_in(file)) checker.check(c);
  }
  // The extraction itself works: the docs hold many of each.
  EXPECT_GE(checker.ctest, 10);
  EXPECT_GE(checker.tandem, 20);
  EXPECT_GE(checker.binaries, 1);
  EXPECT_GE(checker.bare_flags, 20);
  std::string report;
  for (const auto& f : checker.failures) report += f + "\n";
  EXPECT_TRUE(checker.failures.empty()) << checker.failures.size() << " command(s) of the docs do not run here:\n"
                                        << report;
  std::printf("checked %d ctest selections, %d tandem command lines, %d flags named in prose, %d binaries "
              "(%zu distinct commands run)\n",
              checker.ctest, checker.tandem, checker.bare_flags, checker.binaries, checker.ran.size());
}
