#include "collectives/mpi_cuda_aware.h"

#include <string>

#include "base/error.h"

namespace tandem::collectives {

bool mpi_device_pointers_chosen(const char* setting, bool library_cuda_aware) {
  const std::string value = setting ? setting : "";
  if (value.empty() || value == "auto") return library_cuda_aware;
  if (value == "0") return false;
  if (value == "1") {
    if (!library_cuda_aware)
      throw CommError(std::string(kMpiCudaAwareVariable) +
                      "=1 asks MPI to take CUDA device pointers, but the MPI library is not CUDA-aware "
                      "(MPIX_Query_cuda_support() is not 1, or the library has no such query); use an MPI "
                      "built with CUDA support, or unset it (auto) or set it to 0 to stage CUDA tensors "
                      "through pinned host memory");
    return true;
  }
  throw ConfigError(std::string(kMpiCudaAwareVariable) + "='" + value +
                    "' is not a valid value; allowed: auto (the default: device pointers when the MPI "
                    "library is CUDA-aware), 0 (always stage through host memory), 1 (require a CUDA-aware MPI)");
}

}  // namespace tandem::collectives
