// TANDEM_MPI_CUDA_AWARE at MpiCommunicator construction, against what this MPI library says of
// itself (Debian's Open MPI: not CUDA-aware): auto follows it, 0 stages, 1 demands it, other
// values are refused. A refusal happens before any collective call, so each rank throws alone.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "base/error.h"
#include "collectives/mpi/mpi_communicator.h"
#include "collectives/mpi/mpi_runtime.h"
#include "collectives/mpi_cuda_aware.h"

using namespace tandem;
using namespace tandem::collectives;

namespace {

// Constructs an MpiCommunicator over MPI_COMM_WORLD with the variable set to `value` (unset
// for nullopt), restoring it afterwards.
std::unique_ptr<MpiCommunicator> communicator_with(std::optional<std::string> value) {
  std::optional<std::string> old;
  if (const char* v = std::getenv(kMpiCudaAwareVariable)) old = v;
  if (value) setenv(kMpiCudaAwareVariable, value->c_str(), 1);
  else unsetenv(kMpiCudaAwareVariable);
  struct Restore {
    std::optional<std::string>& old;
    ~Restore() {
      if (old) setenv(kMpiCudaAwareVariable, old->c_str(), 1);
      else unsetenv(kMpiCudaAwareVariable);
    }
  } restore{old};
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
}

}  // namespace

TEST(MpiCudaAwareEnv, AutoAndZeroConstruct) {
  const bool library = mpi::mpi_library_cuda_aware();
  EXPECT_EQ(communicator_with(std::nullopt)->passes_device_pointers(), library);
  EXPECT_EQ(communicator_with(std::string("auto"))->passes_device_pointers(), library);
  EXPECT_FALSE(communicator_with(std::string("0"))->passes_device_pointers());
}

TEST(MpiCudaAwareEnv, OneNeedsACudaAwareLibrary) {
  if (mpi::mpi_library_cuda_aware()) {
    EXPECT_TRUE(communicator_with(std::string("1"))->passes_device_pointers());
    return;
  }
  try {
    communicator_with(std::string("1"));
    FAIL() << "expected CommError";
  } catch (const CommError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("TANDEM_MPI_CUDA_AWARE"), std::string::npos) << msg;
    EXPECT_NE(msg.find("not CUDA-aware"), std::string::npos) << msg;
  }
}

TEST(MpiCudaAwareEnv, AnotherValueIsAConfigError) {
  EXPECT_THROW(communicator_with(std::string("sometimes")), ConfigError);
}
