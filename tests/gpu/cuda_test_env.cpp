// Before any test allocates: every new CUDA allocation is filled with 0xFF bytes (NaN for every
// float dtype, -1 for integers), so an output element a kernel forgot to write fails the
// comparison with the CPU reference instead of passing on leftover memory.
#include <cstdlib>

namespace {
const bool g_poison = [] { return setenv("TANDEM_CUDA_POISON", "1", /*overwrite=*/0) == 0; }();
}  // namespace
