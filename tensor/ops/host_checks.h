// Value checks that read device tensors on the host (cross_entropy's class indices) cost a
// device-to-host copy and a wait, which a CUDA graph cannot contain. While a DeferHostChecks
// guard lives on this thread, such checks are skipped for tensors that are not on the CPU; the
// CUDA kernels turn an invalid value into NaN instead, so the loss shows it, and the Trainer
// runs a step whose loss is not finite once more eagerly, with the checks, to name the cause.
#pragma once

namespace tandem::ops {

class DeferHostChecks {
 public:
  DeferHostChecks();
  ~DeferHostChecks();
  DeferHostChecks(const DeferHostChecks&) = delete;
  DeferHostChecks& operator=(const DeferHostChecks&) = delete;

 private:
  bool previous_;
};

bool host_checks_deferred();

}  // namespace tandem::ops
