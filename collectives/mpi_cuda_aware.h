// How the MPI communicator moves CUDA tensors: as device pointers handed to a CUDA-aware MPI
// library, or staged through pinned host tensors. Chosen once per communicator from the
// environment variable TANDEM_MPI_CUDA_AWARE and what the MPI library reports; kept apart from
// collectives/mpi/ (and free of MPI) so the choice is unit-tested in every build.
#pragma once

namespace tandem::collectives {

inline constexpr const char* kMpiCudaAwareVariable = "TANDEM_MPI_CUDA_AWARE";

// True when CUDA tensors go to MPI as device pointers. `setting` is the variable's value (null
// when unset); `library_cuda_aware` is what the MPI library says of itself at run time.
//   unset, "" or "auto": library_cuda_aware
//   "0":                 false (always stage through pinned host memory)
//   "1":                 true; CommError naming the variable when the library is not CUDA-aware
//   anything else:       ConfigError listing the allowed values
bool mpi_device_pointers_chosen(const char* setting, bool library_cuda_aware);

}  // namespace tandem::collectives
