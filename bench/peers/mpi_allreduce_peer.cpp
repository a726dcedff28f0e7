// The plain-MPI twin of bench/allreduce_perf: the same flags, sizes, data, checks and output
// (allreduce_perf_format.h), but each operation is one blocking MPI_Allreduce on
// MPI_COMM_WORLD - what an MPI user would write by hand. Tandem's MPI backend should reach at
// least 0.9x its busbw from 1 MiB up (bench/run_allreduce.sh prints the ratios).
// avg: MPI has no average op, so it is MPI_SUM followed by a division, as in Tandem.
// Run: mpirun -np 2 build/bin/mpi_allreduce_peer -b 1M -e 64M -f 2 -n 20 -w 5
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "bench/allreduce_perf_format.h"

using namespace tandem::bench;

namespace {

struct Buffer {
  std::vector<unsigned char> bytes;
  MPI_Datatype type;
  std::string name;
  int64_t count;
};

template <typename T>
void fill_typed(Buffer& b, int rank) {
  T* p = reinterpret_cast<T*>(b.bytes.data());
  for (int64_t i = 0; i < b.count; ++i) p[i] = T(perf_value(rank, i));
}
template <typename T>
void divide_typed(Buffer& b, int n) {
  T* p = reinterpret_cast<T*>(b.bytes.data());
  for (int64_t i = 0; i < b.count; ++i) p[i] = T(p[i] / T(n));
}
template <typename T>
int64_t wrong_typed(const Buffer& b, int n, const std::string& op) {
  const T* p = reinterpret_cast<const T*>(b.bytes.data());
  const bool integer = std::is_integral_v<T>;
  int64_t wrong = 0;
  for (int64_t i = 0; i < b.count; ++i) {
    double e = perf_expected(n, i, op, integer);
    wrong += std::abs(double(p[i]) - e) > (integer ? 0.0 : 1e-6 * std::max(1.0, std::abs(e)));
  }
  return wrong;
}

// Calls f<T> for the buffer's element type.
#define PEER_DISPATCH(name, f, ...)                                  \
  (name == "float"    ? f<float>(__VA_ARGS__)                        \
   : name == "double" ? f<double>(__VA_ARGS__)                       \
   : name == "int32"  ? f<int32_t>(__VA_ARGS__)                      \
                      : f<int64_t>(__VA_ARGS__))

MPI_Datatype mpi_type(const std::string& name) {
  return name == "float" ? MPI_FLOAT : name == "double" ? MPI_DOUBLE : name == "int32" ? MPI_INT32_T : MPI_INT64_T;
}
MPI_Op mpi_op(const std::string& op) {
  return op == "prod" ? MPI_PROD : op == "max" ? MPI_MAX : op == "min" ? MPI_MIN : MPI_SUM;
}

void allreduce(const Buffer& send, Buffer& recv, bool in_place, const std::string& op, int n) {
  MPI_Allreduce(in_place ? MPI_IN_PLACE : send.bytes.data(), recv.bytes.data(), int(recv.count), recv.type,
                mpi_op(op), MPI_COMM_WORLD);
  if (op == "avg") PEER_DISPATCH(recv.name, divide_typed, recv, n);
}

PerfResult run_size(const AllreducePerfArgs& a, int64_t bytes, bool in_place, int rank, int n) {
  const int64_t es = perf_dtype_size(a.datatype);
  Buffer send{std::vector<unsigned char>(size_t(bytes)), mpi_type(a.datatype), a.datatype, bytes / es};
  Buffer other{in_place ? std::vector<unsigned char>() : std::vector<unsigned char>(size_t(bytes)), send.type,
               a.datatype, send.count};
  Buffer& recv = in_place ? send : other;
  PEER_DISPATCH(a.datatype, fill_typed, send, rank);
  for (int i = 0; i < a.warmup; ++i) allreduce(send, recv, in_place, a.op, n);
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int i = 0; i < a.iters; ++i) allreduce(send, recv, in_place, a.op, n);
  double us = (MPI_Wtime() - start) * 1e6 / a.iters;
  long long wrong = 0;
  if (a.check) {
    if (in_place) {
      PEER_DISPATCH(a.datatype, fill_typed, send, rank);
      allreduce(send, recv, true, a.op, n);
    }
    wrong = PEER_DISPATCH(a.datatype, wrong_typed, recv, n, a.op);
  }
  double us_sum = 0;
  long long wrong_sum = 0;
  MPI_Allreduce(&us, &us_sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&wrong, &wrong_sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return perf_result(bytes, n, us_sum / n, wrong_sum);
}

}  // namespace

// allreduce_perf's flags that the peer takes (the others exit 2 saying so).
const char* peer_usage() {
  return "flags (nccl-tests' spellings; -x V, -xV, --long V and --long=V all work):\n"
         "  -b,--minbytes  -e,--maxbytes  bytes, suffix K, M or G (default 32M)\n"
         "  -f,--stepfactor N (>= 2, default 2)   -i,--stepbytes N (additive steps instead)\n"
         "  -n,--iters N (20)  -w,--warmup_iters N (5)  -c,--check N (1; 0: no check)\n"
         "  -d,--datatype float|double|int32|int64 (float)   -o,--op sum|prod|max|min|avg (sum)\n"
         "  -z,--blocking 1  -C,--report_cputime 0|1  -t,--nthreads 1  -g,--ngpus 1  -p,--parallel_init 0\n"
         "  -y,--stream_null 0  -G,--cudagraph 0  -R,--local_register 0   --backend mpi\n";
}

int main(int argc, char** argv) {
  AllreducePerfArgs args;
  try {
    args = parse_allreduce_perf_args(argc, argv, {"mpi"});
    // The peer is the baseline for one type, one op, one sweep: what allreduce_perf adds on top
    // of that is refused rather than ignored.
    for (const auto& flag : args.given) {
      if (flag == "agg_iters" || flag == "run_cycles" || flag == "average" || flag == "timeout")
        throw tandem::ConfigError("--" + flag + ": the plain-MPI peer does not implement it; run it without");
    }
    if (args.datatype == "all" || args.datatype == "half" || args.datatype == "bfloat16")
      throw tandem::ConfigError("-d " + args.datatype + ": the plain-MPI peer reduces float, double, int32 and int64 "
                                "only (MPI has no 16-bit float types)");
    if (args.op == "all") throw tandem::ConfigError("-o all: the plain-MPI peer runs one op; give sum, prod, max, min or avg");
    perf_sizes(args, args.datatype);
  } catch (const tandem::ConfigError& e) {
    if (std::string(e.what()) == "usage") {
      std::printf("usage: mpi_allreduce_peer [flags]\n%s", peer_usage());
      return 0;
    }
    std::fprintf(stderr, "mpi_allreduce_peer: %s\n%s", e.what(), peer_usage());
    return 2;
  }
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  constexpr int kLine = 96;
  char mine[kLine] = {0}, host[64] = {0};
  gethostname(host, sizeof host - 1);
  std::snprintf(mine, sizeof mine, "Rank %2d Pid %6d on %10s device cpu (plain MPI_Allreduce)", rank, int(getpid()), host);
  std::vector<char> all(size_t(kLine) * size_t(n));
  MPI_Allgather(mine, kLine, MPI_CHAR, all.data(), kLine, MPI_CHAR, MPI_COMM_WORLD);
  std::vector<std::string> lines;
  for (int r = 0; r < n; ++r) lines.emplace_back(&all[size_t(r) * kLine], strnlen(&all[size_t(r) * kLine], kLine));
  if (rank == 0) print_perf_header(args, "MPI_Allreduce peer", lines);
  double busbw_sum = 0;
  int64_t wrong_total = 0, results = 0;
  for (int64_t bytes : perf_sizes(args, args.datatype)) {
    PerfResult oop = run_size(args, bytes, false, rank, n);
    PerfResult ip = run_size(args, bytes, true, rank, n);
    if (rank == 0) print_perf_row(bytes, bytes / perf_dtype_size(args.datatype), args, oop, ip);
    busbw_sum += oop.busbw + ip.busbw;
    wrong_total += oop.wrong + ip.wrong;
    results += 2;
  }
  if (rank == 0) print_perf_footer(wrong_total, results ? busbw_sum / double(results) : 0);
  MPI_Finalize();
  return wrong_total ? 1 : 0;
}
