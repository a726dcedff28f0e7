// The MPI communicator's bytes-sent counters at 1-4 ranks, against hand-derived numbers: the
// ring rule (collectives/communicator.h) for 10 elements, whose chunks are 10 | 5,5 | 4,3,3 |
// 3,3,2,2, so a rank sends "every chunk but its own": 0 | 5,5 | 6,7,7 | 7,7,8,8 elements.
#include <gtest/gtest.h>

#include "mpi_test_world.h"

using namespace tandem;
using namespace tandem::collectives;
using tandem::collectives::mpitest::g_world;

namespace {
int64_t others_of_ten(int world, int rank) {
  const std::vector<std::vector<int64_t>> table = {{0}, {5, 5}, {6, 7, 7}, {7, 7, 8, 8}};
  return table.at(size_t(world - 1)).at(size_t(rank));
}
}  // namespace

TEST(MpiTraffic, EachOperationCountsTheRingRule) {
  const int W = g_world->size(), R = g_world->rank();
  ASSERT_LE(W, 4);
  const int64_t o = others_of_ten(W, R);

  CommTraffic before = g_world->traffic();
  g_world->allreduce(Tensor::ones({10}), ReduceOp::Sum);  // float32
  CommTraffic d = g_world->traffic() - before;
  EXPECT_EQ(d.bytes_of(CommOp::Allreduce), 2 * o * 4);
  EXPECT_EQ(d.calls_of(CommOp::Allreduce), 1);
  EXPECT_EQ(d.total_bytes(), 2 * o * 4);

  before = g_world->traffic();
  g_world->allreduce(Tensor::ones({40}, DType::UInt8), ReduceOp::Max);  // 40 bytes, as 10 float32
  d = g_world->traffic() - before;
  const int64_t others_of_forty = 40 - chunk_count(40, W, R);
  EXPECT_EQ(d.bytes_of(CommOp::Allreduce), 2 * others_of_forty);

  before = g_world->traffic();
  g_world->reduce_scatter(Tensor::ones({10}, DType::UInt8), Tensor::zeros({chunk_count(10, W, R)}, DType::UInt8));
  g_world->allgather(Tensor::ones({chunk_count(10, W, R)}, DType::Int64), Tensor::zeros({10}, DType::Int64));
  d = g_world->traffic() - before;
  EXPECT_EQ(d.bytes_of(CommOp::ReduceScatter), o);
  EXPECT_EQ(d.bytes_of(CommOp::Allgather), o * 8);

  before = g_world->traffic();
  g_world->broadcast(Tensor::ones({7}, DType::Float64), W - 1);
  d = g_world->traffic() - before;
  EXPECT_EQ(d.bytes_of(CommOp::Broadcast), R == W - 1 && W > 1 ? 56 : 0);

  before = g_world->traffic();
  const int next = (R + 1) % W, prev = (R + W - 1) % W;
  Tensor incoming = Tensor::zeros({3}, DType::Int32);
  WorkHandle recv = g_world->recv_async(incoming, prev, 5);
  g_world->send(Tensor::ones({3}, DType::Int32), next, 5);
  recv->wait();
  d = g_world->traffic() - before;
  EXPECT_EQ(d.bytes_of(CommOp::Send), W > 1 ? 12 : 0);  // one rank sends to itself: nothing on the wire
  EXPECT_EQ(d.calls_of(CommOp::Send), 1);
  g_world->barrier();
}

TEST(MpiTraffic, MeanOverRanksIsTheRingVolume) {
  // 4099 float32 (16396 bytes): the ranks' counts sum to 2(W-1) x 16396 for an allreduce.
  const int W = g_world->size();
  const CommTraffic before = g_world->traffic();
  g_world->allreduce(Tensor::ones({4099}), ReduceOp::Avg);
  const int64_t mine = (g_world->traffic() - before).total_bytes();
  Tensor total = Tensor::scalar(double(mine), DType::Int64);
  g_world->allreduce(total, ReduceOp::Sum);
  EXPECT_EQ(int64_t(total.item()), 2 * (W - 1) * 16396);
}
