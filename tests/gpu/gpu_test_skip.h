// The one way a GPU test skips itself: no visible CUDA device (none on the machine, no driver,
// or a build without CUDA), with the reason in the skip message.
#pragma once
#include <gtest/gtest.h>

#include "kernels/cuda/device_query.h"

#define SKIP_WITHOUT_GPU()                             \
  if (::tandem::cuda::visible_device_count() == 0) \
  GTEST_SKIP() << "no CUDA device: " << ::tandem::cuda::device_count_note()
