// Integers read from JSON that came from a file (checkpoint state). nlohmann's get<int64_t>()
// converts a stored float such as 8.4e19 with undefined behaviour, and any integer passes, so
// state from a damaged or edited file is read through this check instead.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace tandem {

// Largest counter a checkpoint may hold: JSON's exact integers, and room to add to it.
inline constexpr int64_t kMaxJsonCounter = (int64_t(1) << 53) - 1;

// `value` as an integer in [lo, hi]; DataError naming `what` (e.g. "checkpoint 'a.safetensors':
// trainer state epoch") otherwise.
inline int64_t json_integer(const nlohmann::json& value, const std::string& what, int64_t lo, int64_t hi) {
  // nlohmann stores non-negative integers as unsigned; hi >= 0 for every caller.
  const bool fits = value.is_number_unsigned() ? value.get<uint64_t>() <= uint64_t(std::max<int64_t>(hi, 0))
                                               : value.is_number_integer();
  const bool in_range = fits && value.get<int64_t>() >= lo && value.get<int64_t>() <= hi;
  if (!in_range)
    throw DataError(what + " = " + value.dump() + ", expected an integer from " + std::to_string(lo) + " to " +
                    std::to_string(hi) + "; the checkpoint is corrupt: use another one");
  return value.get<int64_t>();
}

}  // namespace tandem
