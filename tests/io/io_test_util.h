// Helpers for the io tests: a scratch directory per test, raw file bytes, error checks.
#pragma once
#include <gtest/gtest.h>

#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/tensor.h"
#include "tests/accelerators/expect_error.h"

namespace tandem::test {

// A fresh directory under TMPDIR (or /tmp), removed with everything in it at the end.
class ScratchDir {
 public:
  ScratchDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/tandem-io-XXXXXX";
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }
  // Names of everything in the directory, sorted.
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::string path_;
};

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// A safetensors file from a header text and data bytes (no padding added, so tests control it).
inline std::vector<uint8_t> safetensors_bytes(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out;
  uint64_t n = header.size();
  for (int b = 0; b < 8; ++b) out.push_back(uint8_t(n >> (8 * b)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// A tensor's elements as bytes, in row-major order (bit patterns, so NaN payloads compare).
inline std::vector<uint8_t> tensor_bytes(const Tensor& t) {
  Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.raw_data());
  return std::vector<uint8_t>(p, p + size_t(c.numel()) * dtype_size(c.dtype()));
}

// A CPU tensor holding exactly these bit patterns (for float16/bfloat16, which have no C++ type).
inline Tensor tensor_from_bits(const std::vector<uint16_t>& bits, DType dtype) {
  Tensor t = Tensor::empty({int64_t(bits.size())}, dtype);
  if (!bits.empty()) std::memcpy(t.raw_data(), bits.data(), bits.size() * 2);
  return t;
}

// The project-wide error expectation (tests/accelerators/expect_error.h).
using ::expect_error;

}  // namespace tandem::test
