#include "engine/accelerators/device_parsing.h"

#include <cctype>
#include <charconv>
#include <set>

#include "base/error.h"

namespace tandem {

const char* const kIndexedDeviceForms =
    "accepted forms: an int k > 0 (the first k devices), -1 or \"-1\" (all devices), \"auto\" "
    "(all devices), a list of distinct indices like [1, 3], or a string like \"3\" (first 3) or "
    "\"1, 3\" (devices 1 and 3)";

namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::string describe_machine(const IndexedDeviceContext& ctx) {
  std::string out = "this machine has " + std::to_string(ctx.available) + " " + ctx.accelerator +
                    " device" + (ctx.available == 1 ? "" : "s");
  if (ctx.available > 0) out += " (indices 0.." + std::to_string(ctx.available - 1) + ")";
  if (!ctx.machine_note.empty()) out += "; " + ctx.machine_note;
  return out;
}

[[noreturn]] void fail(const DevicesSpec& spec, const IndexedDeviceContext& ctx,
                       const std::string& problem) {
  throw ConfigError("devices=" + spec.str() + " for accelerator=" + ctx.accelerator + ": " +
                    problem + "; " + describe_machine(ctx) + "; " + kIndexedDeviceForms);
}

std::vector<int> first_k(int k) {
  std::vector<int> out(static_cast<size_t>(k));
  for (int i = 0; i < k; ++i) out[static_cast<size_t>(i)] = i;
  return out;
}

std::vector<int> all_devices(const DevicesSpec& spec, const IndexedDeviceContext& ctx) {
  if (ctx.available == 0) fail(spec, ctx, "asks for all devices but none is available");
  return first_k(ctx.available);
}

std::vector<int> from_count(int k, const DevicesSpec& spec, const IndexedDeviceContext& ctx) {
  if (k == -1) return all_devices(spec, ctx);
  if (k == 0) {
    fail(spec, ctx, "0 selects no device (to train on CPU use --trainer.accelerator=cpu)");
  }
  if (k < -1) fail(spec, ctx, "negative values other than -1 are not allowed");
  if (k > ctx.available) {
    fail(spec, ctx, "asks for the first " + std::to_string(k) + " devices");
  }
  return first_k(k);
}

std::vector<int> from_list(const std::vector<int>& list, const DevicesSpec& spec,
                           const IndexedDeviceContext& ctx) {
  if (!spec.non_integer_item().empty()) {
    fail(spec, ctx, "'" + spec.non_integer_item() + "' is not an integer index");
  }
  if (list.empty()) fail(spec, ctx, "an empty list selects no device");
  std::set<int> seen;
  for (int index : list) {
    if (index < 0) {
      fail(spec, ctx, "index " + std::to_string(index) + " is negative (-1 means 'all' only on "
                      "its own, not inside a list)");
    }
    if (!seen.insert(index).second) {
      fail(spec, ctx, "index " + std::to_string(index) + " appears more than once");
    }
    if (index >= ctx.available) {
      fail(spec, ctx, "index " + std::to_string(index) + " does not exist");
    }
  }
  return list;
}

}  // namespace

std::vector<std::string> split_trimmed(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(separator, start);
    parts.push_back(trim(text.substr(start, end == std::string::npos ? std::string::npos : end - start)));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

bool parse_int_strict(const std::string& text, int* out) {
  const std::string t = trim(text);
  if (t.empty()) return false;
  const char* begin = t.data();
  if (*begin == '+') ++begin;  // "+3" is an int to a user, though from_chars rejects the sign
  auto [ptr, ec] = std::from_chars(begin, t.data() + t.size(), *out);
  return ec == std::errc() && ptr == t.data() + t.size();
}

DevicesSpec DevicesSpec::list_of_text(const std::vector<std::string>& items) {
  DevicesSpec spec(std::vector<int>{});
  for (const auto& item : items) {
    int index = 0;
    if (parse_int_strict(item, &index)) {
      spec.list_.push_back(index);
    } else if (spec.non_integer_item_.empty()) {
      spec.non_integer_item_ = trim(item).empty() ? "\"\"" : trim(item);
    }
  }
  if (!spec.non_integer_item_.empty()) spec.list_text_ = items;
  return spec;
}

bool DevicesSpec::is_auto() const {
  if (kind_ != Kind::String) return false;
  std::string t = trim(text_);
  for (auto& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return t == "auto";
}

std::string DevicesSpec::str() const {
  switch (kind_) {
    case Kind::Int: return std::to_string(number_);
    case Kind::String: return "\"" + text_ + "\"";
    case Kind::List: {
      std::string out = "[";
      if (!list_text_.empty()) {
        for (size_t i = 0; i < list_text_.size(); ++i) out += (i ? ", " : "") + list_text_[i];
      } else {
        for (size_t i = 0; i < list_.size(); ++i) out += (i ? ", " : "") + std::to_string(list_[i]);
      }
      return out + "]";
    }
  }
  return "?";
}

std::vector<int> parse_indexed_devices(const DevicesSpec& spec, const IndexedDeviceContext& ctx) {
  switch (spec.kind()) {
    case DevicesSpec::Kind::Int: return from_count(spec.as_int(), spec, ctx);
    case DevicesSpec::Kind::List: return from_list(spec.as_list(), spec, ctx);
    case DevicesSpec::Kind::String: break;
  }
  if (spec.is_auto()) return all_devices(spec, ctx);
  const std::string& text = spec.as_string();
  // A comma makes it a list of indices ("1, 3", and "1," meaning [1]); otherwise it is a count.
  if (text.find(',') == std::string::npos) {
    int k = 0;
    if (!parse_int_strict(text, &k)) fail(spec, ctx, "'" + trim(text) + "' is not an integer");
    return from_count(k, spec, ctx);
  }
  std::vector<int> indices;
  for (const auto& part : split_trimmed(text, ',')) {
    if (part.empty()) continue;
    int index = 0;
    if (!parse_int_strict(part, &index)) fail(spec, ctx, "'" + part + "' is not an integer");
    indices.push_back(index);
  }
  return from_list(indices, spec, ctx);
}

int parse_cpu_process_count(const DevicesSpec& spec) {
  const std::string forms =
      "for accelerator=cpu, devices is the number of processes: an int > 0, its string (\"2\"), "
      "or \"auto\" (1 process)";
  int n = 0;
  switch (spec.kind()) {
    case DevicesSpec::Kind::Int: n = spec.as_int(); break;
    case DevicesSpec::Kind::List:
      throw ConfigError("devices=" + spec.str() + " for accelerator=cpu: a list of indices "
                        "selects GPUs, not CPU processes; " + forms);
    case DevicesSpec::Kind::String:
      if (spec.is_auto()) return 1;
      if (!parse_int_strict(spec.as_string(), &n)) {
        throw ConfigError("devices=" + spec.str() + " for accelerator=cpu: not an integer; " +
                          forms);
      }
      break;
  }
  if (n <= 0) {
    throw ConfigError("devices=" + spec.str() + " for accelerator=cpu: must be > 0 (-1 means "
                      "'all GPUs' and has no CPU meaning); " + forms);
  }
  return n;
}

}  // namespace tandem
