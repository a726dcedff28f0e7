// The one way a GPU test skips itself: no visible CUDA device (none on the machine, no driver,
// or a build without CUDA), with the reason in the skip message. With TANDEM_REQUIRE_GPU=1
// (scripts/gpu_run.sh on a GPU machine) the same condition fails the test instead, printing the
// runtime's reason, so a driver that is too old cannot turn the whole suite into green skips.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "kernels/cuda/device_query.h"

inline bool gpu_required() {
  const char* v = std::getenv("TANDEM_REQUIRE_GPU");
  return v && std::strcmp(v, "0") != 0 && *v;
}

#define SKIP_WITHOUT_GPU()                                                                              \
  if (::tandem::cuda::visible_device_count() == 0) {                                                    \
    if (gpu_required()) FAIL() << "TANDEM_REQUIRE_GPU=1 but " << ::tandem::cuda::device_count_note(); \
    GTEST_SKIP() << "no CUDA device: " << ::tandem::cuda::device_count_note();                          \
  }

// For a test whose point only a real GPU can show (CUDA-graph replay, sizes the emulator is too
// slow or too small for): skips without a device and in the emulation build, saying why.
#define SKIP_WITHOUT_REAL_GPU(why)                                                   \
  SKIP_WITHOUT_GPU();                                                                \
  if (TANDEM_CUDA_EMULATION) GTEST_SKIP() << "needs a real GPU (label gpu-only): " << why
