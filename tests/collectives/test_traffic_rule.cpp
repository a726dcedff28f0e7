// The bytes-sent rule (ring_bytes_sent) with hand-derived numbers, and the local communicator's
// counters (a world of one sends nothing, but its calls are counted). No MPI needed.
#include <gtest/gtest.h>

#include "base/error.h"
#include "collectives/local_communicator.h"

using namespace tandem;
using namespace tandem::collectives;

// 10 elements: chunks 10 | 5,5 | 4,3,3 | 3,3,2,2, so "every chunk but mine" is
// 0 | 5,5 | 6,7,7 | 7,7,8,8 elements.
TEST(TrafficRule, RingSendsEveryChunkButItsOwn) {
  const std::vector<std::vector<int64_t>> others = {{0}, {5, 5}, {6, 7, 7}, {7, 7, 8, 8}};
  for (int w = 1; w <= 4; ++w) {
    for (int r = 0; r < w; ++r) {
      const int64_t o = others[size_t(w - 1)][size_t(r)];
      EXPECT_EQ(ring_bytes_sent(CommOp::Allreduce, 10, 4, w, r), 2 * o * 4) << "W=" << w << " rank " << r;
      EXPECT_EQ(ring_bytes_sent(CommOp::ReduceScatter, 10, 4, w, r), o * 4) << "W=" << w << " rank " << r;
      EXPECT_EQ(ring_bytes_sent(CommOp::Allgather, 10, 8, w, r), o * 8) << "W=" << w << " rank " << r;
    }
  }
  // W=4, 1000 float32 (4000 bytes): every rank sends 2 x 3/4 x 4000 = 6000 bytes per allreduce.
  for (int r = 0; r < 4; ++r) EXPECT_EQ(ring_bytes_sent(CommOp::Allreduce, 1000, 4, 4, r), 6000);
}

TEST(TrafficRule, SumOverRanksIsTheRingVolume) {
  // Whatever the split, the ranks together send 2(W-1) B per allreduce and (W-1) B per
  // reduce_scatter or allgather: the mean per rank is 2(W-1)/W B and (W-1)/W B.
  for (int w = 1; w <= 4; ++w)
    for (int64_t n : {1, 7, 10, 4099}) {
      int64_t allreduce = 0, scatter = 0;
      for (int r = 0; r < w; ++r) {
        allreduce += ring_bytes_sent(CommOp::Allreduce, n, 4, w, r);
        scatter += ring_bytes_sent(CommOp::ReduceScatter, n, 4, w, r);
      }
      EXPECT_EQ(allreduce, 2 * (w - 1) * n * 4) << "W=" << w << " n=" << n;
      EXPECT_EQ(scatter, (w - 1) * n * 4) << "W=" << w << " n=" << n;
    }
}

TEST(TrafficRule, CompressedAndFloatPayloadsCountTheirBytes) {
  // 8-bit codes of 4000 elements are as many bytes as 1000 float32: the rule sees bytes only.
  // Chunks are cut in elements, so a rank's count can differ by a few bytes when W does not
  // divide the count (W=3: 1334 codes vs 334 floats); the ranks' total never does.
  for (int w = 1; w <= 4; ++w) {
    int64_t codes = 0, floats = 0;
    for (int r = 0; r < w; ++r) {
      codes += ring_bytes_sent(CommOp::Allreduce, 4000, 1, w, r);
      floats += ring_bytes_sent(CommOp::Allreduce, 1000, 4, w, r);
      if (w != 3) EXPECT_EQ(ring_bytes_sent(CommOp::Allreduce, 4000, 1, w, r), ring_bytes_sent(CommOp::Allreduce, 1000, 4, w, r));
    }
    EXPECT_EQ(codes, floats) << "W=" << w;
    EXPECT_EQ(codes, 2 * (w - 1) * 4000) << "W=" << w;
  }
  EXPECT_EQ(ring_bytes_sent(CommOp::Allreduce, 4000, 1, 3, 0), 2 * (4000 - 1334));
  EXPECT_EQ(ring_bytes_sent(CommOp::Allreduce, 1000, 4, 3, 0), 2 * (1000 - 334) * 4);
}

TEST(TrafficRule, BroadcastAndSend) {
  EXPECT_EQ(ring_bytes_sent(CommOp::Broadcast, 7, 8, 3, 2, /*root=*/2), 56);
  EXPECT_EQ(ring_bytes_sent(CommOp::Broadcast, 7, 8, 3, 0, /*root=*/2), 0);
  EXPECT_EQ(ring_bytes_sent(CommOp::Broadcast, 7, 8, 1, 0, /*root=*/0), 0);  // nobody to send to
  EXPECT_EQ(ring_bytes_sent(CommOp::Send, 3, 4, 2, 0, /*dst=*/1), 12);
  EXPECT_EQ(ring_bytes_sent(CommOp::Send, 3, 4, 2, 1, /*dst=*/1), 0);  // to itself
}

TEST(TrafficCounters, LocalWorldSendsNothingButCountsCalls) {
  LocalCommunicator c;
  Tensor t = Tensor::ones({10});
  c.allreduce(t);
  c.reduce_scatter(t, Tensor::zeros({10}));
  c.allgather(t, Tensor::zeros({10}));
  c.broadcast(t, 0);
  c.send(t, 0, 3);
  c.recv(Tensor::zeros({10}), 0, 3);
  const CommTraffic traffic = c.traffic();
  EXPECT_EQ(traffic.total_bytes(), 0);
  for (CommOp op : {CommOp::Allreduce, CommOp::ReduceScatter, CommOp::Allgather, CommOp::Broadcast, CommOp::Send})
    EXPECT_EQ(traffic.calls_of(op), 1) << comm_op_name(op);
  // A call refused by its checks counts nothing.
  EXPECT_THROW(c.allreduce(Tensor::zeros({4}), Tensor::zeros({5})), ShapeError);
  EXPECT_EQ(c.traffic().calls_of(CommOp::Allreduce), 1);
}

TEST(TrafficCounters, DifferenceIsWhatWasSentInBetween) {
  CommTraffic a, b;
  a.bytes[size_t(CommOp::Allreduce)] = 100;
  a.calls[size_t(CommOp::Allreduce)] = 2;
  b = a;
  b.bytes[size_t(CommOp::Allgather)] = 30;
  b.calls[size_t(CommOp::Allgather)] = 1;
  b.bytes[size_t(CommOp::Allreduce)] += 50;
  const CommTraffic d = b - a;
  EXPECT_EQ(d.bytes_of(CommOp::Allreduce), 50);
  EXPECT_EQ(d.calls_of(CommOp::Allreduce), 0);
  EXPECT_EQ(d.bytes_of(CommOp::Allgather), 30);
  EXPECT_EQ(d.total_bytes(), 80);
  CommTraffic sum = a;
  sum += d;
  EXPECT_EQ(sum.total_bytes(), b.total_bytes());
}
