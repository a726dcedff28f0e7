#include "tiny_idx_dataset.h"

#include <zlib.h>

#include <random>
#include <stdexcept>
#include <vector>

namespace {

void put_be32(std::vector<uint8_t>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(uint8_t(v >> shift));
}

void write_gz(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot write " + path);
  gzwrite(f, bytes.data(), unsigned(bytes.size()));
  gzclose(f);
}

// IDX: magic (0, 0, type 0x08 = ubyte, number of dims), each dim as big-endian u32, then data.
void write_split(const std::string& dir, const std::string& prefix, int n, std::mt19937& rng) {
  std::vector<uint8_t> images, labels;
  put_be32(images, 0x00000803);
  put_be32(images, uint32_t(n));
  put_be32(images, 28);
  put_be32(images, 28);
  put_be32(labels, 0x00000801);
  put_be32(labels, uint32_t(n));
  for (int i = 0; i < n; ++i) {
    const uint8_t label = uint8_t(i % 10);
    labels.push_back(label);
    // A faint class-dependent stripe, so a model can learn something.
    for (int p = 0; p < 28 * 28; ++p) images.push_back(uint8_t((p / 28) % 10 == label ? 200 : rng() % 60));
  }
  write_gz(dir + "/" + prefix + "-images-idx3-ubyte.gz", images);
  write_gz(dir + "/" + prefix + "-labels-idx1-ubyte.gz", labels);
}

}  // namespace

void write_tiny_fashion_mnist(const std::string& dir, int n_train, int n_test, uint32_t seed) {
  std::mt19937 rng(seed);
  write_split(dir, "train", n_train, rng);
  write_split(dir, "t10k", n_test, rng);
}
