// Fuzz target: the IDX reader (engine/data/idx_reader.cpp), raw or gzipped. Input: the file's
// bytes, read with each expected rank the data modules ask for (any, labels 1, images 3).
// Allowed outcome besides success: DataError. A success must hold exactly prod(dims) bytes.
#include <cstdint>

#include "base/error.h"
#include "engine/data/idx_reader.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const tandem::fuzz::ScratchFile file("idx");
  const std::string& path = file.write(data, size);
  for (int expected_ndims : {0, 1, 3}) {
    try {
      const tandem::data::IdxArray array = tandem::data::read_idx(path, expected_ndims);
      if (array.numel() != int64_t(array.data.size()))
        tandem::fuzz::finding("dims hold " + std::to_string(array.numel()) + " elements, the payload " +
                              std::to_string(array.data.size()));
      if (expected_ndims > 0 && int(array.dims.size()) != expected_ndims)
        tandem::fuzz::finding("read " + std::to_string(array.dims.size()) + " dims where " +
                              std::to_string(expected_ndims) + " were required");
    } catch (const tandem::DataError&) {
    }
  }
  return 0;
}
