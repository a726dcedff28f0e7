// The CPU kernels' thread pool (kernels/cpu/thread_pool.h): every index covered once, results
// equal to a serial run (bit for bit for the GEMM and a unary kernel), calls from many host
// threads at once, a call from a host thread while another's job holds the pool (runs inline,
// no deadlock), nested calls (inline), exceptions (rethrown on the caller, the pool still
// usable), the size taken from OMP_NUM_THREADS and bad sizes refused.
#include <gtest/gtest.h>

#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/thread_pool.h"

using namespace tandem;

namespace {

// Sets the pool's size for one test and restores it.
class PoolSize {
 public:
  explicit PoolSize(int threads) : saved_(cpu::max_threads()) { cpu::set_max_threads(threads); }
  ~PoolSize() { cpu::set_max_threads(saved_); }

 private:
  int saved_;
};

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace

// Registered once more with OMP_NUM_THREADS=3 (tests/gemm/CMakeLists.txt).
TEST(ThreadPool, SizeComesFromOmpNumThreadsElseTheCpusThisProcessMayUse) {
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    EXPECT_EQ(cpu::max_threads(), std::atoi(env));
  } else {
    cpu_set_t set;
    ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
    EXPECT_EQ(cpu::max_threads(), CPU_COUNT(&set));
  }
}

TEST(ThreadPool, BadSizesAreRefused) {
  EXPECT_THROW(cpu::set_max_threads(0), ValueError);
  EXPECT_THROW(cpu::set_max_threads(-2), ValueError);
  PoolSize size(2);
  EXPECT_THROW(cpu::parallel_tasks(2, [](int64_t) { cpu::set_max_threads(3); }), ValueError);
  EXPECT_EQ(cpu::max_threads(), 2);
}

TEST(ThreadPool, ParallelForCoversEveryIndexOnceInChunksOfAtLeastTheGrain) {
  for (int threads : {1, 2, 3, 5}) {
    PoolSize size(threads);
    for (int64_t n : {0, 1, 7, 64, 1000, 100003})
      for (int64_t grain : {1, 16, 4096}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::atomic<int> chunks{0};
        std::atomic<int64_t> smallest{n};
        cpu::parallel_for(n, grain, [&](int64_t begin, int64_t end) {
          ++chunks;
          int64_t s = smallest.load();
          while (end - begin < s && !smallest.compare_exchange_weak(s, end - begin)) {}
          for (int64_t i = begin; i < end; ++i) ++hits[size_t(i)];
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[size_t(i)].load(), 1) << "n " << n << " index " << i;
        EXPECT_LE(chunks.load(), threads);
        if (chunks.load() > 1) EXPECT_GE(smallest.load(), grain) << "n " << n << " grain " << grain;
      }
  }
}

TEST(ThreadPool, KernelResultsEqualTheSerialResultBitForBit) {
  const int64_t m = 300, n = 260, k = 280;  // above the GEMM's parallel threshold (16M multiply-adds)
  const std::vector<float> a = random_floats(size_t(m * k), 1), b = random_floats(size_t(k * n), 2);
  const std::vector<float> x = random_floats(size_t(1) << 20, 3);
  CpuBackend cpu;
  auto run = [&] {
    std::vector<float> c(size_t(m * n)), y(x.size());
    cpu.gemm(DType::Float32, false, true, m, n, k, 1.0, a.data(), 0, b.data(), 0, 0.0, c.data(), 0, 1);
    const int64_t len = int64_t(x.size());
    cpu.unary(UnaryOp::Tanh, TensorView{const_cast<float*>(x.data()), DType::Float32, {len}, {1}},
              TensorView{y.data(), DType::Float32, {len}, {1}}, UnaryParams{});
    c.insert(c.end(), y.begin(), y.end());
    return c;
  };
  std::vector<float> serial;
  {
    PoolSize size(1);
    serial = run();
  }
  for (int threads : {2, 4}) {
    PoolSize size(threads);
    EXPECT_EQ(run(), serial) << threads << " threads";
  }
}

TEST(ThreadPool, ManyHostThreadsCallingAtOnceEachGetTheirOwnResult) {
  PoolSize size(2);
  constexpr int kCallers = 8, kRounds = 200;
  std::vector<std::thread> callers;
  std::vector<int> wrong(kCallers, 0);
  for (int c = 0; c < kCallers; ++c)
    callers.emplace_back([&, c] {
      std::vector<int64_t> v(5000);
      for (int r = 0; r < kRounds; ++r) {
        cpu::parallel_for(int64_t(v.size()), 64, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) v[size_t(i)] = i * (c + 1) + r;
        });
        for (size_t i = 0; i < v.size(); ++i) wrong[size_t(c)] += v[i] != int64_t(i) * (c + 1) + r;
      }
    });
  for (std::thread& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) EXPECT_EQ(wrong[size_t(c)], 0) << "caller " << c;
}

TEST(ThreadPool, AHostThreadCallingWhileAnotherJobHoldsThePoolRunsInlineWithoutWaiting) {
  PoolSize size(2);
  std::atomic<int> started{0};
  std::atomic<bool> release{false};
  std::thread holder([&] {
    cpu::parallel_tasks(2, [&](int64_t) {
      ++started;
      while (!release.load()) std::this_thread::yield();
    });
  });
  while (started.load() == 0) std::this_thread::yield();
  // The holder's job is running (its tasks wait for `release`): this call must not wait for it.
  auto other = std::async(std::launch::async, [] {
    const std::thread::id me = std::this_thread::get_id();
    std::atomic<int> on_me{0};
    cpu::parallel_tasks(4, [&](int64_t) { on_me += std::this_thread::get_id() == me; });
    return on_me.load();
  });
  const bool finished = other.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  release = true;
  holder.join();
  ASSERT_TRUE(finished) << "a call made while the pool was busy waited for it";
  EXPECT_EQ(other.get(), 4);
}

TEST(ThreadPool, NestedCallsRunInlineOnTheTaskThatMakesThem) {
  PoolSize size(3);
  std::atomic<int> inline_tasks{0}, covered{0};
  EXPECT_FALSE(cpu::in_parallel_region());
  cpu::parallel_tasks(3, [&](int64_t) {
    EXPECT_TRUE(cpu::in_parallel_region());
    const std::thread::id me = std::this_thread::get_id();
    cpu::parallel_for(1000, 1, [&](int64_t begin, int64_t end) {
      inline_tasks += std::this_thread::get_id() == me;
      covered += int(end - begin);
    });
  });
  EXPECT_FALSE(cpu::in_parallel_region());
  EXPECT_EQ(inline_tasks.load(), 3);  // one chunk each: inline, not split again
  EXPECT_EQ(covered.load(), 3000);
}

TEST(ThreadPool, AnExceptionInATaskReachesTheCallerAndThePoolStillWorks) {
  PoolSize size(2);
  for (int round = 0; round < 20; ++round) {
    EXPECT_THROW(cpu::parallel_tasks(8,
                                     [&](int64_t t) {
                                       if (t == round % 8) throw std::runtime_error("task failed");
                                     }),
                 std::runtime_error);
    std::atomic<int> ran{0};
    cpu::parallel_tasks(8, [&](int64_t) { ++ran; });
    EXPECT_EQ(ran.load(), 8);
  }
  // From a nested (inline) call too.
  EXPECT_THROW(cpu::parallel_tasks(2, [](int64_t) { cpu::parallel_tasks(2, [](int64_t) { throw ValueError("inner"); }); }),
               ValueError);
}
