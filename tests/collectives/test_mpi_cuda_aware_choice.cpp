// The choice between CUDA-aware MPI and pinned staging (collectives/mpi_cuda_aware.h): every
// value of TANDEM_MPI_CUDA_AWARE against both answers the MPI library can give. No MPI needed.
#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "collectives/mpi_cuda_aware.h"

namespace tandem::collectives {
namespace {

TEST(MpiCudaAwareChoice, AutoFollowsTheLibrary) {
  for (const char* setting : {static_cast<const char*>(nullptr), "", "auto"}) {
    const std::string what = setting ? std::string("'") + setting + "'" : "unset";
    EXPECT_TRUE(mpi_device_pointers_chosen(setting, true)) << what;
    EXPECT_FALSE(mpi_device_pointers_chosen(setting, false)) << what;
  }
}

TEST(MpiCudaAwareChoice, ZeroAlwaysStages) {
  EXPECT_FALSE(mpi_device_pointers_chosen("0", true));
  EXPECT_FALSE(mpi_device_pointers_chosen("0", false));
}

TEST(MpiCudaAwareChoice, OneDemandsACudaAwareLibrary) {
  EXPECT_TRUE(mpi_device_pointers_chosen("1", true));
  try {
    mpi_device_pointers_chosen("1", false);
    FAIL() << "expected CommError";
  } catch (const CommError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("TANDEM_MPI_CUDA_AWARE=1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("not CUDA-aware"), std::string::npos) << msg;
  }
}

TEST(MpiCudaAwareChoice, OtherValuesListTheAllowedOnes) {
  for (const char* bad : {"yes", "true", "2", "AUTO", " 1", "on"}) {
    for (bool library : {false, true}) {
      try {
        mpi_device_pointers_chosen(bad, library);
        ADD_FAILURE() << "expected ConfigError for '" << bad << "'";
      } catch (const ConfigError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(std::string("TANDEM_MPI_CUDA_AWARE='") + bad + "'"), std::string::npos) << msg;
        for (const char* allowed : {"auto", "0 (", "1 ("})
          EXPECT_NE(msg.find(allowed), std::string::npos) << "'" << allowed << "' missing from: " << msg;
      }
    }
  }
}

}  // namespace
}  // namespace tandem::collectives
