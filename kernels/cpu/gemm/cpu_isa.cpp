#include "kernels/cpu/gemm/cpu_isa.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "base/error.h"

namespace tandem::cpu {

namespace {

// -1: not chosen yet; otherwise a CpuIsa value.
std::atomic<int> g_isa{-1};

std::string supported_list() {
  std::string s;
  for (CpuIsa isa : {CpuIsa::Avx512, CpuIsa::Avx2, CpuIsa::Portable})
    if (cpu_supports(isa)) s += std::string(s.empty() ? "" : ", ") + isa_name(isa);
  return s;
}

}  // namespace

const char* isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Avx512: return "avx512";
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Portable: return "portable";
  }
  return "?";
}

bool cpu_supports(CpuIsa isa) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  switch (isa) {
    case CpuIsa::Avx512: return __builtin_cpu_supports("avx512f");
    case CpuIsa::Avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case CpuIsa::Portable: return true;
  }
  return false;
#else
  return isa == CpuIsa::Portable;
#endif
}

CpuIsa best_isa() {
  if (cpu_supports(CpuIsa::Avx512)) return CpuIsa::Avx512;
  if (cpu_supports(CpuIsa::Avx2)) return CpuIsa::Avx2;
  return CpuIsa::Portable;
}

CpuIsa parse_isa(std::string_view name) {
  CpuIsa isa;
  if (name == "avx512") isa = CpuIsa::Avx512;
  else if (name == "avx2") isa = CpuIsa::Avx2;
  else if (name == "portable") isa = CpuIsa::Portable;
  else
    throw ConfigError("TANDEM_CPU_ISA='" + std::string(name) +
                      "' is not an instruction set; use avx512, avx2 or portable (this CPU runs " +
                      supported_list() + ")");
  if (!cpu_supports(isa))
    throw ConfigError("TANDEM_CPU_ISA=" + std::string(name) + ": this CPU cannot run " + isa_name(isa) +
                      " code; it runs " + supported_list());
  return isa;
}

CpuIsa active_isa() {
  int v = g_isa.load(std::memory_order_acquire);
  if (v >= 0) return static_cast<CpuIsa>(v);
  const char* env = std::getenv("TANDEM_CPU_ISA");
  const CpuIsa isa = env && *env ? parse_isa(env) : best_isa();
  g_isa.store(static_cast<int>(isa), std::memory_order_release);
  return isa;
}

void set_active_isa(CpuIsa isa) {
  if (!cpu_supports(isa))
    throw ConfigError(std::string("CPU instruction set ") + isa_name(isa) + " cannot run on this CPU; it runs " +
                      supported_list());
  g_isa.store(static_cast<int>(isa), std::memory_order_release);
}

}  // namespace tandem::cpu
