#include "engine/module/lightning_module.h"

#include "base/error.h"

namespace tandem::trainer {

namespace {
thread_local LightningModule::LogCapture* t_capture = nullptr;
}  // namespace

LightningModule::LogCapture::LogCapture() : previous_(t_capture) { t_capture = this; }
LightningModule::LogCapture::~LogCapture() { t_capture = previous_; }

void LightningModule::log(const std::string& name, const Tensor& value, const LogOptions& options) {
  if (!host_ && !t_capture) return;
  TANDEM_CHECK(value.defined(), ValueError, "log('" + name + "', ...): the tensor is undefined; log a scalar tensor or a number");
  TANDEM_CHECK(value.numel() == 1, ValueError,
               "log('" + name + "', ...): the tensor has shape " + value.shape_str() +
                   "; only one-element tensors can be logged (reduce it first, e.g. mean(x))");
  if (t_capture) {
    t_capture->values.push_back({name, value.item(), options});
    return;
  }
  MetricsSink& logs = host_->metrics();
  if (logs.deferring()) {  // a CUDA graph step: read after the step, not now
    logs.defer({name, value.detach(), 0.0, options});
    return;
  }
  log(name, value.item(), options);
}

void LightningModule::log(const std::string& name, double value, const LogOptions& options) {
  if (t_capture) {
    t_capture->values.push_back({name, value, options});
    return;
  }
  if (!host_) return;
  MetricsSink& logs = host_->metrics();
  if (logs.deferring()) {
    logs.defer({name, Tensor(), value, options});
    return;
  }
  logs.log(name, value, options);
}

void LightningModule::log_dict(const std::map<std::string, Tensor>& values, const LogOptions& options) {
  for (const auto& [name, value] : values) log(name, value, options);
}

void LightningModule::log_dict(const std::map<std::string, double>& values, const LogOptions& options) {
  for (const auto& [name, value] : values) log(name, value, options);
}

int64_t LightningModule::global_step() const { return host_ ? host_->global_step() : 0; }
int64_t LightningModule::current_epoch() const { return host_ ? host_->current_epoch() : 0; }
Tensor LightningModule::all_gather(const Tensor& tensor) const {
  if (!host_) return tensor.detach().unsqueeze(0).clone();
  return host_->all_gather(tensor);
}

bool LightningModule::is_global_zero() const { return host_ ? host_->is_global_zero() : true; }

}  // namespace tandem::trainer
