// Every collective x dtype x op on the MPI backend against a computed expectation, in place and
// out of place, with element counts that do not divide by the world size.
#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "collectives/collective_checks.h"
#include "mpi_test_world.h"

using namespace tandem;
using namespace tandem::collectives;
using tandem::collectives::mpitest::contribution_tensor;
using tandem::collectives::mpitest::expected_reduction;
using tandem::collectives::mpitest::g_world;

namespace {

const DType kReducible[] = {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::UInt8};
const DType kMovable[] = {DType::Float32, DType::Float64, DType::Int32, DType::Int64,
                          DType::UInt8,   DType::Float16, DType::BFloat16, DType::Bool};
const ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Product};

// Checks got[i] == expected(offset + i) (exact for integers, 1e-6 relative for floats).
template <typename F>
void expect_values(const Tensor& got, int64_t offset, F expected, const std::string& what) {
  auto v = got.to_vector<double>();
  const double tol = is_floating(got.dtype()) ? 1e-6 : 0.0;
  int wrong = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    double e = expected(offset + int64_t(i));
    if (std::abs(v[i] - e) > tol * std::max(1.0, std::abs(e)) && wrong++ < 3)
      ADD_FAILURE() << what << " element " << offset + int64_t(i) << ": got " << v[i] << ", expected " << e;
  }
  EXPECT_EQ(wrong, 0) << what;
}

// A value that differs per rank and element, exact in every movable dtype (0/1 for bool).
double pattern(int rank, int64_t i, DType dt) {
  return dt == DType::Bool ? double((i + rank) % 2) : double((i * 5 + rank * 17) % 23);
}
Tensor pattern_tensor(int rank, int64_t offset, int64_t n, DType dt) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = pattern(rank, offset + i, dt);
  return Tensor::from_vector(v, {n}).to(dt);
}

}  // namespace

TEST(MpiCollectives, WorldMatchesMpirun) {
  EXPECT_EQ(g_world->backend_name(), "mpi");
  EXPECT_FALSE(g_world->needs_device_tensors());  // it stages device tensors through the host
  EXPECT_EQ(g_world->buffer_device(Device::cuda(0)), Device::cpu());
  EXPECT_GE(g_world->size(), 1);
  // mpirun on one node: everyone shares the node.
  EXPECT_EQ(g_world->local_size(), g_world->size());
  EXPECT_EQ(g_world->local_rank(), g_world->rank());
}

TEST(MpiCollectives, AllreduceEveryDtypeOpInPlaceAndOutOfPlace) {
  const int W = g_world->size(), R = g_world->rank();
  for (DType dt : kReducible)
    for (ReduceOp op : kOps)
      for (int64_t n : {int64_t(1), int64_t(13), int64_t(4099)})
        for (bool in_place : {false, true}) {
          std::string what = std::string("allreduce ") + reduce_op_name(op) + " " + dtype_name(dt) + " n=" +
                             std::to_string(n) + (in_place ? " in place" : " out of place");
          Tensor in = contribution_tensor(R, n, dt, op);
          Tensor out = in_place ? in : Tensor::full({n}, 99, dt);
          if (in_place) g_world->allreduce(in, op);
          else g_world->allreduce(in, out, op);
          expect_values(out, 0, [&](int64_t i) { return expected_reduction(W, i, op, dt); }, what);
          if (!in_place) {  // the input is left alone
            const auto original = contribution_tensor(R, n, dt, op).to_vector<double>();
            expect_values(in, 0, [&](int64_t i) { return original[size_t(i)]; }, what + " input");
          }
        }
}

// In-place allreduces of 32 MiB and more of a host tensor run through a persistent request bound
// to the buffer (persistent_allreduce.h): reused round after round, one per buffer, avg included.
TEST(MpiCollectives, LargeInPlaceAllreduceGivesTheSameResultRoundAfterRound) {
  const int W = g_world->size(), R = g_world->rank();
  const int64_t n = (36 << 20) / 4 + 3;  // 36 MiB of float32, not a multiple of anything
  Tensor a = contribution_tensor(R, n, DType::Float32, ReduceOp::Sum);
  Tensor b = contribution_tensor(R, n, DType::Float32, ReduceOp::Sum);
  auto check = [&](const Tensor& t, double factor, const std::string& what) {
    const auto v = t.to_vector<float>();
    for (int64_t i = 0; i < n; i += (i < 100 ? 1 : 9973))
      ASSERT_EQ(double(v[size_t(i)]), factor * expected_reduction(W, i, ReduceOp::Sum, DType::Float32)) << what << " at " << i;
    ASSERT_EQ(double(v[size_t(n - 1)]), factor * expected_reduction(W, n - 1, ReduceOp::Sum, DType::Float32)) << what;
  };
  g_world->allreduce(a, ReduceOp::Sum);
  check(a, 1.0, "a, round 1");
  g_world->allreduce(b, ReduceOp::Sum);  // another buffer, its own request
  check(b, 1.0, "b, round 1");
  g_world->allreduce(a, ReduceOp::Sum);  // the same buffer again: every rank holds the sum
  check(a, double(W), "a, round 2");
  g_world->allreduce(a, ReduceOp::Avg);  // equal values everywhere: the average keeps them
  check(a, double(W), "a, avg");
  auto w1 = g_world->allreduce_async(b, b, ReduceOp::Max);  // max of equal values: unchanged
  w1->wait();
  check(b, 1.0, "b, max");
}

TEST(MpiCollectives, ReduceScatterUnevenCounts) {
  const int W = g_world->size(), R = g_world->rank();
  for (DType dt : kReducible)
    for (ReduceOp op : kOps)
      for (int64_t n : {int64_t(3 * W), int64_t(3 * W + 1), int64_t(2 * W - 1), int64_t(1)}) {
        Tensor in = contribution_tensor(R, n, dt, op);
        Tensor out = Tensor::full({chunk_count(n, W, R)}, 99, dt);
        g_world->reduce_scatter(in, out, op);
        expect_values(out, chunk_offset(n, W, R), [&](int64_t i) { return expected_reduction(W, i, op, dt); },
                      std::string("reduce_scatter ") + reduce_op_name(op) + " " + dtype_name(dt) + " n=" +
                          std::to_string(n));
      }
}

TEST(MpiCollectives, ReduceScatterRejectsAWrongChunk) {
  const int W = g_world->size();
  Tensor in = Tensor::zeros({4 * W});
  EXPECT_THROW(g_world->reduce_scatter(in, Tensor::zeros({4 * W + 1})), ShapeError);
}

TEST(MpiCollectives, AllgatherUnevenCountsEveryDtype) {
  const int W = g_world->size(), R = g_world->rank();
  for (DType dt : kMovable)
    for (int64_t n : {int64_t(5 * W), int64_t(5 * W + 2), int64_t(1)}) {
      Tensor in = pattern_tensor(R, chunk_offset(n, W, R), chunk_count(n, W, R), dt);
      Tensor out = Tensor::zeros({n}, dt);
      g_world->allgather(in, out);
      // Element i came from the rank whose chunk holds i.
      auto owner = [&](int64_t i) {
        int r = 0;
        while (chunk_offset(n, W, r) + chunk_count(n, W, r) <= i) ++r;
        return r;
      };
      expect_values(out, 0, [&](int64_t i) { return pattern(owner(i), i, dt); },
                    std::string("allgather ") + dtype_name(dt) + " n=" + std::to_string(n));
    }
}

TEST(MpiCollectives, BroadcastFromEveryRootEveryDtype) {
  const int W = g_world->size(), R = g_world->rank();
  for (DType dt : kMovable)
    for (int root = 0; root < W; ++root) {
      Tensor t = pattern_tensor(R, 0, 257, dt);
      g_world->broadcast(t, root);
      expect_values(t, 0, [&](int64_t i) { return pattern(root, i, dt); },
                    std::string("broadcast ") + dtype_name(dt) + " root " + std::to_string(root));
    }
  EXPECT_THROW(g_world->broadcast(Tensor::zeros({1}), W), ValueError);
}

TEST(MpiCollectives, SendRecvAroundTheRing) {
  const int W = g_world->size(), R = g_world->rank();
  const int next = (R + 1) % W, prev = (R + W - 1) % W;
  for (DType dt : kMovable) {
    Tensor out = pattern_tensor(R, 0, 1000, dt);
    Tensor in = Tensor::zeros({1000}, dt);
    auto r = g_world->recv_async(in, prev, 5);
    auto s = g_world->send_async(out, next, 5);
    s->wait();
    r->wait();
    expect_values(in, 0, [&](int64_t i) { return pattern(prev, i, dt); }, std::string("recv ") + dtype_name(dt));
  }
}

// One exchange with both ring neighbours (at 2 ranks the same peer twice, told apart by tag and
// by order; at 1 rank, oneself): every message lands where its tag says, and the sends count.
TEST(MpiCollectives, ExchangeWithBothNeighboursInOneCall) {
  const int W = g_world->size(), R = g_world->rank();
  const int next = (R + 1) % W, prev = (R + W - 1) % W;
  const int64_t n = 500;
  const Tensor to_next = pattern_tensor(R, 0, n, DType::Float32), to_prev = pattern_tensor(R, 1000, n, DType::Float32);
  const Tensor from_prev = Tensor::zeros({n}), from_next = Tensor::zeros({n});
  const CommTraffic before = g_world->traffic();
  using Kind = PeerTransfer::Kind;
  WorkHandle work = g_world->exchange_async({{Kind::Recv, from_prev, prev, 6}, {Kind::Recv, from_next, next, 7},
                                             {Kind::Send, to_next, next, 6}, {Kind::Send, to_prev, prev, 7}});
  work->wait();
  EXPECT_TRUE(work->is_completed());
  EXPECT_EQ(work->description(), "exchange(2 send(s), 2 receive(s))");
  expect_values(from_prev, 0, [&](int64_t i) { return pattern(prev, i, DType::Float32); }, "from prev");
  expect_values(from_next, 1000, [&](int64_t i) { return pattern(next, i, DType::Float32); }, "from next");
  EXPECT_EQ((g_world->traffic() - before).bytes_of(CommOp::Send), W == 1 ? 0 : 2 * n * 4);
}

TEST(MpiCollectives, AsyncOperationsCompleteInAnyWaitOrder) {
  const int W = g_world->size(), R = g_world->rank();
  std::vector<Tensor> buffers;
  std::vector<WorkHandle> works;
  for (int k = 0; k < 4; ++k) {
    buffers.push_back(contribution_tensor(R, 10000 + k, DType::Float32, ReduceOp::Sum));
    works.push_back(g_world->allreduce_async(buffers.back(), ReduceOp::Sum));
  }
  for (int k = 3; k >= 0; --k) {
    works[size_t(k)]->wait(std::chrono::seconds(30));
    EXPECT_TRUE(works[size_t(k)]->is_completed());
    expect_values(buffers[size_t(k)], 0, [&](int64_t i) { return expected_reduction(W, i, ReduceOp::Sum, DType::Float32); },
                  "async allreduce " + std::to_string(k));
  }
  auto b = g_world->barrier_async();
  while (!b->is_completed()) {
  }
  EXPECT_NE(works[0]->description().find("allreduce(sum, float32, 10000 elements"), std::string::npos)
      << works[0]->description();
}

// float16 and bfloat16 reduce through MPI user operations: on small integers (exact in both
// types) every op gives exactly the expectation rounded once to the type, avg included.
TEST(MpiCollectives, HalfPrecisionReductionsAreExact) {
  const int W = g_world->size(), R = g_world->rank();
  const int64_t n = 1000;
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min, ReduceOp::Product}) {
      std::vector<float> mine(n);
      for (int64_t i = 0; i < n; ++i) mine[size_t(i)] = float((i * 3 + R) % 5 - 2);
      Tensor t = Tensor::from_vector<float>(mine, {n}).to(dt);
      g_world->allreduce(t, op);
      const std::vector<float> got = t.to(DType::Float32).to_vector<float>();
      for (int64_t i = 0; i < n; ++i) {
        double e = double((i * 3) % 5 - 2);
        for (int r = 1; r < W; ++r) {
          const double v = double((i * 3 + r) % 5 - 2);
          e = op == ReduceOp::Max ? std::max(e, v) : op == ReduceOp::Min ? std::min(e, v)
            : op == ReduceOp::Product ? e * v : e + v;
        }
        if (op == ReduceOp::Avg) e /= W;
        const float expected = Tensor::from_vector<float>({float(e)}, {1}).to(dt).to(DType::Float32).item();
        ASSERT_EQ(got[size_t(i)], expected) << dtype_name(dt) << " " << reduce_op_name(op) << " element " << i;
      }
    }
  }
}

TEST(MpiCollectives, BadArgumentsAreTypedErrors) {
  EXPECT_THROW(g_world->allreduce(Tensor::zeros({4}), Tensor::zeros({5})), ShapeError);
  EXPECT_THROW(g_world->allreduce(Tensor::zeros({4}), Tensor::zeros({4}, DType::Int32)), DTypeError);
  EXPECT_THROW(g_world->allreduce(Tensor::zeros({3, 2}).t()), ValueError);
  EXPECT_THROW(g_world->send(Tensor::zeros({1}), g_world->size(), 0), ValueError);
  EXPECT_THROW(g_world->send(Tensor::zeros({1}), 0, -1), ValueError);
  g_world->barrier();  // argument errors happen before any MPI call, so ranks stay in step
}
