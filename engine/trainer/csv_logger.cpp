#include "engine/trainer/csv_logger.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <regex>

#include "base/error.h"
#include "engine/io/atomic_file.h"

namespace fs = std::filesystem;

namespace tandem::trainer {

namespace {

// Shortest text that reads back to the same double ("0.1", not "0.100000"), as Python's repr.
std::string format_value(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

YAML::Node to_yaml_node(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object: {
      YAML::Node n(YAML::NodeType::Map);
      for (auto it = j.begin(); it != j.end(); ++it) n[it.key()] = to_yaml_node(it.value());
      return n;
    }
    case nlohmann::json::value_t::array: {
      YAML::Node n(YAML::NodeType::Sequence);
      for (const auto& item : j) n.push_back(to_yaml_node(item));
      return n;
    }
    case nlohmann::json::value_t::string: return YAML::Node(j.get<std::string>());
    case nlohmann::json::value_t::boolean: return YAML::Node(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return YAML::Node(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: return YAML::Node(j.get<uint64_t>());
    case nlohmann::json::value_t::number_float: return YAML::Node(j.get<double>());
    default: return YAML::Node(YAML::NodeType::Null);
  }
}

}  // namespace

std::string json_to_yaml(const nlohmann::json& value) {
  if (value.is_object() && value.empty()) return "{}\n";
  YAML::Emitter out;
  out << to_yaml_node(value);
  return std::string(out.c_str()) + "\n";
}

CSVLogger::CSVLogger(std::string root_dir, std::string name, std::optional<int> version)
    : root_dir_(std::move(root_dir)), name_(std::move(name)), version_(version) {}

CSVLogger::~CSVLogger() {
  if (!created_dir_) return;
  std::error_code ec;
  const fs::path dir = log_dir();
  if (fs::is_empty(dir, ec) && !ec) {
    fs::remove(dir, ec);
    fs::remove(dir.parent_path(), ec);  // lightning_logs too, when that leaves it empty
  }
}

std::vector<int> CSVLogger::existing_versions(const std::string& root_dir, const std::string& name) {
  std::vector<int> out;
  const fs::path dir = fs::path(root_dir) / name;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  static const std::regex pattern("version_([0-9]+)");
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string leaf = entry.path().filename().string();
    if (entry.is_directory() && std::regex_match(leaf, m, pattern)) out.push_back(std::stoi(m[1]));
  }
  std::sort(out.begin(), out.end());
  return out;
}

int CSVLogger::version() {
  if (version_) return *version_;
  // One more than the highest version_N present: a new directory per run, never reused.
  const std::vector<int> versions = existing_versions(root_dir_, name_);
  const int next = versions.empty() ? 0 : versions.back() + 1;
  std::error_code ec;
  version_ = next;
  // Claim the directory now, so a second Trainer in this process picks the next number.
  created_dir_ = fs::create_directories(fs::path(log_dir()), ec);
  if (ec) throw DataError("cannot create the log directory " + log_dir() + ": " + ec.message() +
                          "; set --trainer.default_root_dir to a writable directory");
  return *version_;
}

std::string CSVLogger::log_dir() {
  return (fs::path(root_dir_) / name_ / ("version_" + std::to_string(version()))).string();
}

void CSVLogger::log_metrics(const std::map<std::string, double>& metrics, int64_t step) {
  if (metrics.empty()) return;
  Row row{step, {}};
  bool new_column = false;
  for (const auto& [k, v] : metrics) {
    row.values[k] = v;
    if (k != "epoch" && metric_names_.insert(k).second) new_column = true;
  }
  rows_.push_back(std::move(row));
  if (new_column || rows_.size() == 1) write_all();
  else append_row(rows_.size() - 1);
}

std::string CSVLogger::row_text(size_t index) const {
  const Row& row = rows_[index];
  std::string line = std::to_string(row.step) + ',';
  if (auto e = row.values.find("epoch"); e != row.values.end()) line += std::to_string(static_cast<int64_t>(e->second));
  for (const auto& name : metric_names_) {
    line += ',';
    if (auto it = row.values.find(name); it != row.values.end()) line += format_value(it->second);
  }
  return line + '\n';
}

void CSVLogger::write_all() {
  std::string text = "step,epoch";
  for (const auto& name : metric_names_) text += ',' + name;
  text += '\n';
  for (size_t i = 0; i < rows_.size(); ++i) text += row_text(i);
  io::write_file_atomically(metrics_path(), text);
}

void CSVLogger::append_row(size_t index) { io::append_to_file(metrics_path(), row_text(index)); }

void CSVLogger::log_hyperparams(const nlohmann::json& hparams) {
  io::write_file_atomically(hparams_path(), json_to_yaml(hparams));
}

}  // namespace tandem::trainer
