// What `tandem` says about itself (issue #23): --version, an aligned --help, `fit --help` listing
// every registered strategy with its options (from the registries), and --print_config refusing
// the strategy settings that plan and fit refuse.
#include <regex>
#include <set>

#include "cli_test_util.h"
#include "engine/strategies/bagua/bagua_algorithm.h"
#include "engine/strategies/strategy.h"

#ifndef TANDEM_VERSION_STRING
#error "TANDEM_VERSION_STRING must be the CMake project version"
#endif

TEST(CliUsage, VersionIsTheProjectVersion) {
  auto r = run_tandem("--version");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, std::string("tandem ") + TANDEM_VERSION_STRING + "\n");
}

TEST(CliUsage, HelpAlignsTheSubcommandSummaries) {
  auto r = run_tandem("--help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out_has("tandem --version")) << r.out;
  // "  fit       train ..." : every summary starts in the same column.
  const std::regex row("^  ([a-z_]+)( +)(\\S.*)$");
  std::istringstream lines(r.out.substr(r.out.find("subcommands:")));
  std::set<size_t> columns;
  int rows = 0;
  for (std::string line; std::getline(lines, line) && !(rows > 0 && line.empty());) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    ++rows;
    columns.insert(size_t(m.position(3)));
  }
  EXPECT_EQ(rows, 6) << r.out;  // fit, validate, test, predict, generate, plan
  EXPECT_EQ(columns.size(), 1u) << r.out;
}

TEST(CliUsage, FitHelpListsEveryRegisteredStrategyWithItsOptions) {
  auto r = run_tandem("fit --help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& entry : tandem::strategy_registry().entries()) {
    EXPECT_TRUE(r.out_has("\n  " + entry.name + "  " + entry.description + "\n")) << entry.name << "\n" << r.out;
  }
  ASSERT_FALSE(tandem::bagua::bagua_algorithm_registry().entries().empty());
  for (const auto& algorithm : tandem::bagua::bagua_algorithm_registry().entries()) {
    EXPECT_TRUE(r.out_has("\n        " + algorithm.name + "  ")) << algorithm.name << "\n" << r.out;
    for (const auto& [option, value] : algorithm.default_params) {
      const std::string shown = value.empty() ? "unset" : value;
      EXPECT_TRUE(r.out_has("\n            " + option + "  (default: " + shown + ")\n")) << option << "\n" << r.out;
    }
  }
}

// The same refusal from --print_config as from plan (and so fit), exit 2 naming the problem.
TEST(CliUsage, PrintConfigRefusesTheStrategySettingsPlanRefuses) {
  const std::pair<const char*, const char*> cases[] = {
      {"--trainer.strategy=bagua --trainer.strategy.algorithm=nosuch", "unknown algorithm 'nosuch'"},
      {"--trainer.strategy=ddp --trainer.strategy.bucket=1", "has no option 'bucket'"},
      {"--trainer.strategy=nosuch", "unknown strategy 'nosuch'"},
      {"--trainer.strategy=bagua --trainer.strategy.algorithm=bytegrad --trainer.strategy.nosuch=1", "nosuch"},
  };
  for (const auto& [flags, message] : cases) {
    for (const std::string command : {"fit --print_config ", "plan "}) {
      auto r = run_tandem(command + flags);
      EXPECT_EQ(r.exit_code, 2) << command << flags << "\n" << r.out << r.err;
      EXPECT_TRUE(r.err_has(message)) << command << flags << "\n" << r.err;
    }
  }
  auto good = run_tandem("fit --print_config --trainer.strategy=bagua --trainer.strategy.algorithm=bytegrad");
  EXPECT_EQ(good.exit_code, 0) << good.err;
  EXPECT_TRUE(good.out_has("algorithm: bytegrad")) << good.out;
}
