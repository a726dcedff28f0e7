// main() for test_collectives (run under mpirun): MPI comes up through Tandem's backend, every
// rank runs every test, rank 0 prints GoogleTest's report, other ranks print only their
// failures, and the exit code is the max over ranks, so ctest sees one verdict.
#include <gtest/gtest.h>

#include <cstdio>

#include "collectives/communicator_factory.h"
#include "mpi_test_world.h"

namespace tandem::collectives::mpitest {
std::shared_ptr<Communicator> g_world;
}

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  using namespace tandem;
  using namespace tandem::collectives;
  ::testing::InitGoogleTest(&argc, argv);
  init_comm_runtime(CommBackend::Mpi, &argc, &argv);
  CommOptions options;
  options.timeout = std::chrono::seconds(60);
  options.abort_on_timeout = true;  // a hang in a correctness test should end the job, not ctest's timer
  mpitest::g_world = make_communicator(CommBackend::Mpi, options);
  const int rank = mpitest::g_world->rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  Tensor flag = Tensor::scalar(failed, DType::Int32);
  mpitest::g_world->allreduce(flag, ReduceOp::Max);
  failed = int(flag.item());
  mpitest::g_world.reset();  // before MPI_Finalize, which Tandem runs at exit
  if (rank == 0) std::printf("collectives: %s on every rank\n", failed ? "FAILED" : "passed");
  return failed;
}
