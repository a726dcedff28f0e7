// LocalCommunicator semantics and the backend factory; needs no MPI and runs without mpirun.
#include <gtest/gtest.h>

#include "base/error.h"
#include "collectives/communicator_factory.h"
#include "collectives/local_communicator.h"

using namespace tandem;
using namespace tandem::collectives;

namespace {

Tensor iota(int64_t n, DType dtype) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = double(i % 50);
  return Tensor::from_vector(v, {n}).to(dtype);
}

void expect_equal(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>());
}

}  // namespace

TEST(LocalCommunicator, IsAWorldOfOne) {
  LocalCommunicator c;
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.size(), 1);
  EXPECT_EQ(c.local_rank(), 0);
  EXPECT_EQ(c.local_size(), 1);
  EXPECT_EQ(c.backend_name(), "local");
  EXPECT_EQ(c.options().timeout, std::chrono::minutes(10));
}

// Host tensors: a caller keeps its communication buffers on the CPU whatever it computes on.
TEST(LocalCommunicator, TakesHostTensors) {
  LocalCommunicator c;
  EXPECT_FALSE(c.needs_device_tensors());
  EXPECT_EQ(c.buffer_device(Device::cuda(0)), Device::cpu());
  EXPECT_EQ(c.buffer_device(Device::cpu()), Device::cpu());
}

TEST(LocalCommunicator, ReductionsAreCopies) {
  LocalCommunicator c;
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::UInt8, DType::Float16}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Product}) {
      Tensor in = iota(37, dt), out = Tensor::zeros({37}, dt);
      c.allreduce(in, out, op);
      expect_equal(out, in);
      Tensor inplace = in.clone();
      c.allreduce(inplace, op);
      expect_equal(inplace, in);
      Tensor scattered = Tensor::zeros({37}, dt);
      c.reduce_scatter(in, scattered, op);
      expect_equal(scattered, in);
    }
  }
}

TEST(LocalCommunicator, AllgatherBroadcastBarrier) {
  LocalCommunicator c;
  Tensor in = iota(12, DType::BFloat16), out = Tensor::zeros({3, 4}, DType::BFloat16);
  c.allgather(in, out);
  expect_equal(out.flatten(), in);
  Tensor t = iota(5, DType::Int64);
  c.broadcast(t, 0);
  expect_equal(t, iota(5, DType::Int64));
  EXPECT_THROW(c.broadcast(t, 1), ValueError);
  c.barrier();
  auto w = c.barrier_async();
  EXPECT_TRUE(w->is_completed());
  w->wait(std::chrono::milliseconds(1));
}

TEST(LocalCommunicator, SendRecvToSelfPairInEitherOrder) {
  LocalCommunicator c;
  Tensor a = iota(6, DType::Float32), b = Tensor::zeros({6});
  c.send(a, 0, 7);  // buffered: the sender may reuse its tensor
  a.fill_(-1);
  c.recv(b, 0, 7);
  expect_equal(b, iota(6, DType::Float32));

  Tensor r = Tensor::zeros({6});
  auto recv = c.recv_async(r, 0, 3);
  EXPECT_FALSE(recv->is_completed());
  c.send(iota(6, DType::Float32), 0, 3);
  EXPECT_TRUE(recv->is_completed());
  expect_equal(r, iota(6, DType::Float32));
}

TEST(LocalCommunicator, RecvWithoutSendFailsAtOnceInsteadOfHanging) {
  LocalCommunicator c;
  Tensor r = Tensor::zeros({2});
  try {
    c.recv(r, 0, 9);
    FAIL() << "expected CommError";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("recv(from rank 0, tag 9"), std::string::npos) << e.what();
  }
}

TEST(LocalCommunicator, RejectsBadArguments) {
  LocalCommunicator c;
  EXPECT_THROW(c.allreduce(Tensor::zeros({4}), Tensor::zeros({5})), ShapeError);
  EXPECT_THROW(c.allreduce(Tensor::zeros({4}), Tensor::zeros({4}, DType::Float64)), DTypeError);
  EXPECT_THROW(c.allreduce(Tensor::zeros({4}, DType::Bool)), DTypeError);
  EXPECT_THROW(c.allreduce(Tensor::zeros({4, 3}).t()), ValueError);  // not contiguous
  EXPECT_THROW(c.send(Tensor::zeros({1}), 1, 0), ValueError);
}

TEST(CommunicatorFactory, NamesAndOps) {
  EXPECT_EQ(parse_comm_backend("mpi"), CommBackend::Mpi);
  EXPECT_EQ(parse_comm_backend("local"), CommBackend::Local);
  EXPECT_THROW(parse_comm_backend("gloo"), ConfigError);
  EXPECT_EQ(parse_reduce_op("prod"), ReduceOp::Product);
  EXPECT_STREQ(reduce_op_name(ReduceOp::Avg), "avg");
  try {
    parse_reduce_op("mean");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("sum, avg, max, min, prod"), std::string::npos);
  }
  EXPECT_EQ(make_communicator(CommBackend::Local)->size(), 1);
}

TEST(CommunicatorFactory, BackendsNotBuiltSaySo) {
  EXPECT_TRUE(comm_backend_compiled_in(CommBackend::Local));
  // Asking for MPI in a build without it names the missing piece (checked without creating an
  // MPI communicator, so this test never needs mpirun).
  if (!comm_backend_compiled_in(CommBackend::Mpi)) {
    try {
      make_communicator(CommBackend::Mpi);
      FAIL();
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("built without MPI"), std::string::npos) << e.what();
    }
  }
  // Built with NCCL, make_communicator(Nccl) would bring up MPI and a GPU: nccl_np1 (label gpu)
  // tests that under mpirun.
  if (!comm_backend_compiled_in(CommBackend::Nccl)) EXPECT_THROW(make_communicator(CommBackend::Nccl), ConfigError);
}

TEST(ChunkRule, FirstRanksGetTheRemainder) {
  EXPECT_EQ(chunk_count(10, 4, 0), 3);
  EXPECT_EQ(chunk_count(10, 4, 1), 3);
  EXPECT_EQ(chunk_count(10, 4, 2), 2);
  EXPECT_EQ(chunk_offset(10, 4, 2), 6);
  EXPECT_EQ(chunk_offset(10, 4, 3), 8);
  EXPECT_EQ(chunk_count(1, 3, 2), 0);
}
