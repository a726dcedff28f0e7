#include "engine/strategies/step_traffic_meter.h"

#include <algorithm>
#include <cstdio>

namespace tandem {

std::string StepTrafficMeter::summary() const {
  std::string kinds;
  for (int i = 0; i < collectives::kCommOpCount; ++i) {
    const auto op = static_cast<collectives::CommOp>(i);
    if (total_.sent.calls_of(op) == 0) continue;
    char part[96];
    std::snprintf(part, sizeof part, "%s%.1f %s", kinds.empty() ? "" : ", ",
                  double(total_.sent.calls_of(op)) / double(std::max<int64_t>(total_.steps, 1)),
                  collectives::comm_op_name(op));
    kinds += part;
  }
  char line[256];
  std::snprintf(line, sizeof line, "; sent %.0f bytes per step (this rank, over %lld steps; %s per step)",
                total_.bytes_per_step(), static_cast<long long>(total_.steps),
                kinds.empty() ? "no operations" : kinds.c_str());
  return line;
}

}  // namespace tandem
