// Flags and output shared by bench/allreduce_perf (Tandem's communicators) and its peer
// bench/peers/mpi_allreduce_peer.cpp (plain MPI_Allreduce), so the two print lines that compare
// column for column - with each other and with nccl-tests' all_reduce_perf:
//   header lines starting with '#', then per size
//   size count type redop root | out-of-place: time algbw busbw #wrong | in-place: the same
//   "# Out of bounds values : N OK|FAILED" and "# Avg bus bandwidth    : X".
// Times are microseconds per operation (mean over iterations and ranks); algbw = bytes / time,
// busbw = algbw * 2(n-1)/n (the bytes each link carries in a ring allreduce), both GB/s.
// Header-only and MPI-free: the peer links nothing from Tandem.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/core/error.h"

namespace tandem::bench {

struct AllreducePerfArgs {
  int64_t min_bytes = 32 << 20;  // nccl-tests' defaults
  int64_t max_bytes = 32 << 20;
  int64_t step_factor = 2;
  int iters = 20;
  int warmup = 5;
  int check = 1;
  std::string datatype = "float";
  std::string op = "sum";
  std::string backend = "mpi";
};

inline const char* allreduce_perf_usage() {
  return "flags: -b minbytes  -e maxbytes  (suffix K, M or G allowed; default 32M)\n"
         "       -f stepfactor (>= 2, default 2)   -n iters (default 20)   -w warmup iters (default 5)\n"
         "       -c check 0|1 (default 1)   -d datatype float|double|int32|int64 (default float)\n"
         "       -o op sum|prod|max|min|avg (default sum)   --backend mpi|nccl|local (default mpi)\n";
}

// Element size for -d; ConfigError for anything else.
inline int64_t perf_dtype_size(const std::string& name) {
  if (name == "float" || name == "int32") return 4;
  if (name == "double" || name == "int64") return 8;
  throw ConfigError("-d " + name + ": unknown datatype; allowed: float, double, int32, int64");
}

inline int64_t parse_bytes(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  std::string suffix = end ? std::string(end) : "";
  double scale = suffix == "" ? 1 : suffix == "K" || suffix == "k" ? 1024.0
                 : suffix == "M" || suffix == "m"               ? 1024.0 * 1024
                 : suffix == "G" || suffix == "g"               ? 1024.0 * 1024 * 1024 : -1;
  if (end == v.c_str() || scale < 0 || x < 0)
    throw ConfigError(flag + " " + v + ": expected a byte count like 8, 64K, 1M or 2G");
  return int64_t(x * scale);
}

inline int parse_int(const std::string& flag, const std::string& v, int lo, int hi) {
  char* end = nullptr;
  long x = std::strtol(v.c_str(), &end, 10);
  if (end == v.c_str() || *end || x < lo || x > hi)
    throw ConfigError(flag + " " + v + ": expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
  return int(x);
}

// Throws ConfigError naming the flag and what is allowed. allow_backends: the --backend values
// this program accepts.
inline AllreducePerfArgs parse_allreduce_perf_args(int argc, char** argv, const std::vector<std::string>& allow_backends) {
  AllreducePerfArgs a;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") throw ConfigError("usage");
    if (i + 1 >= argc) throw ConfigError(flag + ": missing value (or unknown flag)");
    std::string v = argv[++i];
    if (flag == "-b") a.min_bytes = parse_bytes(flag, v);
    else if (flag == "-e") a.max_bytes = parse_bytes(flag, v);
    else if (flag == "-f") a.step_factor = parse_int(flag, v, 2, 1 << 20);
    else if (flag == "-n") a.iters = parse_int(flag, v, 1, 1 << 24);
    else if (flag == "-w") a.warmup = parse_int(flag, v, 0, 1 << 24);
    else if (flag == "-c") a.check = parse_int(flag, v, 0, 1);
    else if (flag == "-d") a.datatype = v;
    else if (flag == "-o") a.op = v;
    else if (flag == "--backend") a.backend = v;
    else throw ConfigError(flag + ": unknown flag");
  }
  perf_dtype_size(a.datatype);
  if (a.op != "sum" && a.op != "prod" && a.op != "max" && a.op != "min" && a.op != "avg")
    throw ConfigError("-o " + a.op + ": unknown op; allowed: sum, prod, max, min, avg");
  bool backend_ok = false;
  std::string allowed;
  for (const auto& b : allow_backends) {
    backend_ok |= b == a.backend;
    allowed += (allowed.empty() ? "" : ", ") + b;
  }
  if (!backend_ok) throw ConfigError("--backend " + a.backend + ": allowed here: " + allowed);
  if (a.min_bytes > a.max_bytes)
    throw ConfigError("-b " + std::to_string(a.min_bytes) + " is larger than -e " + std::to_string(a.max_bytes));
  return a;
}

// min, min*f, ... up to max; each a whole number of elements (at least one).
inline std::vector<int64_t> perf_sizes(const AllreducePerfArgs& a) {
  const int64_t es = perf_dtype_size(a.datatype);
  std::vector<int64_t> out;
  for (int64_t b = std::max<int64_t>(a.min_bytes, es); b <= a.max_bytes; b *= a.step_factor) {
    out.push_back(b / es * es);
    if (b > (int64_t(1) << 50)) break;
  }
  return out;
}

// Pattern element i on rank r: small integers, so sums, products and extremes are exact.
inline double perf_value(int rank, int64_t i) { return double((i * 3 + rank) % 5) - 2; }

inline double perf_expected(int nranks, int64_t i, const std::string& op, bool integer) {
  double acc = perf_value(0, i);
  for (int r = 1; r < nranks; ++r) {
    double v = perf_value(r, i);
    if (op == "sum" || op == "avg") acc += v;
    else if (op == "prod") acc *= v;
    else if (op == "max") acc = v > acc ? v : acc;
    else acc = v < acc ? v : acc;
  }
  if (op == "avg") acc = integer ? double(int64_t(acc / nranks)) : acc / nranks;
  return acc;
}

struct PerfResult {
  double time_us = 0;
  double algbw = 0, busbw = 0;
  int64_t wrong = 0;
};

inline PerfResult perf_result(int64_t bytes, int nranks, double time_us, int64_t wrong) {
  PerfResult r;
  r.time_us = time_us;
  r.algbw = time_us > 0 ? double(bytes) / (time_us * 1e-6) / 1e9 : 0;
  r.busbw = r.algbw * 2.0 * (nranks - 1) / nranks;
  r.wrong = wrong;
  return r;
}

inline void print_perf_header(const AllreducePerfArgs& a, const std::string& program,
                              const std::vector<std::string>& rank_lines) {
  std::printf("# %s: minBytes %lld maxBytes %lld step: %lld(factor) warmup iters: %d iters: %d validation: %d\n",
              program.c_str(), (long long)a.min_bytes, (long long)a.max_bytes, (long long)a.step_factor, a.warmup,
              a.iters, a.check);
  std::printf("#\n# Using devices\n");
  for (const auto& l : rank_lines) std::printf("#  %s\n", l.c_str());
  std::printf("#\n");
  std::printf("# %10s  %12s  %8s  %6s  %6s            out-of-place                       in-place          \n", "",
              "", "", "", "");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count", "type", "redop",
              "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)", "(elements)", "", "", "",
              "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

inline std::string perf_time_text(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : "%7.2f", us);
  return buf;
}

inline void print_perf_row(int64_t bytes, int64_t count, const AllreducePerfArgs& a, const PerfResult& oop,
                           const PerfResult& ip) {
  std::printf("%12lld  %12lld  %8s  %6s  %6d", (long long)bytes, (long long)count, a.datatype.c_str(), a.op.c_str(), -1);
  for (const PerfResult* r : {&oop, &ip}) {
    std::string wrong = a.check ? std::to_string(r->wrong) : "N/A";
    std::printf("  %7s  %6.2f  %6.2f  %5s", perf_time_text(r->time_us).c_str(), r->algbw, r->busbw, wrong.c_str());
  }
  std::printf("\n");
  std::fflush(stdout);
}

inline void print_perf_footer(int64_t wrong_total, double avg_busbw) {
  std::printf("# Out of bounds values : %lld %s\n", (long long)wrong_total, wrong_total ? "FAILED" : "OK");
  std::printf("# Avg bus bandwidth    : %g \n#\n", avg_busbw);
}

}  // namespace tandem::bench
