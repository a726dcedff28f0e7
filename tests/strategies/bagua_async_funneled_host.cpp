// A host program that initialized MPI at MPI_THREAD_FUNNELED (Tandem never re-initializes it):
// bagua async must not start a thread that calls MPI. It falls back to rounds the training
// thread polls, says so in describe(), and still ends with every rank at the mean. Exit 0 on
// every rank when all holds.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "collectives/communicator_factory.h"
#include "collectives/mpi/host_comm.h"
#include "engine/strategies/bagua/algorithms.h"

using namespace tandem;

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int bad = 0;
  auto check = [&](bool ok, const std::string& what) {
    if (!ok) {
      std::fprintf(stderr, "[rank %d] funneled host check failed: %s\n", rank, what.c_str());
      bad = 1;
    }
  };
  {
    collectives::CommOptions options;
    options.timeout = std::chrono::seconds(60);
    const auto host = collectives::host_comm(MPI_COMM_WORLD);
    auto world = collectives::make_communicator(collectives::CommBackend::Mpi, host, options);
    check(!world->allows_concurrent_threads(), "an MPI at MPI_THREAD_FUNNELED allows a second thread");
    bagua::AsyncModelAverage async(InitParams{{"sync_interval_ms", "1"}, {"warmup_steps", "0"}});
    async.set_own_communicator(collectives::make_communicator(collectives::CommBackend::Mpi, host, options));
    check(!async.threaded(), "async runs a thread over an MPI at MPI_THREAD_FUNNELED");
    const std::string said = async.describe();
    check(said.find("polls") != std::string::npos && said.find("MPI_THREAD_MULTIPLE") != std::string::npos,
          "describe() does not say the rounds are polled: " + said);
    std::vector<Tensor> params = {Tensor::full({3, 2}, double(rank)), Tensor::full({4}, double(rank))};
    async.on_setup(params);
    for (int64_t step = 1; step <= 3 + rank; ++step) async.after_optimizer_step(*world, params, step);
    async.finish_training(*world, params);
    check(async.rounds_started() >= 1 && async.rounds_applied() == async.rounds_started(),
          "rounds started " + std::to_string(async.rounds_started()) + ", applied " +
              std::to_string(async.rounds_applied()));
    for (const Tensor& p : params)
      for (float v : p.to_vector<float>()) {
        check(v == float(size - 1) / 2, "weight " + std::to_string(v) + " is not the mean");
      }
    Tensor rounds = Tensor::scalar(double(async.rounds_started()), DType::Int64), most = rounds.clone();
    world->allreduce(most, collectives::ReduceOp::Max);
    check(int64_t(most.item()) == int64_t(rounds.item()), "ranks took part in different numbers of rounds");
    Tensor flag = Tensor::scalar(bad, DType::Int32);
    world->allreduce(flag, collectives::ReduceOp::Max);
    bad = int(flag.item());
  }
  MPI_Finalize();
  if (rank == 0) std::printf("bagua async under a FUNNELED host: %s\n", bad ? "FAILED" : "passed");
  return bad;
}
