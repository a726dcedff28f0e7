// load_safetensors: validate the length prefix and the header completely, then stream each
// tensor's bytes straight into its own buffer while computing the checksum. Nothing from the
// file is trusted (sizes, offsets, dtypes) before it is checked against the file's real size,
// so a corrupt file gives an error, never a huge allocation or an out-of-bounds read.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "engine/io/safetensors.h"
#include "engine/io/safetensors_format.h"

namespace tandem::io {

namespace {

// ordered_json keeps the header's order, which breaks ties between empty tensors that share
// an offset (a writer's order otherwise survives only in the offsets).
using json = nlohmann::ordered_json;

[[noreturn]] void invalid(const std::string& path, const std::string& problem) {
  throw DataError("'" + path + "' is not a valid safetensors file: " + problem +
                  "; the file is corrupt or was not written completely: re-save it or use another copy");
}

// Owns the file descriptor; read_exact reports EOF and I/O errors against the file's name.
class InputFile {
 public:
  explicit InputFile(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
      int err = errno;
      throw DataError("cannot open '" + path + "': " + std::strerror(err) + "; check the path and its permissions");
    }
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      int err = errno;
      ::close(fd_);
      throw DataError("cannot stat '" + path + "': " + std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd_);
      throw DataError("'" + path + "' is not a regular file (a directory?); give the path of a .safetensors file");
    }
    size_ = uint64_t(st.st_size);
  }
  ~InputFile() { ::close(fd_); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  uint64_t size() const { return size_; }

  void read_exact(void* dst, size_t nbytes) {
    char* p = static_cast<char*>(dst);
    while (nbytes > 0) {
      ssize_t n = ::read(fd_, p, nbytes);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int err = errno;
        throw DataError("reading '" + path_ + "' failed: " + std::strerror(err));
      }
      // The size was checked against fstat, so this means the file shrank while we read it.
      if (n == 0) throw DataError("'" + path_ + "' ended early while being read; is another process rewriting it?");
      p += n;
      nbytes -= size_t(n);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

std::string offsets_str(uint64_t begin, uint64_t end) {
  // Built with append: GCC 12 warns falsely (-Wrestrict) on "[" + std::to_string(...).
  std::string out = "[";
  out.append(std::to_string(begin)).append(", ").append(std::to_string(end)).append("]");
  return out;
}

uint64_t as_u64(const json& v, const std::string& path, const std::string& what) {
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    invalid(path, what + " must be a non-negative integer, got " + v.dump());
  return v.get<uint64_t>();
}

Entry parse_entry(const std::string& path, const std::string& name, const json& spec) {
  const std::string where = "tensor '" + name + "'";
  if (!spec.is_object() || !spec.contains("dtype") || !spec.contains("shape") || !spec.contains("data_offsets"))
    invalid(path, where + " must be an object with \"dtype\", \"shape\" and \"data_offsets\", got " + spec.dump());
  Entry e;
  e.name = name;
  const json& dtype = spec["dtype"];
  if (!dtype.is_string()) invalid(path, where + ": dtype must be a string, got " + dtype.dump());
  auto parsed = detail::dtype_from_safetensors_code(dtype.get<std::string>());
  if (!parsed)
    throw DataError("cannot load '" + path + "': " + where + " has dtype " + dtype.dump() +
                    ", which Tandem does not support (supported: " + detail::kSupportedDtypes +
                    "); convert it before saving, e.g. in PyTorch t.to(torch.float32)");
  e.dtype = *parsed;

  const json& shape = spec["shape"];
  if (!shape.is_array()) invalid(path, where + ": shape must be an array, got " + shape.dump());
  if (shape.size() > size_t(kMaxDims))
    invalid(path, where + " has " + std::to_string(shape.size()) + " dims; Tandem tensors have at most " +
                      std::to_string(kMaxDims));
  // Products are bounded as they grow so a hostile shape cannot overflow to a small size. The
  // bound is on the dims with zeros counted as 1 (`extent`): a tensor's strides are products of
  // its trailing dims, so [0, 2^62, 2^62] holds no bytes yet cannot be laid out in int64.
  unsigned __int128 nbytes = dtype_size(e.dtype), extent = dtype_size(e.dtype);
  for (const json& d : shape) {
    uint64_t dim = as_u64(d, path, where + ": each shape entry");
    nbytes *= dim;
    extent *= std::max<uint64_t>(dim, 1);
    if (extent > (unsigned __int128)(INT64_MAX)) invalid(path, where + " has an impossibly large shape " + shape.dump());
    e.shape.push_back(int64_t(dim));
  }

  const json& offsets = spec["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    invalid(path, where + ": data_offsets must be [begin, end], got " + offsets.dump());
  e.begin = as_u64(offsets[0], path, where + ": data_offsets[0]");
  e.end = as_u64(offsets[1], path, where + ": data_offsets[1]");
  if (e.end < e.begin) invalid(path, where + " has data_offsets " + offsets_str(e.begin, e.end) + " with end < begin");
  if (e.end - e.begin != uint64_t(nbytes))
    invalid(path, where + ": shape " + shape.dump() + " of " + dtype.get<std::string>() + " needs " +
                      std::to_string(uint64_t(nbytes)) + " bytes but data_offsets " + offsets_str(e.begin, e.end) +
                      " span " + std::to_string(e.end - e.begin));
  return e;
}

std::map<std::string, std::string> parse_metadata(const std::string& path, const json& meta) {
  std::map<std::string, std::string> out;
  if (meta.is_null()) return out;
  if (!meta.is_object()) invalid(path, "\"__metadata__\" must be an object of strings, got " + meta.dump());
  for (const auto& [key, value] : meta.items()) {
    if (!value.is_string())
      invalid(path, "metadata \"" + key + "\" must be a string (the format maps strings to strings), got " +
                        value.dump());
    out[key] = value.get<std::string>();
  }
  return out;
}

// Sorts entries by offset (stably: header order among equals) and checks that they tile
// [0, data_bytes) exactly: the format has no gaps or overlaps, so anything else means a corrupt
// header. Returns the data length.
uint64_t check_tiling(const std::string& path, std::vector<Entry>& entries) {
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t cursor = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < cursor)
      invalid(path, "tensors '" + previous->name + "' at " + offsets_str(previous->begin, previous->end) + " and '" +
                        e.name + "' at " + offsets_str(e.begin, e.end) + " overlap");
    if (e.begin > cursor)
      invalid(path, "data bytes " + offsets_str(cursor, e.begin) + " belong to no tensor (the next one, '" + e.name +
                        "', starts at " + std::to_string(e.begin) + "); tensors must be stored without gaps");
    cursor = e.end;
    previous = &e;
  }
  return cursor;
}

}  // namespace

SafetensorsContent load_safetensors(const std::string& path) {
  InputFile file(path);
  const uint64_t file_size = file.size();
  if (file_size < 8)
    invalid(path, "truncated: the file has " + std::to_string(file_size) +
                      " bytes, fewer than the 8-byte header length that starts every safetensors file");

  unsigned char prefix[8];
  file.read_exact(prefix, 8);
  uint64_t header_size = 0;
  for (int b = 7; b >= 0; --b) header_size = (header_size << 8) | prefix[b];
  if (header_size > detail::kMaxHeaderBytes)
    invalid(path, "the header length is " + std::to_string(header_size) + " bytes, more than the " +
                      std::to_string(detail::kMaxHeaderBytes) + " allowed (is this a safetensors file?)");
  if (header_size > file_size - 8)
    invalid(path, "truncated: the header length is " + std::to_string(header_size) + " bytes but only " +
                      std::to_string(file_size - 8) + " bytes follow the length prefix");

  std::string header_text(header_size, '\0');
  file.read_exact(header_text.data(), header_text.size());
  json header;
  try {
    header = json::parse(header_text);
  } catch (const json::exception& e) {
    invalid(path, std::string("the header is not valid JSON (") + e.what() + ")");
  }
  if (!header.is_object()) invalid(path, "the header must be a JSON object, got a " + std::string(header.type_name()));

  SafetensorsContent content;
  std::vector<Entry> entries;
  for (const auto& [name, spec] : header.items()) {
    if (name == "__metadata__")
      content.metadata = parse_metadata(path, spec);
    else
      entries.push_back(parse_entry(path, name, spec));
  }
  const uint64_t data_bytes = check_tiling(path, entries);
  const uint64_t available = file_size - 8 - header_size;
  if (data_bytes > available) {
    auto past_end = std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.end > available; });
    invalid(path, "truncated: the header says " + std::to_string(data_bytes) + " data bytes, the file has " +
                      std::to_string(available) + " (tensor '" + past_end->name + "' at " +
                      offsets_str(past_end->begin, past_end->end) + " lies past the end)");
  }
  if (data_bytes < available)
    invalid(path, "the header says " + std::to_string(data_bytes) + " data bytes but the file has " +
                      std::to_string(available) + ": " + std::to_string(available - data_bytes) +
                      " unexpected bytes at the end");

  // With the whole-file checksum, the CRC starts over the prefix and the header as read, its
  // own value read as the placeholder; with the older one, over the data alone.
  uint32_t crc = uint32_t(::crc32(0L, Z_NULL, 0));
  auto file_checksum = content.metadata.find(kFileChecksumKey);
  if (file_checksum != content.metadata.end()) {
    const std::string entry = detail::file_checksum_entry(file_checksum->second);
    const size_t at = header_text.find(entry);
    if (file_checksum->second.size() != 8 || at == std::string::npos)
      invalid(path, "metadata \"" + std::string(kFileChecksumKey) + "\" is " + file_checksum->second +
                        ", not 8 hex digits in the header's own form (" + detail::file_checksum_entry("...") + ")");
    header_text.replace(at, entry.size(), detail::file_checksum_entry(detail::kChecksumPlaceholder));
    crc = detail::crc32_update(crc, prefix, sizeof prefix);
    crc = detail::crc32_update(crc, header_text.data(), header_text.size());
  }
  content.tensors.reserve(entries.size());
  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype, Device::cpu());
    const size_t nbytes = size_t(e.end - e.begin);
    if (nbytes) {
      file.read_exact(t.raw_data(), nbytes);
      crc = detail::crc32_update(crc, t.raw_data(), nbytes);
    }
    content.tensors.emplace_back(e.name, std::move(t));
  }

  if (file_checksum != content.metadata.end()) {
    if (file_checksum->second != detail::crc32_hex(crc))
      invalid(path, "checksum mismatch: the file's CRC-32 is " + detail::crc32_hex(crc) + " but its header records " +
                        file_checksum->second + " (bytes changed on disk or in transfer: a tensor, a name or metadata)");
    return content;
  }
  auto data_checksum = content.metadata.find(kDataChecksumKey);
  if (data_checksum != content.metadata.end() && data_checksum->second != detail::crc32_hex(crc))
    invalid(path, "checksum mismatch: the data section's CRC-32 is " + detail::crc32_hex(crc) +
                      " but the header records " + data_checksum->second + " (bytes changed on disk or in transfer)");
  return content;
}

}  // namespace tandem::io
