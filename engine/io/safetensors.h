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
// Tandem adds metadata "tandem.checksum": the zlib CRC-32 of the data section as 8 lowercase
// hex digits, so a flipped byte on disk is caught on load. Readers that do not know it ignore it.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor/tensor.h"

namespace tandem::io {

// The metadata key of the data-section checksum.
inline constexpr const char* kChecksumKey = "tandem.checksum";

struct SafetensorsContent {
  // In file order (ascending data offsets), which is the order they were saved in.
  std::vector<std::pair<std::string, Tensor>> tensors;
  // The file's "__metadata__", as stored (including "tandem.checksum" when present).
  std::map<std::string, std::string> metadata;
};

// Writes tensors (any device, dtype, layout; moved to the CPU and made contiguous for writing)
// under their names, in the order given, plus metadata and the checksum. Atomic and durable
// (see atomic_file.h): on failure the file at path is left as it was, no temporary file
// remains, and a DataError names the path and the system's reason. Duplicate, empty or
// reserved ("__metadata__") names are a ValueError.
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads a file written by any safetensors writer into CPU tensors. Validates everything
// before trusting it: file size, header length, JSON syntax, each entry's dtype, shape and
// offsets, that the entries tile the data section and that its length matches the file, and
// the checksum when present. Anything wrong is a DataError naming the file and the problem,
// e.g. "truncated: the header says 4096 data bytes, the file has 1000".
SafetensorsContent load_safetensors(const std::string& path);

}  // namespace tandem::io
