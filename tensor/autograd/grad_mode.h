// Grad mode: while disabled (NoGradGuard), ops record no graph.
#pragma once

namespace tandem {

bool grad_enabled();
void set_grad_enabled(bool enabled);

// RAII: disables graph recording in this thread for its lifetime.
class NoGradGuard {
 public:
  NoGradGuard() : prev_(grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace tandem
