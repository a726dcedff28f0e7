// CSVLogger: Lightning's layout on disk.
//
//   <root_dir>/<name>/version_<N>/metrics.csv    one row per logging call: step, epoch, then
//                                                one column per metric (sorted by name),
//                                                blank where the row has no value
//   <root_dir>/<name>/version_<N>/hparams.yaml   module + datamodule hyper-parameters
//
// N is one more than the highest existing version_N (0 in a fresh directory), fixed the first
// time it is asked for, so each Trainer gets its own directory and keeps it for fit, validate
// and test. A metric that first appears mid-run adds a column: the file is rewritten with the
// wider header (rows are kept in memory; they are a few numbers per logging step).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace tandem::trainer {

class CSVLogger {
 public:
  explicit CSVLogger(std::string root_dir, std::string name = "lightning_logs",
                     std::optional<int> version = std::nullopt);
  // Removes the version directory it created when nothing was written in it (a command that
  // failed before logging anything leaves no empty version_N behind).
  ~CSVLogger();
  CSVLogger(const CSVLogger&) = delete;
  CSVLogger& operator=(const CSVLogger&) = delete;

  std::string name() const { return name_; }
  // The N of every <root_dir>/<name>/version_N directory, ascending (empty when there are none).
  static std::vector<int> existing_versions(const std::string& root_dir, const std::string& name = "lightning_logs");

  int version();              // resolves (and fixes) N on first use
  std::optional<int> version_if_set() const { return version_; }
  std::string log_dir();      // <root_dir>/<name>/version_<N>
  std::string metrics_path() { return log_dir() + "/metrics.csv"; }
  std::string hparams_path() { return log_dir() + "/hparams.yaml"; }

  // Appends one row; "epoch" in metrics (if present) goes in the epoch column.
  void log_metrics(const std::map<std::string, double>& metrics, int64_t step);
  // Writes hparams.yaml (replacing an earlier one).
  void log_hyperparams(const nlohmann::json& hparams);

 private:
  // metrics.csv is rewritten whole (atomically) when a column appears, else grows by a row;
  // a failed write is a DataError either way.
  void write_all();
  void append_row(size_t row);
  std::string row_text(size_t row) const;

  std::string root_dir_, name_;
  std::optional<int> version_;
  bool created_dir_ = false;  // version() created log_dir()
  std::set<std::string> metric_names_;  // sorted: the column order after step, epoch
  struct Row {
    int64_t step;
    std::map<std::string, double> values;
  };
  std::vector<Row> rows_;
};

// Renders JSON as YAML (objects as mappings, arrays as sequences), for hparams.yaml.
std::string json_to_yaml(const nlohmann::json& value);

}  // namespace tandem::trainer
