// The NCCL communicator on the GPU machine (label gpu; skips without a CUDA device, fails
// without one under TANDEM_REQUIRE_GPU=1 as the other GPU tests do): every
// collective and dtype against the exact expectations of the MPI tests (mpi_test_world.h),
// counts that do not divide by the world size, in place and out of place, and the errors for
// host tensors. Runs under mpirun -np 1 (NCCL needs one GPU per rank; the lent machine has one).
#include <gtest/gtest.h>

#include "collectives/mpi/mpi_communicator.h"
#include "collectives/nccl/nccl_communicator.h"
#include "gpu_test_skip.h"
#include "kernels/cuda/device_query.h"
#include "mpi_test_world.h"

namespace tandem::collectives {
namespace {

using mpitest::g_world;

class Nccl : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    auto* mpi = dynamic_cast<MpiCommunicator*>(g_world.get());
    ASSERT_NE(mpi, nullptr);
    CommOptions o;
    o.timeout = std::chrono::seconds(30);
    comm = std::make_unique<NcclCommunicator>(*mpi, g_world->local_rank() % cuda::visible_device_count(), o);
    dev = Device::cuda(comm->device_index());
  }
  std::unique_ptr<NcclCommunicator> comm;
  Device dev;
};

// NCCL moves only this rank's GPU memory: callers keep their buffers there.
TEST_F(Nccl, TakesDeviceTensorsOnly) {
  EXPECT_TRUE(comm->needs_device_tensors());
  EXPECT_EQ(comm->buffer_device(dev), dev);
}

TEST_F(Nccl, AllreduceEveryOpAndDtypeInAndOutOfPlace) {
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32, DType::Int64, DType::UInt8}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Product}) {
      if (dt == DType::UInt8 && op == ReduceOp::Avg) continue;  // ncclAvg is for floating and signed types
      for (bool in_place : {false, true}) {
        const int64_t n = 1001;
        Tensor in = mpitest::contribution_tensor(comm->rank(), n, dt, op).to(dev);
        Tensor out = in_place ? in : Tensor::zeros({n}, dt, dev);
        comm->allreduce(in, out, op);
        const auto got = out.to(Device::cpu()).to(DType::Float64).to_vector<double>();
        for (int64_t i = 0; i < n; ++i) {
          const double want = mpitest::expected_reduction(comm->size(), i, op, dt);
          ASSERT_NEAR(got[size_t(i)], want, is_floating(dt) ? 1e-2 * std::max(1.0, std::abs(want)) : 0.0)
              << dtype_name(dt) << " " << reduce_op_name(op) << " i=" << i;
        }
      }
    }
  }
}

TEST_F(Nccl, ReduceScatterAndAllgatherWithUnevenChunks) {
  const int64_t n = 7 * comm->size() + 3;
  Tensor in = mpitest::contribution_tensor(comm->rank(), n, DType::Float32, ReduceOp::Sum).to(dev);
  Tensor mine = Tensor::zeros({chunk_count(n, comm->size(), comm->rank())}, DType::Float32, dev);
  comm->reduce_scatter(in, mine, ReduceOp::Sum);
  const auto got = mine.to(Device::cpu()).to_vector<float>();
  const int64_t off = chunk_offset(n, comm->size(), comm->rank());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(got[i], float(mpitest::expected_reduction(comm->size(), off + int64_t(i), ReduceOp::Sum, DType::Float32)));
  Tensor all = Tensor::zeros({n}, DType::Float32, dev);
  comm->allgather(mine, all);
  const auto gathered = all.to(Device::cpu()).to_vector<float>();
  for (int64_t i = 0; i < n; ++i)
    EXPECT_EQ(gathered[size_t(i)], float(mpitest::expected_reduction(comm->size(), i, ReduceOp::Sum, DType::Float32)));
}

TEST_F(Nccl, BroadcastBarrierAndHostTensorErrors) {
  Tensor t = Tensor::full({5}, double(comm->rank() + 3), DType::Float32).to(dev);
  comm->broadcast(t, 0);
  EXPECT_EQ(t.to(Device::cpu()).to_vector<float>(), std::vector<float>(5, 3.0f));
  comm->barrier();
  Tensor host = Tensor::ones({4});
  EXPECT_THROW(comm->allreduce(host, ReduceOp::Sum), DeviceError);
  EXPECT_THROW(comm->allreduce(Tensor::ones({2}, DType::Bool, dev), ReduceOp::Sum), DTypeError);
}

}  // namespace
}  // namespace tandem::collectives
