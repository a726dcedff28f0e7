// Timeouts, the thread level and embedding on the MPI backend. Each test that makes a communicator fail uses its
// own duplicate of MPI_COMM_WORLD, so the world communicator stays usable, and ends by letting
// the late rank arrive, so no MPI request is left pending and the job finalizes cleanly.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <thread>

#include "base/error.h"
#include "collectives/communicator_factory.h"
#include "collectives/local_communicator.h"
#include "collectives/mpi/mpi_communicator.h"
#include "collectives/mpi/mpi_runtime.h"
#include "mpi_test_world.h"

using namespace tandem;
using namespace tandem::collectives;
using tandem::collectives::mpitest::g_world;
using Clock = std::chrono::steady_clock;

namespace {

CommOptions short_timeout(int ms) {
  CommOptions o;
  o.timeout = std::chrono::milliseconds(ms);
  o.abort_on_timeout = false;  // the test ends the job cleanly itself
  return o;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(MpiTimeout, ARankThatSkipsACollectiveIsNamedAfterTheTimeout) {
  const int W = g_world->size(), R = g_world->rank();
  if (W < 2) GTEST_SKIP() << "needs two ranks";
  const int late = W - 1;
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  {
    MpiCommunicator comm(dup, short_timeout(1500));
    Tensor t = Tensor::ones({1000});
    if (R != late) {
      const auto start = Clock::now();
      try {
        comm.allreduce(t, ReduceOp::Sum);
        ADD_FAILURE() << "expected CommError";
      } catch (const CommError& e) {
        const std::string m = e.what();
        if (R == 0) std::printf("  rank 0 got: %s\n", m.c_str());
        EXPECT_TRUE(contains(m, "allreduce(sum, float32, 1000 elements")) << m;
        EXPECT_TRUE(contains(m, "did not complete within 1.5 s")) << m;
        EXPECT_TRUE(contains(m, "ranks that did not arrive: rank " + std::to_string(late))) << m;
      }
      const double waited = std::chrono::duration<double>(Clock::now() - start).count();
      EXPECT_GE(waited, 1.4);
      EXPECT_LT(waited, 10.0);
      EXPECT_TRUE(comm.failed());
      try {
        comm.barrier();
        ADD_FAILURE() << "a failed communicator must refuse new work";
      } catch (const CommError& e) {
        EXPECT_TRUE(contains(e.what(), "failed earlier")) << e.what();
      }
    }
    // The late rank waits here (a plain MPI barrier: it cannot answer the others' queries, so
    // they name it) until the others have timed out, then arrives and completes the allreduce
    // the others abandoned; their destructors drain it.
    MPI_Barrier(MPI_COMM_WORLD);
    if (R == late) {
      comm.set_timeout(std::chrono::seconds(30));
      comm.allreduce(t, ReduceOp::Sum);
      EXPECT_FALSE(comm.failed());
    }
  }
  MPI_Comm_free(&dup);
  g_world->barrier();
}

TEST(MpiTimeout, RecvFromASilentPeerTimesOutAndIsCancelled) {
  const int W = g_world->size(), R = g_world->rank();
  if (W < 2) GTEST_SKIP() << "needs two ranks";
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  {
    MpiCommunicator comm(dup, short_timeout(300));
    if (R == 0) {
      Tensor t = Tensor::zeros({8});
      try {
        comm.recv(t, 1, 42);
        ADD_FAILURE() << "expected CommError";
      } catch (const CommError& e) {
        EXPECT_TRUE(contains(e.what(), "recv(from rank 1, tag 42")) << e.what();
        EXPECT_TRUE(contains(e.what(), "the peer, rank 1, did not post")) << e.what();
      }
    }
  }
  MPI_Comm_free(&dup);
  g_world->barrier();
}

TEST(MpiTimeout, WaitWithAnExplicitTimeoutThrowsButTheWorkCanStillBeAbandonedSafely) {
  const int W = g_world->size(), R = g_world->rank();
  if (W < 2) GTEST_SKIP() << "needs two ranks";
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  {
    MpiCommunicator comm(dup, short_timeout(60000));
    if (R == 0) {
      auto w = comm.barrier_async();
      EXPECT_FALSE(w->is_completed());
      EXPECT_THROW(w->wait(std::chrono::milliseconds(200)), CommError);
      EXPECT_THROW(w->wait(), CommError);  // a failed Work never pretends to have completed
      EXPECT_THROW(w->is_completed(), CommError);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (R != 0) comm.barrier();
  }
  MPI_Comm_free(&dup);
  g_world->barrier();
}

TEST(MpiThreads, TandemInitializesMpiAtThreadMultiple) {
  // main() brought MPI up through Tandem, which asks for MPI_THREAD_MULTIPLE (Open MPI 4.1 here
  // gives it); a host's lower level is tested by bagua_async_funneled_np*.
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  EXPECT_EQ(level, MPI_THREAD_MULTIPLE);
  EXPECT_TRUE(g_world->allows_concurrent_threads());
  LocalCommunicator local;
  EXPECT_TRUE(local.allows_concurrent_threads());
}

TEST(MpiEmbedding, JoinsACommunicatorTheHostSplit) {
  const int R = g_world->rank();
  // MPI is up (main initialized it through Tandem); asking again must not re-initialize.
  EXPECT_TRUE(mpi::tandem_owns_mpi());
  init_comm_runtime(CommBackend::Mpi, nullptr, nullptr);
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, R % 2, R, &half);
  int half_rank = 0, half_size = 0;
  MPI_Comm_rank(half, &half_rank);
  MPI_Comm_size(half, &half_size);
  {
    MpiCommunicator comm(half);
    EXPECT_EQ(comm.rank(), half_rank);
    EXPECT_EQ(comm.size(), half_size);
    Tensor t = Tensor::scalar(R, DType::Int64);
    comm.allreduce(t, ReduceOp::Sum);
    int64_t expected = 0;
    for (int r = R % 2; r < g_world->size(); r += 2) expected += r;
    EXPECT_EQ(int64_t(t.item()), expected);
  }
  // Tandem freed only its duplicate: the host's communicator still works.
  int still = 0;
  EXPECT_EQ(MPI_Comm_size(half, &still), MPI_SUCCESS);
  EXPECT_EQ(still, half_size);
  EXPECT_EQ(MPI_Barrier(half), MPI_SUCCESS);
  MPI_Comm_free(&half);
}

TEST(MpiEmbedding, NullCommunicatorIsACommError) {
  EXPECT_THROW(MpiCommunicator(MPI_COMM_NULL), CommError);
}
