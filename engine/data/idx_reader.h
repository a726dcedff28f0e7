// The IDX format of MNIST and Fashion-MNIST (http://yann.lecun.com/exdb/mnist/), raw or gzipped:
//   magic: 0x00 0x00 <dtype byte> <ndims>, then ndims big-endian uint32 dims, then the payload,
//   prod(dims) elements in row-major order. Labels are 0x00000801 ([N] uint8), images
//   0x00000803 ([N, rows, cols] uint8).
// Only uint8 payloads (dtype byte 0x08) are read: that is what every MNIST-family file holds.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tandem::data {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // prod(dims) bytes, row-major
  int64_t numel() const;
};

// Reads `path`, gzipped or raw (zlib reads both). expected_ndims: 1 for labels, 3 for images,
// 0 for any of 1..4. Throws DataError naming the file and what was expected vs found when the
// file is missing, the magic or dtype byte is wrong, the header is cut short, or the payload is
// shorter or longer than the dims declare.
IdxArray read_idx(const std::string& path, int expected_ndims = 0);

}  // namespace tandem::data
