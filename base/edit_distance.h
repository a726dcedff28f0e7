// Edit distance, for "did you mean --trainer.devices?" suggestions.
#pragma once
#include <string>
#include <vector>

namespace tandem {

// Levenshtein distance (insert, delete, substitute each cost 1).
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate closest to `word`, or "" when none is close enough to be a plausible typo
// (distance at most a third of the word's length, and at least 2 allowed).
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace tandem
