// allreduce_perf: allreduce bandwidth through Tandem's Communicator, with nccl-tests' flags and
// columns (see allreduce_perf_format.h), so its lines compare with all_reduce_perf's and with
// the plain-MPI peer's (bench/peers/mpi_allreduce_peer.cpp).
// Run: mpirun -np 2 build/bin/allreduce_perf -b 1M -e 64M -f 2 -n 20 -w 5 -c 1 -d float -o sum
//      bench/run_allreduce.sh   (runs this and the peer on the same ranks, prints busbw ratios)
// Each size: `warmup` untimed operations, a barrier, then `iters` timed ones; time = mean per
// operation, averaged over ranks. With -c 1 the result of the timed out-of-place run and of one
// fresh in-place run are checked against the exact expectation (#wrong = elements that differ,
// summed over ranks). Exit 2 on bad flags, 1 on runtime errors.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "bench/allreduce_perf_format.h"
#include "collectives/communicator_factory.h"

using namespace tandem;
using namespace tandem::collectives;
using namespace tandem::bench;

namespace {

DType perf_dtype(const std::string& name) {
  if (name == "half") return DType::Float16;
  if (name == "bfloat16") return DType::BFloat16;
  if (name == "float") return DType::Float32;
  if (name == "double") return DType::Float64;
  if (name == "int32") return DType::Int32;
  return DType::Int64;
}

template <typename T>
void fill_typed(T* p, int64_t n, int rank) {
  for (int64_t i = 0; i < n; ++i) p[i] = T(perf_value(rank, i));
}
template <typename T>
int64_t count_wrong_typed(const T* p, int64_t n, int nranks, const std::string& op) {
  int64_t wrong = 0;
  const bool integer = std::is_integral_v<T>;
  for (int64_t i = 0; i < n; ++i) {
    double e = perf_expected(nranks, i, op, integer), g = double(p[i]);
    double tol = integer ? 0.0 : 1e-6 * std::max(1.0, std::abs(e));
    wrong += std::abs(g - e) > tol;
  }
  return wrong;
}

// float16/bfloat16: filled with the same small integers (exact in both) and checked bit for bit
// against the expectation rounded once to the type.
void fill_half(const Tensor& t, int rank) {
  auto* p = static_cast<uint16_t*>(t.raw_data());
  const bool half = t.dtype() == DType::Float16;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = float(perf_value(rank, i));
    p[i] = half ? float_to_half(v) : float_to_bf16(v);
  }
}
int64_t count_wrong_half(const Tensor& t, int nranks, const std::string& op) {
  const auto* p = static_cast<const uint16_t*>(t.raw_data());
  const bool half = t.dtype() == DType::Float16;
  int64_t wrong = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float e = float(perf_expected(nranks, i, op, false));
    wrong += p[i] != (half ? float_to_half(e) : float_to_bf16(e));
  }
  return wrong;
}

void fill(const Tensor& t, int rank) {
  switch (t.dtype()) {
    case DType::Float16: case DType::BFloat16: return fill_half(t, rank);
    case DType::Float32: return fill_typed(static_cast<float*>(t.raw_data()), t.numel(), rank);
    case DType::Float64: return fill_typed(static_cast<double*>(t.raw_data()), t.numel(), rank);
    case DType::Int32: return fill_typed(static_cast<int32_t*>(t.raw_data()), t.numel(), rank);
    default: return fill_typed(static_cast<int64_t*>(t.raw_data()), t.numel(), rank);
  }
}
int64_t count_wrong(const Tensor& t, int nranks, const std::string& op) {
  switch (t.dtype()) {
    case DType::Float16: case DType::BFloat16: return count_wrong_half(t, nranks, op);
    case DType::Float32: return count_wrong_typed(static_cast<float*>(t.raw_data()), t.numel(), nranks, op);
    case DType::Float64: return count_wrong_typed(static_cast<double*>(t.raw_data()), t.numel(), nranks, op);
    case DType::Int32: return count_wrong_typed(static_cast<int32_t*>(t.raw_data()), t.numel(), nranks, op);
    default: return count_wrong_typed(static_cast<int64_t*>(t.raw_data()), t.numel(), nranks, op);
  }
}

// A per-rank time as -a asks: rank 0's (0), the mean (1), min (2) or max (3) over ranks; and
// the sum of wrong counts (on the backend's device).
double time_over_ranks(Communicator& c, double v, Device dev, int average) {
  if (average == 0 && c.rank() != 0) v = 0;
  Tensor t = Tensor::scalar(v, DType::Float64).to(dev);
  c.allreduce(t, average == 0 ? ReduceOp::Sum : average == 1 ? ReduceOp::Avg : average == 2 ? ReduceOp::Min : ReduceOp::Max);
  return t.to(Device::cpu()).item();
}
int64_t sum_over_ranks(Communicator& c, int64_t v, Device dev) {
  Tensor t = Tensor::scalar(double(v), DType::Int64).to(dev);
  c.allreduce(t, ReduceOp::Sum);
  return int64_t(t.to(Device::cpu()).item());
}

// Buffers live where the backend moves them: host memory for mpi/local, this rank's GPU for nccl
// (filled and checked through host copies, outside the timed loop).
// Each timed iteration runs -m operations back to back; the time is per operation.
PerfResult run_size(Communicator& c, const AllreducePerfArgs& a, int64_t bytes, bool in_place, Device dev) {
  const DType dt = perf_dtype(a.datatype);
  const int64_t count = bytes / int64_t(dtype_size(dt));
  const ReduceOp op = parse_reduce_op(a.op);
  auto filled = [&] {
    Tensor host = Tensor::empty({count}, dt);
    fill(host, c.rank());
    return host.to(dev);
  };
  Tensor send = filled();
  Tensor recv = in_place ? send : Tensor::empty({count}, dt, dev);
  for (int i = 0; i < a.warmup; ++i) c.allreduce(send, recv, op);
  c.barrier();
  const auto start = std::chrono::steady_clock::now();
  const int64_t ops = int64_t(a.iters) * a.agg_iters;
  for (int64_t i = 0; i < ops; ++i) c.allreduce(send, recv, op);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / double(ops);
  int64_t wrong = 0;
  for (int k = 0; k < a.check; ++k) {  // the timed in-place runs reduced again and again: check fresh ones
    if (in_place || k > 0) {
      send.copy_(filled());
      c.allreduce(send, recv, op);
    }
    wrong += count_wrong(recv.to(Device::cpu()), c.size(), a.op);
  }
  return perf_result(bytes, c.size(), time_over_ranks(c, us, dev, a.average), sum_over_ranks(c, wrong, dev));
}

// "Rank  0 Pid  1234 on host device cpu (mpi)" for every rank, gathered to all.
std::vector<std::string> rank_lines(Communicator& c, Device dev) {
  constexpr int64_t kLine = 96;
  char mine[kLine] = {0}, host[64] = {0};
  gethostname(host, sizeof host - 1);
  std::snprintf(mine, sizeof mine, "Rank %2d Pid %6d on %10s device %s (%s backend)", c.rank(), int(getpid()), host,
                dev.str().c_str(), c.backend_name().c_str());
  Tensor in = Tensor::empty({kLine}, DType::UInt8), all = Tensor::empty({kLine * c.size()}, DType::UInt8, dev);
  std::memcpy(in.raw_data(), mine, kLine);
  c.allgather(in.to(dev), all);
  all = all.to(Device::cpu());
  std::vector<std::string> out;
  for (int r = 0; r < c.size(); ++r) {
    const char* p = static_cast<const char*>(all.raw_data()) + r * kLine;
    out.emplace_back(p, strnlen(p, kLine));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  AllreducePerfArgs args;
  CommBackend backend;
  try {
    args = parse_allreduce_perf_args(argc, argv, {"mpi", "nccl", "local"});
    for (const auto& type : args.datatype == "all" ? perf_all_datatypes() : std::vector{args.datatype}) {
      perf_sizes(args, type);  // an empty size range is a flag error, before MPI starts
    }
    backend = parse_comm_backend(args.backend);
    init_comm_runtime(backend, &argc, &argv);
  } catch (const ConfigError& e) {
    if (std::string(e.what()) == "usage") {
      std::printf("usage: allreduce_perf [flags]\n%s", allreduce_perf_usage());
      return 0;
    }
    std::fprintf(stderr, "allreduce_perf: %s\n%s", e.what(), allreduce_perf_usage());
    return 2;
  }
  try {
    CommOptions options;
    if (args.timeout_s > 0) options.timeout = std::chrono::seconds(args.timeout_s);
    auto comm = make_communicator(backend, options);
    // NCCL reduces GPU buffers: this rank's device is its local rank (one GPU per rank).
    const Device dev = backend == CommBackend::Nccl ? Device::cuda(comm->local_rank()) : Device::cpu();
    auto lines = rank_lines(*comm, dev);
    const bool root = comm->rank() == 0;
    if (root) print_perf_header(args, "Tandem allreduce_perf, " + args.backend + " backend", lines);
    double busbw_sum = 0;
    int64_t wrong_total = 0, results = 0;
    const std::vector<std::string> types = args.datatype == "all" ? perf_all_datatypes() : std::vector{args.datatype};
    const std::vector<std::string> ops = args.op == "all" ? perf_all_ops() : std::vector{args.op};
    for (int cycle = 0; args.cycles == 0 || cycle < args.cycles; ++cycle) {
      for (const auto& type : types) {
        for (const auto& op : ops) {
          AllreducePerfArgs one = args;
          one.datatype = type;
          one.op = op;
          for (int64_t bytes : perf_sizes(one, type)) {
            PerfResult oop = run_size(*comm, one, bytes, false, dev);
            PerfResult ip = run_size(*comm, one, bytes, true, dev);
            if (root) print_perf_row(bytes, bytes / perf_dtype_size(type), one, oop, ip);
            busbw_sum += oop.busbw + ip.busbw;
            wrong_total += oop.wrong + ip.wrong;
            results += 2;
          }
        }
      }
    }
    if (root) print_perf_footer(wrong_total, results ? busbw_sum / double(results) : 0);
    return wrong_total ? 1 : 0;
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "allreduce_perf: %s\n", e.what());
    return 2;
  } catch (const DeviceError& e) {  // e.g. nccl without a GPU for this rank: this program's flag for another backend
    std::fprintf(stderr, "allreduce_perf: %s (--backend mpi)\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allreduce_perf: %s\n", e.what());
    return 1;
  }
}
