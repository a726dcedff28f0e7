#include "engine/module/metrics_sink.h"

namespace tandem::trainer {

void MetricsSink::begin_deferring() {
  deferring_ = true;
  deferred_.clear();
}

std::vector<MetricsSink::DeferredValue> MetricsSink::end_deferring() {
  deferring_ = false;
  return std::move(deferred_);
}

void MetricsSink::log_deferred(const std::vector<DeferredValue>& values) {
  for (const DeferredValue& v : values) log(v.name, v.tensor.defined() ? v.tensor.item() : v.number, v.options);
}

}  // namespace tandem::trainer
