// The emulator's execution model against hand-derived answers (kernels in emulator_kernels.cu),
// and the misuse it aborts on with a message naming the kernel. Runs in the emulation build only
// (label gpu, emulated devices); the GPU suite (tests/gpu) is what runs our real kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "tests/emulation/emulator_kernels.h"

namespace tandem::emulator_test {
namespace {

template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemset(p_, 0, n * sizeof(T)), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(p_); }
  T* get() const { return p_; }
  void put(const std::vector<T>& v) { EXPECT_EQ(cudaMemcpy(p_, v.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess); }
  std::vector<T> get_all() const {
    std::vector<T> v(n_);
    EXPECT_EQ(cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }

 private:
  size_t n_;
  T* p_ = nullptr;
};

TEST(Emulator, SharedMemoryAndBarriersPerBlock) {
  for (int n : {1, 31, 32, 33, 256, 1024}) {
    const int blocks = 3;
    std::vector<int> in(size_t(n * blocks));
    std::iota(in.begin(), in.end(), 7);
    DeviceBuffer<int> d_in(in.size()), d_out(in.size());
    d_in.put(in);
    ASSERT_EQ(reverse_in_blocks(d_in.get(), d_out.get(), n, blocks), cudaSuccess);
    const std::vector<int> out = d_out.get_all();
    for (int b = 0; b < blocks; ++b)
      for (int t = 0; t < n; ++t) ASSERT_EQ(out[size_t(b * n + t)], in[size_t(b * n + n - 1 - t)]) << n << " " << b << " " << t;
  }
}

TEST(Emulator, WarpCollectivesFollowCudasRulesInFullAndPartialWarps) {
  for (int threads : {32, 40, 64}) {
    DeviceBuffer<unsigned> d(size_t(threads * kWarpResults));
    ASSERT_EQ(warp_ops(d.get(), threads), cudaSuccess);
    const std::vector<unsigned> r = d.get_all();
    for (int t = 0; t < threads; ++t) {
      const int warp = t / 32, lane = t % 32;
      const int lanes = std::min(32, threads - warp * 32);  // the last warp may be partial
      const unsigned active = lanes == 32 ? ~0u : (1u << lanes) - 1;
      const auto value = [&](int l) { return unsigned(100 + warp * 32 + l); };
      const unsigned* got = &r[size_t(t * kWarpResults)];
      SCOPED_TRACE("thread " + std::to_string(t) + " of " + std::to_string(threads));
      EXPECT_EQ(got[0], lane % 8 == 7 ? value(lane) : value(lane + 1));        // shfl_down width 8
      EXPECT_EQ(got[1], lane < 2 ? value(lane) : value(lane - 2));             // shfl_up
      EXPECT_EQ(got[2], value(lane ^ 3));                                      // shfl_xor
      EXPECT_EQ(got[3], value((lane & ~15) + 5));                              // shfl width 16
      unsigned ballot = 0;
      for (int l = 0; l < lanes; ++l) ballot |= (l % 3 == 0 ? 1u : 0u) << l;
      EXPECT_EQ(got[4], ballot);
      EXPECT_EQ(got[5], lanes > 7 ? 1u : 0u);                                  // any lane == 7
      EXPECT_EQ(got[6], lanes < 32 ? 1u : 0u);                                 // all lanes < 31
      EXPECT_EQ(got[7], (0xfu << (lane / 4 * 4)) & active);                    // match_any lane / 4
      EXPECT_EQ(got[8], active);
    }
  }
}

TEST(Emulator, AtomicsAndTwoDimensionalGrids) {
  DeviceBuffer<int> counter(2);
  ASSERT_EQ(atomics(counter.get(), dim3(3, 2), dim3(16, 4)), cudaSuccess);
  const std::vector<int> c = counter.get_all();
  EXPECT_EQ(c[0], 6 * 64);
  EXPECT_EQ(c[1], 6 * 64 - 1);
}

TEST(Emulator, ThreeDimensionalCoordinates) {
  const dim3 grid(2, 3), block(4, 3, 2);
  DeviceBuffer<int> d(size_t(6 * 24));
  ASSERT_EQ(coordinates(d.get(), grid, block), cudaSuccess);
  const std::vector<int> out = d.get_all();
  for (unsigned by = 0; by < 3; ++by)
    for (unsigned bx = 0; bx < 2; ++bx)
      for (unsigned z = 0; z < 2; ++z)
        for (unsigned y = 0; y < 3; ++y)
          for (unsigned x = 0; x < 4; ++x) {
            const size_t i = (by * 2 + bx) * 24 + (z * 3 + y) * 4 + x;
            EXPECT_EQ(out[i], int(bx * 10000 + by * 1000 + x * 100 + y * 10 + z)) << i;
          }
}

TEST(Emulator, LaunchesAGpuWouldRefuseReportAnErrorAndRunNothing) {
  DeviceBuffer<int> d(4096);
  EXPECT_EQ(coordinates(d.get(), dim3(1), dim3(2048)), cudaErrorInvalidConfiguration);  // > 1024 threads
  EXPECT_EQ(coordinates(d.get(), dim3(1, 70000), dim3(32)), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // read once, then cleared
  const std::vector<int> untouched = d.get_all();
  EXPECT_TRUE(std::all_of(untouched.begin(), untouched.end(), [](int v) { return v == 0; }));
}

// A stream destroyed in the middle of a capture takes the capture with it: a stream created
// later at the same address (the allocator hands it back) starts out not capturing and runs
// its work at once.
TEST(Emulator, AStreamDestroyedWhileCapturingLeavesNoCaptureBehind) {
  DeviceBuffer<int> d(1);
  int reused = 0;
  for (int attempt = 0; attempt < 64; ++attempt) {
    cudaStream_t first = nullptr, second = nullptr;
    ASSERT_EQ(cudaStreamCreate(&first), cudaSuccess);
    ASSERT_EQ(cudaStreamBeginCapture(first, cudaStreamCaptureModeGlobal), cudaSuccess);
    ASSERT_EQ(cudaStreamDestroy(first), cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&second), cudaSuccess);
    if (second == first) {
      ++reused;
      cudaStreamCaptureStatus status = cudaStreamCaptureStatusActive;
      EXPECT_EQ(cudaStreamIsCapturing(second, &status), cudaSuccess);
      EXPECT_EQ(status, cudaStreamCaptureStatusNone);
      const int value = 7 + attempt;
      EXPECT_EQ(cudaMemcpyAsync(d.get(), &value, sizeof value, cudaMemcpyHostToDevice, second), cudaSuccess);
      EXPECT_EQ(cudaStreamSynchronize(second), cudaSuccess);
      EXPECT_EQ(d.get_all()[0], value);  // ran, not recorded
    }
    ASSERT_EQ(cudaStreamDestroy(second), cudaSuccess);
  }
  if (reused == 0) GTEST_SKIP() << "the allocator never handed a destroyed stream's address back";
}

using EmulatorDeathTest = ::testing::Test;

TEST_F(EmulatorDeathTest, ABarrierPartOfTheBlockNeverReachesAborts) {
  EXPECT_DEATH(barrier_skipped_by_half_the_block(),
               "kernel tandem::emulator_test::half_block_barrier_kernel: .*16 of 32 threads wait at __syncthreads, 16 have exited");
}

TEST_F(EmulatorDeathTest, AShuffleNamingALaneThatExitedAborts) {
  EXPECT_DEATH(shuffle_with_a_lane_that_exited(), "kernel tandem::emulator_test::exited_lane_shuffle_kernel: .*exited while lanes");
}

TEST_F(EmulatorDeathTest, LanesOfOneWarpWithDifferentMasksAbort) {
  EXPECT_DEATH(warp_lanes_with_different_masks(), "kernel tandem::emulator_test::mixed_masks_kernel: .*mask 0xffffffff while this lane "
                                                  "calls it with mask 0xffff0000");
}

}  // namespace
}  // namespace tandem::emulator_test
