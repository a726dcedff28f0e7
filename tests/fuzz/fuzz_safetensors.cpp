// Fuzz target: the safetensors reader (engine/io/safetensors_read.cpp). Input: the file's bytes.
// Allowed outcome besides success: DataError. A success must give tensors whose byte sizes add
// up to the file's data section (8-byte prefix + header + data = the file), and shapes whose
// layout fits int64: the product of the dims, zeros counted as 1, times the element size (the
// largest stride in bytes), which a sanitizer-free build would otherwise overflow silently.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/error.h"
#include "engine/io/safetensors.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const tandem::fuzz::ScratchFile file("safetensors");
  const std::string& path = file.write(data, size);
  try {
    const tandem::io::SafetensorsContent content = tandem::io::load_safetensors(path);
    uint64_t header_bytes = 0;
    std::memcpy(&header_bytes, data, sizeof header_bytes);  // a success means size >= 8
    uint64_t tensor_bytes = 0;
    for (const auto& [name, tensor] : content.tensors) {
      tensor_bytes += uint64_t(tensor.numel()) * tandem::dtype_size(tensor.dtype());
      unsigned __int128 extent = tandem::dtype_size(tensor.dtype());
      for (int64_t dim : tensor.shape()) {
        if (dim < 0) tandem::fuzz::finding("tensor '" + name + "' loaded with a negative dim");
        extent *= uint64_t(std::max<int64_t>(dim, 1));
        if (extent > (unsigned __int128)INT64_MAX)
          tandem::fuzz::finding("tensor '" + name + "' loaded with a shape whose strides overflow int64");
      }
    }
    if (8 + header_bytes + tensor_bytes != size)
      tandem::fuzz::finding("a " + std::to_string(size) + "-byte file with a " + std::to_string(header_bytes) +
                            "-byte header loaded as " + std::to_string(tensor_bytes) + " tensor bytes");
  } catch (const tandem::DataError&) {
  }
  return 0;
}
