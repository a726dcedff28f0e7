// Autocast state and casting rules (autocast.h).
#include "tensor/ops/autocast.h"

namespace tandem::autocast {

namespace {
thread_local std::optional<DType> t_low;

bool is_half(DType d) { return d == DType::Float16 || d == DType::BFloat16; }
bool on_cuda(const Tensor& t) { return t.defined() && t.device().is_cuda(); }
}  // namespace

Guard::Guard(std::optional<DType> low) : previous_(t_low) { t_low = low; }
Guard::~Guard() { t_low = previous_; }

std::optional<DType> low_dtype() { return t_low; }

bool should_lower(std::initializer_list<const Tensor*> operands) {
  if (!t_low) return false;
  for (const Tensor* t : operands) {
    if (!on_cuda(*t)) continue;
    const DType d = t->dtype();
    if ((d == DType::Float32 || is_half(d)) && d != *t_low) return true;
  }
  return false;
}

Tensor lower(const Tensor& t) {
  if (!t_low || !t.defined() || !(t.dtype() == DType::Float32 || is_half(t.dtype()))) return t;
  return t.to(*t_low);
}

bool should_round_on_host(std::initializer_list<const Tensor*> operands) {
  if (t_low != DType::BFloat16) return false;
  for (const Tensor* t : operands)
    if (t->defined() && t->device().is_cpu() && t->dtype() == DType::Float32) return true;
  return false;
}

Tensor round_to_bfloat16(const Tensor& t) {
  if (!t.defined() || !t.device().is_cpu() || t.dtype() != DType::Float32) return t;
  return t.to(DType::BFloat16).to(DType::Float32);
}

bool should_raise(const Tensor& t) { return t_low && on_cuda(t) && is_half(t.dtype()); }

Tensor raise(const Tensor& t) { return should_raise(t) ? t.to(DType::Float32) : t; }

std::optional<std::pair<Tensor, Tensor>> promoted(const Tensor& a, const Tensor& b) {
  if (!t_low || !on_cuda(a) || !on_cuda(b) || a.dtype() == b.dtype()) return std::nullopt;
  const bool mixed = (is_half(a.dtype()) && (b.dtype() == DType::Float32 || is_half(b.dtype()))) ||
                     (is_half(b.dtype()) && a.dtype() == DType::Float32);
  if (!mixed) return std::nullopt;
  return std::make_pair(a.to(DType::Float32), b.to(DType::Float32));
}

}  // namespace tandem::autocast
