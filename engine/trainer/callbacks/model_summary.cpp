#include "engine/trainer/callbacks/model_summary.h"

#include <cmath>
#include <cstdio>
#include <vector>

#include "engine/trainer/trainer.h"

namespace tandem::trainer {

std::string ModelSummary::human_count(int64_t n) {
  static const char* labels[] = {"", "K", "M", "B", "T"};
  const int digits = n > 0 ? int(std::floor(std::log10(double(n)))) + 1 : 1;
  const int groups = std::min<int>((digits + 2) / 3, 5);
  const double scaled = double(n) * std::pow(10.0, -3.0 * (groups - 1));
  char buf[64];
  if (groups <= 1 || scaled >= 100) std::snprintf(buf, sizeof buf, "%lld %s", static_cast<long long>(scaled), labels[groups - 1]);
  else std::snprintf(buf, sizeof buf, "%.1f %s", scaled, labels[groups - 1]);
  std::string s = buf;
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string ModelSummary::summarize(const nn::Module& module, int max_depth) {
  struct Row { std::string name, type, params; };
  std::vector<Row> rows;
  for (const auto& [name, m] : module.named_modules()) {
    if (name.empty()) continue;
    int depth = 1;
    for (char c : name) depth += c == '.';
    if (max_depth >= 0 && depth > max_depth) continue;
    int64_t count = 0;
    for (const auto& p : m->parameters()) count += p.numel();
    rows.push_back({name, m->name(), human_count(count)});
  }
  int64_t trainable = 0, frozen = 0, bytes = 0;
  for (const auto& p : module.parameters()) {
    (p.requires_grad() ? trainable : frozen) += p.numel();
    bytes += p.numel() * int64_t(dtype_size(p.dtype()));
  }
  size_t wi = std::to_string(rows.size()).size(), wn = 4, wt = 4, wp = 6;
  for (const auto& r : rows) {
    wn = std::max(wn, r.name.size());
    wt = std::max(wt, r.type.size());
    wp = std::max(wp, r.params.size());
  }
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-*s | %-*s | %-*s | %s\n", int(wi), "", int(wn), "Name", int(wt), "Type", "Params");
  out += line;
  const std::string rule(wi + wn + wt + wp + 9, '-');
  out += rule + "\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    std::snprintf(line, sizeof line, "%-*zu | %-*s | %-*s | %s\n", int(wi), i, int(wn), rows[i].name.c_str(), int(wt),
                  rows[i].type.c_str(), rows[i].params.c_str());
    out += line;
  }
  out += rule + "\n";
  std::snprintf(line, sizeof line, "%-10s Trainable params\n%-10s Non-trainable params\n%-10s Total params\n"
                "%-10.3f Total estimated model params size (MB)\n",
                human_count(trainable).c_str(), human_count(frozen).c_str(), human_count(trainable + frozen).c_str(),
                double(bytes) / 1e6);
  out += line;
  return out;
}

void ModelSummary::on_fit_start(Trainer& trainer, LightningModule& module) {
  if (!trainer.is_global_zero()) return;
  std::fputs(summarize(module, max_depth_).c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace tandem::trainer
