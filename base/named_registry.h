// A name -> factory table shared by AcceleratorRegistry and StrategyRegistry.
//
// Names are case-insensitive (stored lower-case). Registering a name twice is an error unless
// the caller says override=true, so a plugin cannot silently replace "cuda". Looking up an
// unknown name is a ConfigError that suggests the closest registered name and lists them all,
// because that is what a user who typed `--trainer.accelerator=cdua` needs to see; an unknown
// option likewise suggests the closest option the entry takes.
#pragma once
#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/edit_distance.h"
#include "base/error.h"

namespace tandem {

// Init parameters are strings: they come from flags, YAML and plugins alike, and each class
// parses the few it understands. An entry's default_params declare the options it takes (a
// default of "" means "no default: unset unless given"); create() refuses any other key.
using InitParams = std::map<std::string, std::string>;

inline std::string lower_case(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

template <typename Base>
class NamedRegistry {
 public:
  using Factory = std::function<std::unique_ptr<Base>(const InitParams&)>;
  struct Entry {
    std::string name;
    std::string description;
    Factory factory;
    InitParams default_params;
  };

  // `kind` names what is registered ("accelerator", "strategy") in error messages.
  explicit NamedRegistry(std::string kind) : kind_(std::move(kind)) {}

  void add(const std::string& name, std::string description, Factory factory,
           InitParams default_params = {}, bool override_existing = false) {
    const std::string key = lower_case(name);
    if (key.empty()) throw ConfigError("cannot register a " + kind_ + " with an empty name");
    std::lock_guard<std::mutex> lock(mutex_);
    if (entries_.count(key) && !override_existing) {
      throw ConfigError("a " + kind_ + " named '" + key + "' is already registered (" +
                        entries_.at(key).description + "); pass override_existing=true to " +
                        "replace it, or register under another name");
    }
    entries_[key] = Entry{key, std::move(description), std::move(factory), std::move(default_params)};
  }

  bool contains(const std::string& name) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_.count(lower_case(name)) > 0;
  }

  Entry get(const std::string& name) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(lower_case(name));
    if (it == entries_.end()) {
      throw ConfigError("unknown " + kind_ + " '" + name + "'" + suggestion(name, names_locked()) +
                        "; registered " + kind_ + "s: " + joined_names_locked());
    }
    return it->second;
  }

  // Builds an instance; `params` override the entry's defaults key by key. A key the entry does
  // not declare is a ConfigError that names what the entry takes.
  std::unique_ptr<Base> create(const std::string& name, const InitParams& params = {}) const {
    Entry entry = get(name);
    InitParams merged = entry.default_params;
    for (const auto& [k, v] : params) {
      if (!entry.default_params.count(k)) {
        std::string taken;
        std::vector<std::string> options;
        for (const auto& [d, _] : entry.default_params) {
          taken += (taken.empty() ? "" : ", ") + d;
          options.push_back(d);
        }
        throw ConfigError(kind_ + " '" + entry.name + "' has no option '" + k + "' (given " + k + "=" + v + ")" +
                          suggestion(k, options) + "; " +
                          (taken.empty() ? "it takes no options" : "its options are: " + taken));
      }
      merged[k] = v;
    }
    return entry.factory(merged);
  }

  bool remove(const std::string& name) {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_.erase(lower_case(name)) > 0;
  }

  std::vector<std::string> names() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return names_locked();
  }

  // " (did you mean 'ddp'?)" when `name` is a plausible typo of a registered name, else "": for
  // callers that word their own unknown-name error.
  std::string did_you_mean(const std::string& name) const { return suggestion(name, names()); }

  std::vector<Entry> entries() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<Entry> out;
    for (const auto& [_, e] : entries_) out.push_back(e);
    return out;
  }

  std::string joined_names() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return joined_names_locked();
  }

 private:
  static std::string suggestion(const std::string& word, const std::vector<std::string>& candidates) {
    const std::string guess = closest_match(lower_case(word), candidates);
    return guess.empty() ? "" : " (did you mean '" + guess + "'?)";
  }

  std::vector<std::string> names_locked() const {
    std::vector<std::string> out;
    for (const auto& [k, _] : entries_) out.push_back(k);
    return out;
  }

  std::string joined_names_locked() const {
    std::string out;
    for (const auto& [k, _] : entries_) out += (out.empty() ? "" : ", ") + k;
    return out.empty() ? "(none)" : out;
  }

  std::string kind_;
  mutable std::mutex mutex_;
  std::map<std::string, Entry> entries_;  // ordered, so listings are stable
};

}  // namespace tandem
