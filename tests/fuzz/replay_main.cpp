// The driver that stands in for libFuzzer in gcc builds (every ctest run). Linked with one fuzz
// target, it feeds each file under the given files or directories to LLVMFuzzerTestOneInput
// once, then, with --mutate, keeps fuzzing for a bounded time: it derives new inputs from those
// files by byte-level mutations (bit flips, interesting bytes, inserted, erased, repeated and
// spliced ranges, changed numbers) and runs each. libFuzzer does this far better, guided by
// coverage (scripts/fuzz.sh, clang); this mode gives every CI run, in its sanitized build, a few
// thousand fresh inputs per parser at no extra build.
// A finding aborts the process (an uncaught exception of a type the target does not accept, a
// sanitizer report, or fuzz::finding), so the test fails. Before each mutant runs it is written
// to fuzz_mutant_<target>.bin in the working directory: after a finding, that file is the input
// to add to tests/fuzz/regressions/<target>/. The mutations are a function of --seed, so a run
// is repeatable.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace fs = std::filesystem;

namespace {

using Bytes = std::vector<uint8_t>;

struct Options {
  std::vector<fs::path> roots;
  int64_t mutants = 0;      // --mutate=N: at most N mutants after the replay
  double max_seconds = 10;  // --max-seconds=T: and for at most T seconds
  uint64_t seed = 1;        // --seed=S
};

[[noreturn]] void usage(const char* program, const std::string& problem) {
  std::fprintf(stderr,
               "%s\nusage: %s [--mutate=N [--max-seconds=T] [--seed=S]] FILE_OR_DIR...\n"
               "  runs each input through the fuzz target once; --mutate then runs up to N mutants of them\n"
               "  for at most T seconds (default 10), derived from seed S (default 1)\n",
               problem.c_str(), program);
  std::exit(2);
}

Options parse_options(int argc, char** argv) {
  Options options;
  auto number = [&](std::string_view arg, std::string_view flag, auto& out) {
    const std::string text(arg.substr(flag.size()));
    char* end = nullptr;
    errno = 0;
    const double value = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || errno != 0 || !(value >= 0) || value > 1e15)
      usage(argv[0], std::string(flag) + " takes a non-negative number, not '" + text + "'");
    out = static_cast<std::remove_reference_t<decltype(out)>>(value);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with("--mutate=")) number(arg, "--mutate=", options.mutants);
    else if (arg.starts_with("--max-seconds=")) number(arg, "--max-seconds=", options.max_seconds);
    else if (arg.starts_with("--seed=")) number(arg, "--seed=", options.seed);
    else if (arg.starts_with("--")) usage(argv[0], "unknown option " + std::string(arg));
    else options.roots.emplace_back(arg);
  }
  if (options.roots.empty()) usage(argv[0], "no inputs given");
  return options;
}

Bytes read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  Bytes bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) {
    std::fprintf(stderr, "cannot read %s\n", file.c_str());
    std::exit(2);
  }
  return bytes;
}

std::vector<fs::path> input_files(const Options& options, const char* program) {
  std::vector<fs::path> all;
  for (const fs::path& root : options.roots) {
    if (!fs::exists(root)) usage(program, root.string() + " does not exist");
    std::vector<fs::path> files;
    if (fs::is_directory(root)) {
      for (const auto& entry : fs::recursive_directory_iterator(root))
        if (entry.is_regular_file()) files.push_back(entry.path());
    } else {
      files.push_back(root);
    }
    std::sort(files.begin(), files.end());  // a stable order, so a run is repeatable
    all.insert(all.end(), files.begin(), files.end());
  }
  return all;
}

// Byte-level mutations in the manner of libFuzzer's and AFL's havoc stage, without coverage.
class Mutator {
 public:
  Mutator(uint64_t seed, const std::vector<Bytes>& corpus) : rng_(seed), corpus_(corpus) {}

  Bytes next() {
    Bytes data = corpus_[pick(corpus_.size())];
    for (size_t k = 1 + pick(4); k > 0; --k) mutate_once(data);
    return data;
  }

 private:
  size_t pick(size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  void mutate_once(Bytes& data) {
    static constexpr uint8_t kInteresting[] = {0, 1, 0x7f, 0x80, 0xff, '0', '1', '9', '-', '.', ':', ',',
                                               '\n', ' ', '"', '{', '[', 'e'};
    const size_t at = pick(data.size() + 1);
    switch (pick(8)) {
      case 0:  // flip one bit
        if (!data.empty()) data[pick(data.size())] ^= uint8_t(1u << pick(8));
        break;
      case 1:  // an interesting byte
        if (!data.empty()) data[pick(data.size())] = kInteresting[pick(sizeof kInteresting)];
        break;
      case 2:  // insert random bytes
        for (size_t n = 1 + pick(8); n > 0; --n) data.insert(data.begin() + at, uint8_t(pick(256)));
        break;
      case 3:  // erase a range
        if (at < data.size()) data.erase(data.begin() + at, data.begin() + at + 1 + pick(std::min<size_t>(data.size() - at, 16)));
        break;
      case 4: {  // repeat a range of itself
        if (data.empty()) break;
        const size_t from = pick(data.size()), n = 1 + pick(std::min<size_t>(data.size() - from, 64));
        const Bytes piece(data.begin() + from, data.begin() + from + n);
        data.insert(data.begin() + std::min(at, data.size()), piece.begin(), piece.end());
        break;
      }
      case 5: {  // splice in a range of another input
        const Bytes& other = corpus_[pick(corpus_.size())];
        if (other.empty()) break;
        const size_t from = pick(other.size()), n = 1 + pick(std::min<size_t>(other.size() - from, 64));
        data.insert(data.begin() + at, other.begin() + from, other.begin() + from + n);
        break;
      }
      case 6: {  // a decimal number written over a digit, or anywhere
        static constexpr const char* kNumbers[] = {"0", "-1", "65535", "2147483648", "-9223372036854775809",
                                                   "18446744073709551616", "1e308", "nan", "0x10", "007"};
        const std::string_view number = kNumbers[pick(std::size(kNumbers))];
        data.insert(data.begin() + at, number.begin(), number.end());
        break;
      }
      default:  // truncate
        data.resize(at);
        break;
    }
  }

  std::mt19937_64 rng_;
  const std::vector<Bytes>& corpus_;
};

void run(const Bytes& data) { LLVMFuzzerTestOneInput(data.data(), data.size()); }

void write_mutant(const fs::path& path, const Bytes& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "cannot write %s (the harness needs its working directory writable)\n", path.c_str());
    std::exit(2);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  std::vector<Bytes> corpus;
  for (const fs::path& file : input_files(options, argv[0])) {
    corpus.push_back(read_file(file));
    std::fprintf(stderr, "replaying %s (%zu bytes)\n", file.c_str(), corpus.back().size());
    run(corpus.back());
  }
  std::printf("%zu inputs replayed without a finding\n", corpus.size());
  if (options.mutants == 0 || corpus.empty()) return 0;

  const fs::path mutant_file = "fuzz_mutant_" + fs::path(argv[0]).filename().string() + ".bin";
  std::printf("mutating with seed %llu; the input under test is always in %s\n",
              static_cast<unsigned long long>(options.seed), fs::absolute(mutant_file).c_str());
  std::fflush(stdout);
  Mutator mutator(options.seed, corpus);
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  int64_t ran = 0;
  for (; ran < options.mutants && elapsed() < options.max_seconds; ++ran) {
    const Bytes mutant = mutator.next();
    write_mutant(mutant_file, mutant);
    run(mutant);
  }
  fs::remove(mutant_file);
  std::printf("%lld mutants ran in %.1f s without a finding\n", static_cast<long long>(ran), elapsed());
  return 0;
}
