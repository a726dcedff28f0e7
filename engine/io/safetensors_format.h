// What the safetensors reader and writer share: dtype codes, limits, the checksum.
// Internal to engine/io; users include safetensors.h.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "base/dtype.h"
#include "engine/io/safetensors.h"

namespace tandem::io::detail {

// The format is little-endian and both sides copy tensor bytes as they are in memory.
static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host; add byte swapping for this one");

// Headers beyond this are treated as corrupt rather than allocated: the reference reader uses
// the same 100 MB bound, and even large trainer states are a few KB.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

inline constexpr const char* kSupportedDtypes = "F32, F64, F16, BF16, I32, I64, U8, BOOL";

inline const char* safetensors_dtype_code(DType t) {
  switch (t) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::Float16: return "F16";
    case DType::BFloat16: return "BF16";
    case DType::Int32: return "I32";
    case DType::Int64: return "I64";
    case DType::UInt8: return "U8";
    case DType::Bool: return "BOOL";
  }
  return "?";
}

inline std::optional<DType> dtype_from_safetensors_code(const std::string& code) {
  for (DType t : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32, DType::Int64,
                  DType::UInt8, DType::Bool})
    if (code == safetensors_dtype_code(t)) return t;
  return std::nullopt;
}

// The whole-file checksum's entry as the writer's header text holds it (no spaces), and the
// value it has while the checksum is computed.
inline constexpr const char* kChecksumPlaceholder = "00000000";
inline std::string file_checksum_entry(const std::string& value) {
  return std::string("\"") + kFileChecksumKey + "\":\"" + value + "\"";
}

// Running zlib CRC-32 (crc32 takes a 32-bit length, so large buffers go in chunks).
uint32_t crc32_update(uint32_t crc, const void* data, size_t nbytes);
std::string crc32_hex(uint32_t crc);  // 8 lowercase hex digits

}  // namespace tandem::io::detail
