// Safetensors files: the standard format Hugging Face and PyTorch users read with
// `safetensors.torch.load_file`, so weights saved here open there and the other way round.
//
// Layout (all integers little-endian):
//   [8 bytes]  N, u64: the length of the JSON header
//   [N bytes]  JSON header, padded with spaces so that 8 + N is a multiple of 8:
//              {"<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//               "__metadata__": {"<key>": "<string value>", ...}}
//   [rest]     the data section: each tensor's bytes, row-major and contiguous, at
//              [begin, end) relative to the start of this section. Tensors tile the section
//              in order, without gaps or overlaps.
// dtypes: F32 F64 F16 BF16 I32 I64 U8 BOOL (one byte per element, 0 or 1).
//
// Tandem adds metadata "tandem.file_crc32": the zlib CRC-32, as 8 lowercase hex digits, of the
// whole file (length prefix, header, padding and data) as it would read with those 8 digits
// written as "00000000". So a flipped byte anywhere, in a tensor, a tensor's name, dtype or
// shape, or another metadata string, is caught on load. Readers that do not know it ignore it.
// Files written before it (Tandem checkpoint format 1) carry "tandem.checksum" instead: the
// CRC-32 of the data section alone, still verified when present.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace tandem::io {

// The metadata key of the whole-file checksum.
inline constexpr const char* kFileChecksumKey = "tandem.file_crc32";
// The metadata key of the data-section checksum older files carry (verified, never written).
inline constexpr const char* kDataChecksumKey = "tandem.checksum";

struct SafetensorsContent {
  // In file order (ascending data offsets), which is the order they were saved in.
  std::vector<std::pair<std::string, Tensor>> tensors;
  // The file's "__metadata__", as stored (including the checksum).
  std::map<std::string, std::string> metadata;
};

// Writes tensors (any device, dtype, layout; moved to the CPU and made contiguous for writing)
// under their names, in the order given, plus metadata and the whole-file checksum (a
// checksum key in metadata, e.g. from a loaded file, is replaced). Atomic and durable
// (see atomic_file.h): on failure the file at path is left as it was, no temporary file
// remains, and a DataError names the path and the system's reason. Duplicate, empty or
// reserved ("__metadata__") names are a ValueError.
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads a file written by any safetensors writer into CPU tensors. Validates everything
// before trusting it: file size, header length, JSON syntax, each entry's dtype, shape and
// offsets, that the entries tile the data section and that its length matches the file, and
// the checksum when present (the whole-file one, else the older data-section one). Anything
// wrong is a DataError naming the file and the problem, e.g. "truncated: the header says 4096
// data bytes, the file has 1000".
SafetensorsContent load_safetensors(const std::string& path);

}  // namespace tandem::io
