// Fuzz target: allreduce_perf's command line (bench/allreduce_perf_format.h), parsed as main()
// parses it: the flags, then the sizes each datatype would run. Input: the arguments, one per
// line (argv[0] is supplied). Allowed outcome besides success: ConfigError. A success must be a
// sweep the benchmark can finish: whole elements within -e, and not more than 100000 sizes (each
// size is 2 x (warmup + iters) allreduces; a million of them is hours of a run nobody asked for).
#include <cstdint>
#include <string>
#include <vector>

#include "bench/allreduce_perf_format.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args{"allreduce_perf"};
  if (size > 0) {
    for (auto& arg : tandem::fuzz::split_bytes(std::string(reinterpret_cast<const char*>(data), size), '\n'))
      args.push_back(std::move(arg));
  }
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  try {
    using namespace tandem::bench;
    const AllreducePerfArgs parsed = parse_allreduce_perf_args(int(args.size()), argv.data(), {"mpi", "nccl", "local"});
    for (const auto& type : parsed.datatype == "all" ? perf_all_datatypes() : std::vector{parsed.datatype}) {
      const std::vector<int64_t> sizes = perf_sizes(parsed, type);
      if (sizes.size() > 100000)
        tandem::fuzz::finding("a sweep of " + std::to_string(sizes.size()) + " sizes for " + type);
      for (int64_t bytes : sizes) {
        if (bytes < perf_dtype_size(type) || bytes > parsed.max_bytes || bytes % perf_dtype_size(type) != 0)
          tandem::fuzz::finding("size " + std::to_string(bytes) + " is not a whole number of " + type +
                                " elements within -e " + std::to_string(parsed.max_bytes));
      }
    }
  } catch (const tandem::ConfigError&) {
  }
  return 0;
}
