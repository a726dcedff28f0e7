#include "engine/data/idx_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "base/error.h"

namespace tandem::data {
namespace {

constexpr uint8_t kUInt8Type = 0x08;

std::string hex(uint64_t value, int digits) {
  static const char* kDigits = "0123456789abcdef";
  std::string s(size_t(digits), '0');
  for (int i = digits - 1; i >= 0; --i, value >>= 4) s[size_t(i)] = kDigits[value & 0xf];
  return "0x" + s;
}

const char* idx_type_name(uint8_t type) {
  switch (type) {
    case 0x08: return "uint8";
    case 0x09: return "int8";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return "not an IDX type";
  }
}

// A gzFile that closes itself; every read failure becomes a DataError naming the file.
class GzReader {
 public:
  explicit GzReader(const std::string& path) : path_(path) {
    if (!std::filesystem::exists(path))
      throw DataError("IDX file not found: " + path);
    file_ = gzopen(path.c_str(), "rb");
    if (!file_) throw DataError("cannot open IDX file " + path + ": " + std::strerror(errno));
    gzbuffer(file_, 1 << 20);  // large reads: fewer syscalls and inflate calls
  }
  ~GzReader() {
    if (file_) gzclose(file_);
  }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  // Reads up to n bytes; returns how many were read (fewer only at the end of the data).
  size_t read(void* dst, size_t n) {
    size_t done = 0;
    while (done < n) {
      const unsigned chunk = unsigned(std::min<size_t>(n - done, size_t(1) << 30));
      const int got = gzread(file_, static_cast<char*>(dst) + done, chunk);
      if (got < 0) {
        int code = 0;
        const char* msg = gzerror(file_, &code);
        throw DataError("IDX file " + path_ + " is corrupt or truncated (zlib: " +
                        std::string(msg ? msg : "read error") + "); re-download or reinstall it");
      }
      if (got == 0) break;
      done += size_t(got);
    }
    return done;
  }

  // After a short read: a note when the gzip stream itself ended early (zlib's Z_BUF_ERROR).
  std::string short_read_note() {
    int code = Z_OK;
    gzerror(file_, &code);
    return code == Z_BUF_ERROR ? " (the gzip stream ends early)" : "";
  }

 private:
  std::string path_;
  gzFile file_ = nullptr;
};

uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

std::string dims_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace

int64_t IdxArray::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

IdxArray read_idx(const std::string& path, int expected_ndims) {
  GzReader reader(path);
  const std::string expected_magic =
      expected_ndims > 0 ? hex(uint32_t(kUInt8Type) << 8 | uint32_t(expected_ndims), 8)
                         : "0x000008NN (uint8, NN = 1..4 dims)";

  uint8_t magic[4];
  const size_t got_magic = reader.read(magic, 4);
  if (got_magic < 4)
    throw DataError("IDX file " + path + " is truncated: expected a 4-byte magic number " +
                    expected_magic + ", found only " + std::to_string(got_magic) + " bytes" + reader.short_read_note());
  const uint32_t magic_value = big_endian_u32(magic);
  const uint8_t type = magic[2], ndims = magic[3];
  if (magic[0] != 0 || magic[1] != 0 || idx_type_name(type) == std::string("not an IDX type"))
    throw DataError("IDX file " + path + " has magic number " + hex(magic_value, 8) + ", expected " +
                    expected_magic + "; it is not an IDX file (is it the right file, fully downloaded?)");
  if (type != kUInt8Type)
    throw DataError("IDX file " + path + " holds " + idx_type_name(type) + " data (dtype byte " +
                    hex(type, 2) + "); only uint8 (dtype byte 0x08) is supported, as in MNIST-format files");
  if ((expected_ndims > 0 && ndims != expected_ndims) || ndims < 1 || ndims > 4)
    throw DataError("IDX file " + path + " has " + std::to_string(ndims) + " dims (magic " +
                    hex(magic_value, 8) + "), expected " +
                    (expected_ndims > 0 ? std::to_string(expected_ndims) + " (magic " + expected_magic + ")"
                                        : std::string("1 to 4")));

  IdxArray array;
  uint8_t dim_bytes[16];
  const size_t header_bytes = size_t(ndims) * 4;
  const size_t got_dims = reader.read(dim_bytes, header_bytes);
  if (got_dims < header_bytes)
    throw DataError("IDX file " + path + " is truncated in its header: expected " +
                    std::to_string(ndims) + " dims (" + std::to_string(header_bytes) + " bytes), found " +
                    std::to_string(got_dims) + " bytes" + reader.short_read_note());
  uint64_t expected_bytes = 1;
  for (int i = 0; i < ndims; ++i) {
    const uint32_t d = big_endian_u32(dim_bytes + 4 * i);
    array.dims.push_back(int64_t(d));
    // Dims are uint32, so the product of up to four can overflow: cap it well below that.
    if (d != 0 && expected_bytes > (uint64_t(1) << 40) / d)
      throw DataError("IDX file " + path + " declares dims " + dims_string(array.dims) +
                      "..., over 2^40 bytes; the header is corrupt");
    expected_bytes *= d;
  }

  // Read in growing chunks rather than trusting the header for one allocation: a corrupt header
  // on a short file then fails at the file's end, not in a huge allocation.
  size_t filled = 0;
  while (filled < expected_bytes) {
    const size_t grow = std::min<size_t>(expected_bytes - filled, std::max<size_t>(filled, 1 << 24));
    array.data.resize(filled + grow);
    const size_t got = reader.read(array.data.data() + filled, grow);
    filled += got;
    if (got < grow)
      throw DataError("IDX file " + path + " is truncated: dims " + dims_string(array.dims) +
                      " need " + std::to_string(expected_bytes) + " payload bytes, found " +
                      std::to_string(filled) + reader.short_read_note() + "; re-download or reinstall the file");
  }
  // Trailing bytes mean the dims and the data disagree: refuse rather than guess.
  uint8_t extra[4096];
  size_t extra_bytes = 0;
  for (size_t got; (got = reader.read(extra, sizeof extra)) > 0;) extra_bytes += got;
  if (extra_bytes > 0)
    throw DataError("IDX file " + path + " has " + std::to_string(extra_bytes) +
                    " bytes after its payload: dims " + dims_string(array.dims) + " need " +
                    std::to_string(expected_bytes) + " payload bytes, found " +
                    std::to_string(expected_bytes + extra_bytes) + "; is it the right file?");
  return array;
}

}  // namespace tandem::data
