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
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/error.h"

namespace tandem::bench {

struct AllreducePerfArgs {
  int64_t min_bytes = 32 << 20;  // nccl-tests' defaults
  int64_t max_bytes = 32 << 20;
  int64_t step_factor = 2;
  int64_t step_bytes = 0;        // -i: additive steps instead of -f's factor
  int iters = 20;
  int warmup = 5;
  int check = 1;                 // -c: how many checked runs per size and placement (0: none)
  int agg_iters = 1;             // -m: operations per timed iteration
  int cycles = 1;                // -N: sweeps over the sizes (0: until killed)
  int average = 1;               // -a: time reported: 0 rank 0's, 1 mean, 2 min, 3 max over ranks
  int timeout_s = 0;             // -T: collective timeout in seconds (0: the communicator's default)
  int blocking = 1;              // -z
  std::string datatype = "float";  // one type, or "all"
  std::string op = "sum";          // one op, or "all"
  std::string backend = "mpi";
  std::vector<std::string> given;  // the long names of the flags on the command line
};

inline const char* allreduce_perf_usage() {
  return "flags (nccl-tests' spellings; -x V, -xV, --long V and --long=V all work):\n"
         "  -b,--minbytes  -e,--maxbytes  bytes, suffix K, M or G (default 32M)\n"
         "  -f,--stepfactor N (>= 2, default 2)   -i,--stepbytes N (additive steps instead)\n"
         "  -n,--iters N (20)  -w,--warmup_iters N (5)  -m,--agg_iters N (1)  -N,--run_cycles N (1; 0: forever)\n"
         "  -c,--check N (1; 0: no check)   -a,--average 0|1|2|3 (rank 0, mean, min, max; default 1)\n"
         "  -d,--datatype float|double|int32|int64|half|bfloat16|all (float)\n"
         "  -o,--op sum|prod|max|min|avg|all (sum)   -T,--timeout SECONDS (0: 600)\n"
         "  -z,--blocking 1 (every operation completes before the next; 0 is the same for mpi/local)\n"
         "  -C,--report_cputime 0|1 (the same numbers: times are host wall time of blocking operations)\n"
         "  -t,--nthreads 1  -g,--ngpus 1  -p,--parallel_init 0  -y,--stream_null 0  -G,--cudagraph 0\n"
         "  -R,--local_register 0 (one thread and one device per process; other values exit 2 saying why)\n"
         "  --backend mpi|nccl|local (default mpi)\n";
}

inline const std::vector<std::string>& perf_all_datatypes() {
  static const std::vector<std::string> all{"float", "double", "int32", "int64", "half", "bfloat16"};
  return all;
}
inline const std::vector<std::string>& perf_all_ops() {
  static const std::vector<std::string> all{"sum", "prod", "max", "min", "avg"};
  return all;
}

// Element size for -d; ConfigError for anything else, naming what Tandem lacks.
inline int64_t perf_dtype_size(const std::string& name) {
  if (name == "half" || name == "bfloat16") return 2;
  if (name == "float" || name == "int32") return 4;
  if (name == "double" || name == "int64") return 8;
  if (name == "int8" || name == "uint8" || name == "uint32" || name == "uint64" || name == "f8e4m3" || name == "f8e5m2")
    throw ConfigError("-d " + name + ": Tandem's tensors have no " + name + " reductions; allowed: float, double, "
                      "int32, int64, half, bfloat16, all");
  throw ConfigError("-d " + name + ": unknown datatype; allowed: float, double, int32, int64, half, bfloat16, all");
}

// The largest size a run may ask for (1 PiB): beyond it sizes stop being allocations.
inline constexpr int64_t kPerfMaxBytes = int64_t(1) << 50;

inline int64_t parse_bytes(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  const std::string suffix = end ? std::string(end) : "";
  const double scale = suffix == "" ? 1 : suffix == "K" || suffix == "k" ? 1024.0
                       : suffix == "M" || suffix == "m"               ? 1024.0 * 1024
                       : suffix == "G" || suffix == "g"               ? 1024.0 * 1024 * 1024 : -1;
  if (end == v.c_str() || scale < 0 || !(x >= 0))
    throw ConfigError(flag + " " + v + ": expected a byte count like 8, 64K, 1M or 2G");
  if (!(x * scale <= double(kPerfMaxBytes)))
    throw ConfigError(flag + " " + v + ": more than the largest size allowed, 1 PiB (1048576G)");
  return int64_t(x * scale);
}

inline int parse_int(const std::string& flag, const std::string& v, int lo, int hi) {
  char* end = nullptr;
  long x = std::strtol(v.c_str(), &end, 10);
  if (end == v.c_str() || *end || x < lo || x > hi)
    throw ConfigError(flag + " " + v + ": expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
  return int(x);
}

// nccl-tests' flags, short and long. Those that cannot apply to one thread and one device per
// process, or to an allreduce, are accepted only with the value that means "off".
struct PerfFlag {
  char short_name;
  const char* long_name;
};
inline const std::vector<PerfFlag>& perf_flags() {
  static const std::vector<PerfFlag> flags{
      {'b', "minbytes"},  {'e', "maxbytes"},    {'f', "stepfactor"},    {'i', "stepbytes"}, {'n', "iters"},
      {'w', "warmup_iters"}, {'m', "agg_iters"}, {'N', "run_cycles"},   {'c', "check"},     {'d', "datatype"},
      {'o', "op"},        {'a', "average"},     {'T', "timeout"},       {'z', "blocking"},  {'C', "report_cputime"},
      {'t', "nthreads"},  {'g', "ngpus"},       {'p', "parallel_init"}, {'y', "stream_null"}, {'G', "cudagraph"},
      {'R', "local_register"}, {'r', "root"},   {0, "backend"}};
  return flags;
}

// Throws ConfigError naming the flag and what is allowed; "usage" for -h. allow_backends: the
// --backend values this program accepts.
inline AllreducePerfArgs parse_allreduce_perf_args(int argc, char** argv, const std::vector<std::string>& allow_backends) {
  AllreducePerfArgs a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") throw ConfigError("usage");
    const PerfFlag* flag = nullptr;
    std::string value;
    bool has_value = false;
    for (const auto& f : perf_flags()) {
      const std::string long_form = std::string("--") + f.long_name;
      if (arg == long_form || (f.short_name && arg == std::string("-") + f.short_name)) {
        flag = &f;
      } else if (arg.rfind(long_form + "=", 0) == 0) {
        flag = &f, value = arg.substr(long_form.size() + 1), has_value = true;
      } else if (f.short_name && arg.size() > 2 && arg[0] == '-' && arg[1] == f.short_name) {
        flag = &f, value = arg.substr(2), has_value = true;
      }
      if (flag) break;
    }
    if (!flag) throw ConfigError(arg + ": unknown flag");
    const std::string name = flag->short_name ? std::string("-") + flag->short_name : "--" + std::string(flag->long_name);
    if (!has_value) {
      if (i + 1 >= argc) throw ConfigError(name + ": missing value");
      value = argv[++i];
    }
    a.given.push_back(flag->long_name);
    const auto only = [&](int allowed, const std::string& why) {
      if (parse_int(name, value, 0, 1 << 20) != allowed) throw ConfigError(name + " " + value + ": " + why);
    };
    switch (flag->short_name) {
      case 'b': a.min_bytes = parse_bytes(name, value); break;
      case 'e': a.max_bytes = parse_bytes(name, value); break;
      case 'f': a.step_factor = parse_int(name, value, 2, 1 << 20); break;
      case 'i': a.step_bytes = parse_bytes(name, value); break;
      case 'n': a.iters = parse_int(name, value, 1, 1 << 24); break;
      case 'w': a.warmup = parse_int(name, value, 0, 1 << 24); break;
      case 'm': a.agg_iters = parse_int(name, value, 1, 1 << 20); break;
      case 'N': a.cycles = parse_int(name, value, 0, 1 << 24); break;
      case 'c': a.check = parse_int(name, value, 0, 1 << 20); break;
      case 'd': a.datatype = value; break;
      case 'o': a.op = value; break;
      case 'a': a.average = parse_int(name, value, 0, 3); break;
      case 'T': a.timeout_s = parse_int(name, value, 0, 1 << 24); break;
      case 'z': a.blocking = parse_int(name, value, 0, 1); break;
      case 'C': parse_int(name, value, 0, 1); break;
      case 't': only(1, "one thread per process; start more processes instead (mpirun -np N)"); break;
      case 'g': only(1, "one device per process (a rank is a GPU); start one process per GPU (mpirun -np N)"); break;
      case 'p': only(0, "parallel initialization applies to several threads per process, and there is one"); break;
      case 'y': only(0, "the communicator keeps its own stream; launching on the NULL stream is not supported"); break;
      case 'G': only(0, "capturing the collectives in CUDA graphs is not implemented"); break;
      case 'R': only(0, "buffer registration (NCCL user buffers) is not implemented"); break;
      case 'r': throw ConfigError(name + " " + value + ": an allreduce has no root; -r applies to broadcast and reduce");
      default: a.backend = value; break;
    }
  }
  if (a.datatype != "all") perf_dtype_size(a.datatype);
  if (a.op == "mulsum")
    throw ConfigError("-o mulsum: NCCL's pre-multiplied sum has no Communicator equivalent; allowed: sum, prod, max, "
                      "min, avg, all");
  if (a.op != "all" && a.op != "sum" && a.op != "prod" && a.op != "max" && a.op != "min" && a.op != "avg")
    throw ConfigError("-o " + a.op + ": unknown op; allowed: sum, prod, max, min, avg, all");
  bool backend_ok = false;
  std::string allowed;
  for (const auto& b : allow_backends) {
    backend_ok |= b == a.backend;
    allowed += (allowed.empty() ? "" : ", ") + b;
  }
  if (!backend_ok) throw ConfigError("--backend " + a.backend + ": allowed here: " + allowed);
  if (a.blocking == 0 && a.backend == "nccl")
    throw ConfigError("-z 0: every allreduce runs to completion before the next starts (-z 1); queueing them "
                      "without waiting is not implemented for the nccl backend");
  if (a.min_bytes > a.max_bytes)
    throw ConfigError("-b " + std::to_string(a.min_bytes) + " is larger than -e " + std::to_string(a.max_bytes));
  return a;
}

// The most sizes one sweep may hold: -i's additive steps could otherwise ask for billions
// (-b 0 -e 1G -i 1), each a timed run, and the list alone would exhaust memory.
inline constexpr int64_t kPerfMaxSizes = 10000;

// min, then min*f (or min+i with -i), ... up to max; each a whole number of elements of
// `datatype`. ConfigError when the range holds no whole element, or more than kPerfMaxSizes sizes.
inline std::vector<int64_t> perf_sizes(const AllreducePerfArgs& a, const std::string& datatype) {
  const int64_t es = perf_dtype_size(datatype);
  if (a.step_bytes && (a.max_bytes - a.min_bytes) / a.step_bytes >= kPerfMaxSizes)
    throw ConfigError("-b " + std::to_string(a.min_bytes) + " -e " + std::to_string(a.max_bytes) + " -i " +
                      std::to_string(a.step_bytes) + " makes " +
                      std::to_string((a.max_bytes - a.min_bytes) / a.step_bytes + 1) + " sizes, more than the " +
                      std::to_string(kPerfMaxSizes) + " a run may hold; raise -i or use -f");
  std::vector<int64_t> out;
  for (int64_t b = a.min_bytes; b <= a.max_bytes;) {
    if (b >= es) out.push_back(b / es * es);
    if (a.step_bytes) {
      b += a.step_bytes;  // both at most kPerfMaxBytes: no overflow
    } else if (std::max<int64_t>(b, 1) > a.max_bytes / a.step_factor) {
      break;              // the next size would pass -e (or overflow)
    } else {
      b = std::max<int64_t>(b, 1) * a.step_factor;
    }
  }
  if (out.empty())
    throw ConfigError("-b " + std::to_string(a.min_bytes) + " -e " + std::to_string(a.max_bytes) + " holds no whole " +
                      datatype + " element (" + std::to_string(es) + " bytes); raise -e");
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
  std::printf("# %s: minBytes %lld maxBytes %lld step: %lld(%s) warmup iters: %d iters: %d agg iters: %d "
              "validation: %d\n", program.c_str(), (long long)a.min_bytes, (long long)a.max_bytes,
              (long long)(a.step_bytes ? a.step_bytes : a.step_factor), a.step_bytes ? "bytes" : "factor", a.warmup,
              a.iters, a.agg_iters, a.check);
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
