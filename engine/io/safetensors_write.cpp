// save_safetensors: tensors to host-contiguous bytes, the JSON header with offsets and the
// checksum, then one atomic write.
#include <zlib.h>

#include <cstdio>
#include <set>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "engine/io/atomic_file.h"
#include "engine/io/safetensors.h"
#include "engine/io/safetensors_format.h"

namespace tandem::io {

namespace detail {

uint32_t crc32_update(uint32_t crc, const void* data, size_t nbytes) {
  const auto* p = static_cast<const Bytef*>(data);
  constexpr size_t kChunk = size_t(1) << 30;
  while (nbytes > 0) {
    size_t n = nbytes < kChunk ? nbytes : kChunk;
    crc = uint32_t(::crc32(uLong(crc), p, uInt(n)));
    p += n;
    nbytes -= n;
  }
  return crc;
}

std::string crc32_hex(uint32_t crc) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", crc);
  return text;
}

}  // namespace detail

namespace {

void check_names(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors) {
  std::set<std::string> seen;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty()) throw ValueError("save_safetensors('" + path + "'): a tensor has an empty name; name every tensor");
    if (name == "__metadata__")
      throw ValueError("save_safetensors('" + path + "'): '__metadata__' is reserved by the format; rename that tensor");
    if (!seen.insert(name).second)
      throw ValueError("save_safetensors('" + path + "'): the name '" + name +
                       "' is given twice; names must be unique");
    if (!tensor.defined())
      throw ValueError("save_safetensors('" + path + "'): tensor '" + name + "' is undefined (an empty handle)");
  }
}

// The bytes to write: on the CPU, contiguous, without autograd history.
Tensor host_contiguous(const Tensor& t) {
  Tensor out = t.detach();
  if (!out.device().is_cpu()) out = out.to(Device::cpu());
  return out.contiguous();
}

}  // namespace

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  check_names(path, tensors);

  std::vector<Tensor> host;
  host.reserve(tensors.size());
  for (const auto& entry : tensors) host.push_back(host_contiguous(entry.second));

  // ordered_json keeps the entries in the order given; the reference writer also puts
  // "__metadata__" first.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  for (const auto& [key, value] : metadata) {
    if (key != kFileChecksumKey && key != kDataChecksumKey) meta[key] = value;
  }
  meta[kFileChecksumKey] = detail::kChecksumPlaceholder;  // the real value once the file's CRC is known
  header["__metadata__"] = std::move(meta);

  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = host[i];
    const uint64_t nbytes = uint64_t(t.numel()) * dtype_size(t.dtype());
    header[tensors[i].first] = {{"dtype", detail::safetensors_dtype_code(t.dtype())},
                                {"shape", t.shape()},
                                {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }

  std::string header_text;
  try {
    header_text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    // dump() rejects strings that are not UTF-8; JSON cannot hold them.
    throw ValueError("save_safetensors('" + path + "'): a tensor name or metadata string is not valid UTF-8 (" +
                     e.what() + "); use UTF-8 text");
  }
  // Pad so the data section starts 8-byte aligned, as the format asks (readers may map it).
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  const uint64_t header_size = header_text.size();
  unsigned char size_prefix[8];
  for (int b = 0; b < 8; ++b) size_prefix[b] = static_cast<unsigned char>(header_size >> (8 * b));

  // The checksum covers the file as written, with its own value read as the placeholder; the
  // placeholder is the metadata's only string of that form (metadata strings cannot hold an
  // unescaped quote), so the reader finds it again.
  uint32_t crc = uint32_t(::crc32(0L, Z_NULL, 0));
  crc = detail::crc32_update(crc, size_prefix, sizeof size_prefix);
  crc = detail::crc32_update(crc, header_text.data(), header_text.size());
  for (const Tensor& t : host) {
    const size_t nbytes = size_t(t.numel()) * dtype_size(t.dtype());
    if (nbytes) crc = detail::crc32_update(crc, t.raw_data(), nbytes);
  }
  const std::string placeholder = detail::file_checksum_entry(detail::kChecksumPlaceholder);
  header_text.replace(header_text.find(placeholder), placeholder.size(), detail::file_checksum_entry(detail::crc32_hex(crc)));

  AtomicFileWriter out(path);
  out.write(size_prefix, sizeof size_prefix);
  out.write(header_text.data(), header_text.size());
  for (const Tensor& t : host) {
    const size_t nbytes = size_t(t.numel()) * dtype_size(t.dtype());
    if (nbytes) out.write(t.raw_data(), nbytes);
  }
  out.commit();
}

}  // namespace tandem::io
