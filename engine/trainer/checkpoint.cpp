// Checkpoint <-> safetensors tensors and metadata (layout in checkpoint.h).
#include "engine/trainer/checkpoint.h"

#include <filesystem>
#include <system_error>

#include "base/error.h"
#include "engine/io/safetensors.h"

namespace tandem::trainer {

namespace {

constexpr const char* kVersionKey = "tandem.version";
constexpr const char* kParamGroupsKey = "tandem.optimizer.param_groups";
constexpr const char* kSchedulerKey = "tandem.scheduler";
constexpr const char* kTrainerStateKey = "tandem.trainer_state";

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// JSON holds no NaN or infinity: dump() writes them as null (a NaN best score reads back as
// null). Strings must be UTF-8; dump() throws otherwise, which we turn into a clear error.
std::string dump_json(const std::string& path, const char* key, const nlohmann::json& value) {
  try {
    return value.dump();
  } catch (const nlohmann::json::exception& e) {
    throw ValueError("save_checkpoint('" + path + "'): " + key + " cannot be written as JSON (" + e.what() +
                     "); keep its strings UTF-8");
  }
}

nlohmann::json parse_json(const std::string& path, const char* key, const std::string& text) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw DataError("checkpoint '" + path + "': metadata \"" + key + "\" is not valid JSON (" + e.what() +
                    "); the file is corrupt: use another checkpoint");
  }
}

}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& ckpt) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  tensors.reserve(ckpt.model.size() + (ckpt.optimizer ? ckpt.optimizer->state.size() : 0));
  for (const auto& [name, tensor] : ckpt.model) {
    // On load, "optimizer.*" tensors are the optimizer's whenever param_groups are present.
    if (ckpt.optimizer && starts_with(name, kOptimizerTensorPrefix))
      throw ValueError("save_checkpoint('" + path + "'): model key '" + name + "' starts with '" +
                       kOptimizerTensorPrefix + "', which checkpoints reserve for the optimizer's state; " +
                       "rename that submodule");
    tensors.emplace_back(name, tensor);
  }

  std::map<std::string, std::string> metadata = {{"format", "pt"}, {kVersionKey, kCheckpointVersion}};
  if (ckpt.optimizer) {
    if (!ckpt.optimizer->param_groups.is_array())
      throw ValueError("save_checkpoint('" + path + "'): optimizer param_groups must be a JSON array, got " +
                       std::string(ckpt.optimizer->param_groups.type_name()));
    for (const auto& [name, tensor] : ckpt.optimizer->state) tensors.emplace_back(kOptimizerTensorPrefix + name, tensor);
    metadata[kParamGroupsKey] = dump_json(path, "the optimizer's param_groups", ckpt.optimizer->param_groups);
  }
  if (!ckpt.scheduler.is_null()) metadata[kSchedulerKey] = dump_json(path, "the scheduler state", ckpt.scheduler);
  if (!ckpt.trainer_state.is_null())
    metadata[kTrainerStateKey] = dump_json(path, "the trainer state", ckpt.trainer_state);

  io::save_safetensors(path, tensors, metadata);
}

Checkpoint load_checkpoint(const std::string& path) {
  io::SafetensorsContent content = io::load_safetensors(path);
  const auto& meta = content.metadata;

  auto version = meta.find(kVersionKey);
  const bool legacy = version != meta.end() && version->second == kUnverifiedMetadataVersion;
  if (version != meta.end() && !legacy && version->second != kCheckpointVersion)
    throw DataError("checkpoint '" + path + "' has format version " + version->second + "; this build of Tandem reads " +
                    "versions " + kUnverifiedMetadataVersion + " and " + kCheckpointVersion +
                    ": load it with the Tandem that wrote it, or a newer one");
  // Every checkpoint Tandem writes carries its version's checksum; one without it was edited or
  // damaged in its header, and cannot be verified.
  const char* checksum_key = legacy ? io::kDataChecksumKey : io::kFileChecksumKey;
  if (version != meta.end() && !meta.count(checksum_key))
    throw DataError("checkpoint '" + path + "' (format version " + version->second + ") has no \"" + checksum_key +
                    "\" metadata, so it cannot be verified; the file was altered: use another checkpoint");

  Checkpoint ckpt;
  ckpt.format_version = version != meta.end() ? version->second : "";
  auto groups = meta.find(kParamGroupsKey);
  if (groups != meta.end()) {
    ckpt.optimizer.emplace();
    ckpt.optimizer->param_groups = parse_json(path, kParamGroupsKey, groups->second);
    if (!ckpt.optimizer->param_groups.is_array())
      throw DataError("checkpoint '" + path + "': metadata \"" + kParamGroupsKey + "\" must be a JSON array, got " +
                      ckpt.optimizer->param_groups.dump() + "; the file is corrupt: use another checkpoint");
  }
  const std::string prefix = kOptimizerTensorPrefix;
  for (auto& [name, tensor] : content.tensors) {
    if (ckpt.optimizer && starts_with(name, prefix))
      ckpt.optimizer->state.insert(name.substr(prefix.size()), tensor);
    else
      ckpt.model.insert(name, tensor);
  }
  if (auto it = meta.find(kSchedulerKey); it != meta.end()) ckpt.scheduler = parse_json(path, kSchedulerKey, it->second);
  if (auto it = meta.find(kTrainerStateKey); it != meta.end())
    ckpt.trainer_state = parse_json(path, kTrainerStateKey, it->second);
  return ckpt;
}

std::string unverified_metadata_warning(const std::string& path, const Checkpoint& ckpt) {
  if (ckpt.format_version != kUnverifiedMetadataVersion) return "";
  return std::string("warning: ") + path + " has checkpoint format version " + kUnverifiedMetadataVersion +
         ", whose checksum covers the tensors only: its optimizer settings, scheduler, loop position and RNG state "
         "are used unverified. Checkpoints this run writes use version " + kCheckpointVersion +
         ", checked whole";
}

std::optional<std::string> find_last_checkpoint(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path last = fs::path(dir) / kLastCheckpointName;
  if (fs::is_regular_file(last, ec)) return last.string();

  std::optional<std::string> newest;
  fs::file_time_type newest_time{};
  fs::directory_iterator it(dir, ec), end;
  if (ec) return std::nullopt;  // a missing directory simply has no checkpoint yet
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    // Unfinished saves are "<name>.safetensors.tmp-<pid>", so the extension test skips them.
    if (!it->is_regular_file(ec) || it->path().extension() != ".safetensors") continue;
    auto time = it->last_write_time(ec);
    if (ec) continue;
    // Ties (same mtime granularity) go to the lexicographically larger name, for determinism.
    if (!newest || time > newest_time || (time == newest_time && it->path().string() > *newest)) {
      newest = it->path().string();
      newest_time = time;
    }
  }
  return newest;
}

}  // namespace tandem::trainer
