#include "engine/trainer/job_failure.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "engine/io/atomic_file.h"

namespace fs = std::filesystem;

namespace tandem::trainer {

JobFailure job_failure_from(const std::exception& error, int rank) {
  JobFailure f;
  f.rank = rank;
  f.message = error.what();
  f.restartable = dynamic_cast<const CommError*>(&error) != nullptr;
  if (f.restartable) f.error = "CommError";
  else if (dynamic_cast<const ConfigError*>(&error)) f.error = "ConfigError";
  else if (dynamic_cast<const DataError*>(&error)) f.error = "DataError";
  else f.error = "Error";
  return f;
}

void record_job_failure(const JobFailure& failure) {
  const char* dir = std::getenv(kFailureDirVariable);
  if (!dir || !*dir) return;
  try {
    const nlohmann::json j = {{"rank", failure.rank}, {"error", failure.error}, {"restartable", failure.restartable},
                              {"message", failure.message}};
    io::write_file_atomically((fs::path(dir) / ("rank_" + std::to_string(failure.rank) + ".json")).string(), j.dump() + "\n");
  } catch (...) {
    // The failure itself is already being reported on stderr; the agent then judges by the exit status.
  }
}

std::vector<JobFailure> read_job_failures(const std::string& dir) {
  std::vector<JobFailure> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rank_", 0) != 0 || entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) continue;
    out.push_back({j.value("rank", -1), j.value("error", ""), j.value("restartable", false), j.value("message", "")});
  }
  std::sort(out.begin(), out.end(), [](const JobFailure& a, const JobFailure& b) { return a.rank < b.rank; });
  return out;
}

bool supervised_by_restart_agent() { return std::getenv(kRestartCountVariable) != nullptr; }

}  // namespace tandem::trainer
