// Helpers shared by the fuzz targets (tests/fuzz/fuzz_*.cpp): turning libFuzzer's bytes into
// what a parser reads (a file on disk, a list of command-line arguments).
#pragma once
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace tandem::fuzz {

// A file of this process under the temporary directory, rewritten for every input and removed
// at exit, for parsers that take a path.
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& stem)
      : path_((std::filesystem::temp_directory_path() /
               ("tandem_fuzz_" + stem + "_" + std::to_string(::getpid()))).string()) {}
  ~ScratchFile() { std::remove(path_.c_str()); }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  // Replaces the file's content; aborts when it cannot (a broken harness, not a finding).
  const std::string& write(const uint8_t* data, size_t size) const {
    std::FILE* f = std::fopen(path_.c_str(), "wb");
    if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
      std::perror(path_.c_str());
      std::abort();
    }
    return path_;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The parts of `text` between `separator` bytes (empty parts kept), e.g. the arguments of a
// command line written one per line.
inline std::vector<std::string> split_bytes(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t end; (end = text.find(separator, start)) != std::string::npos; start = end + 1)
    parts.push_back(text.substr(start, end - start));
  parts.push_back(text.substr(start));
  return parts;
}

// A finding that is not a crash (a parser's result breaking its own contract): reported on
// stderr, then abort() so that libFuzzer saves the input and the replay test fails.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "fuzz finding: %s\n", what.c_str());
  std::abort();
}

}  // namespace tandem::fuzz
