// Which vector instruction set the CPU kernels run with, chosen at run time: the widest the CPU
// (and the OS, for the AVX register state) supports, or the one TANDEM_CPU_ISA names
// (avx512 | avx2 | portable). The library itself is compiled for the x86-64 baseline; only the
// functions of the ISA-specific files carry target attributes, so one binary runs everywhere.
#pragma once
#include <string_view>

namespace tandem::cpu {

enum class CpuIsa { Portable, Avx2, Avx512 };

const char* isa_name(CpuIsa isa);
// Whether this CPU can execute `isa` (Portable: always; Avx2 means AVX2 + FMA; Avx512 means
// AVX-512 F). Always false for Avx2/Avx512 off x86-64.
bool cpu_supports(CpuIsa isa);
// The widest ISA this CPU supports.
CpuIsa best_isa();
// Parses avx512 | avx2 | portable; ConfigError naming the value, the allowed ones, and (for an
// ISA this CPU cannot run) what it can run.
CpuIsa parse_isa(std::string_view name);
// The ISA in use: TANDEM_CPU_ISA when set (read once; ConfigError as parse_isa), else best_isa().
CpuIsa active_isa();
// Forces the ISA in use (tests loop over every path in one process); ConfigError when the CPU
// cannot run it. Not thread-safe against running kernels.
void set_active_isa(CpuIsa isa);

}  // namespace tandem::cpu
