// The MPI communicator on CUDA float32 tensors (label gpu; skips without a device), run under
// mpirun -np 2 --oversubscribe (on one GPU both ranks share device 0). Each test runs with the
// communicator the environment chooses (device pointers when the MPI library is CUDA-aware,
// else pinned staging) and with one forced to stage (TANDEM_MPI_CUDA_AWARE=0), against the
// exact expectations of the MPI tests (mpi_test_world.h): allreduce in place and out of place
// (including the >= 32 MiB in-place branch), broadcast from every root, allgather with even
// and uneven chunks, reduce_scatter and send/recv.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "collectives/mpi/mpi_communicator.h"
#include "collectives/mpi_cuda_aware.h"
#include "gpu_test_skip.h"
#include "kernels/cuda/device_query.h"
#include "mpi_test_world.h"

namespace tandem::collectives {
namespace {

using mpitest::g_world;

// Sets TANDEM_MPI_CUDA_AWARE (unset for nullopt) for a scope and restores it.
class ScopedCudaAwareSetting {
 public:
  explicit ScopedCudaAwareSetting(std::optional<std::string> value) {
    if (const char* old = std::getenv(kMpiCudaAwareVariable)) old_ = old;
    if (value) setenv(kMpiCudaAwareVariable, value->c_str(), 1);
    else unsetenv(kMpiCudaAwareVariable);
  }
  ~ScopedCudaAwareSetting() {
    if (old_) setenv(kMpiCudaAwareVariable, old_->c_str(), 1);
    else unsetenv(kMpiCudaAwareVariable);
  }

 private:
  std::optional<std::string> old_;
};

struct Mode {
  std::string name;
  std::unique_ptr<MpiCommunicator> comm;
};

class MpiCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    dev = Device::cuda(g_world->local_rank() % cuda::visible_device_count());
    cuda::set_current_device(dev.index);
    CommOptions o;
    o.timeout = std::chrono::seconds(60);
    // Every rank constructs the same communicators in the same order (construction is collective).
    for (const char* setting : {static_cast<const char*>(nullptr), "0"}) {
      ScopedCudaAwareSetting scoped(setting ? std::optional<std::string>(setting) : std::nullopt);
      auto comm = std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, o);
      const std::string name = std::string(setting ? "TANDEM_MPI_CUDA_AWARE=0" : "auto") +
                               (comm->passes_device_pointers() ? " (device pointers)" : " (pinned staging)");
      if (setting) EXPECT_FALSE(comm->passes_device_pointers());
      modes.push_back(Mode{name, std::move(comm)});
    }
  }
  Device dev;
  std::vector<Mode> modes;
};

// got (copied from the device) against want(i) for every element; floats within 1e-6 relative.
template <typename F>
void expect_all(const Tensor& got, F want, const std::string& what) {
  ASSERT_EQ(got.device().type, DeviceType::CUDA) << what;
  const auto v = got.to(Device::cpu()).to(DType::Float64).to_vector<double>();
  int wrong = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const double w = want(int64_t(i));
    if (std::abs(v[i] - w) > 1e-6 * std::max(1.0, std::abs(w)) && wrong++ < 3)
      ADD_FAILURE() << what << " element " << i << ": got " << v[i] << ", expected " << w;
  }
  EXPECT_EQ(wrong, 0) << what;
}

TEST_F(MpiCuda, AllreduceInPlaceAndOutOfPlace) {
  const DType dt = DType::Float32;
  // 8388613 floats are just over 32 MiB: the in-place call takes the out-of-place branch.
  for (auto& m : modes)
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max})
      for (int64_t n : {int64_t(1), int64_t(4099), int64_t(8388613)})
        for (bool in_place : {true, false}) {
          if (n > 4099 && op != ReduceOp::Avg) continue;  // one large case per mode is enough
          const std::string what = m.name + " allreduce " + reduce_op_name(op) + " n=" + std::to_string(n) +
                                   (in_place ? " in place" : " out of place");
          MpiCommunicator& comm = *m.comm;
          Tensor in = mpitest::contribution_tensor(comm.rank(), n, dt, op).to(dev);
          Tensor out = in_place ? in : Tensor::full({n}, 99.0, dt, dev);
          comm.allreduce(in, out, op);
          expect_all(out, [&](int64_t i) { return mpitest::expected_reduction(comm.size(), i, op, dt); }, what);
          if (!in_place)
            expect_all(in, [&](int64_t i) { return mpitest::contribution(comm.rank(), i, op, false); },
                       what + " (input untouched)");
        }
}

TEST_F(MpiCuda, BroadcastFromEveryRoot) {
  const int64_t n = 1001;
  for (auto& m : modes)
    for (int root = 0; root < m.comm->size(); ++root) {
      MpiCommunicator& comm = *m.comm;
      Tensor t = mpitest::contribution_tensor(comm.rank(), n, DType::Float32, ReduceOp::Sum).to(dev);
      comm.broadcast(t, root);
      expect_all(t, [&](int64_t i) { return mpitest::contribution(root, i, ReduceOp::Sum, false); },
                 m.name + " broadcast from root " + std::to_string(root));
    }
}

TEST_F(MpiCuda, AllgatherEvenAndUnevenChunks) {
  for (auto& m : modes) {
    MpiCommunicator& comm = *m.comm;
    const int W = comm.size(), R = comm.rank();
    for (int64_t n : {int64_t(6 * W), int64_t(7 * W + 1)}) {
      const int64_t mine = chunk_count(n, W, R), off = chunk_offset(n, W, R);
      // Rank r's chunk holds the values of the full tensor's positions off .. off + mine - 1.
      std::vector<float> v(static_cast<size_t>(mine));
      for (int64_t i = 0; i < mine; ++i) v[size_t(i)] = float(3 * (off + i) + 1);
      Tensor in = Tensor::from_vector(v, {mine}).to(dev);
      Tensor out = Tensor::full({n}, -5.0, DType::Float32, dev);
      comm.allgather(in, out);
      expect_all(out, [](int64_t i) { return double(3 * i + 1); }, m.name + " allgather n=" + std::to_string(n));
    }
  }
}

TEST_F(MpiCuda, ReduceScatterAndSendRecv) {
  for (auto& m : modes) {
    MpiCommunicator& comm = *m.comm;
    const int W = comm.size(), R = comm.rank();
    const int64_t n = 5 * W + 2;
    Tensor in = mpitest::contribution_tensor(R, n, DType::Float32, ReduceOp::Sum).to(dev);
    Tensor mine = Tensor::zeros({chunk_count(n, W, R)}, DType::Float32, dev);
    comm.reduce_scatter(in, mine, ReduceOp::Sum);
    const int64_t off = chunk_offset(n, W, R);
    expect_all(mine, [&](int64_t i) { return mpitest::expected_reduction(W, off + i, ReduceOp::Sum, DType::Float32); },
               m.name + " reduce_scatter");
    if (W < 2) continue;
    // A ring: each rank sends its contribution to the next and receives the previous one's.
    Tensor got = Tensor::zeros({n}, DType::Float32, dev);
    auto sent = comm.send_async(in, (R + 1) % W, 7);
    comm.recv(got, (R + W - 1) % W, 7);
    sent->wait();
    const int from = (R + W - 1) % W;
    expect_all(got, [&](int64_t i) { return mpitest::contribution(from, i, ReduceOp::Sum, false); },
               m.name + " recv from rank " + std::to_string(from));
  }
}

}  // namespace
}  // namespace tandem::collectives
